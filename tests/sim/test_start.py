"""Starting from an observed state: running containers hold resources and finish
on time, waiting jobs keep their submission time, reduces still wait for maps."""

from __future__ import annotations

from tests.sim.factories import capacity_leaf, capacity_tree, cluster, job, workload
from yarn_adapt.model import JobSpec, QueueState, TaskSpec, TaskType, Workload
from yarn_adapt.sim import (
    HeartbeatMode,
    JobInProgress,
    JobStatus,
    RunningContainer,
    SimulationOptions,
    SimulationStart,
    simulate,
)

CONFIG = capacity_tree(
    capacity_leaf("a", 50, 100, user_limit_factor=10.0),
    capacity_leaf("b", 50, 100, user_limit_factor=10.0),
)
OPTIONS = SimulationOptions(heartbeat_mode=HeartbeatMode.CONTINUOUS, sample_interval_s=5.0)
MAP = TaskSpec(TaskType.MAP, 10.0)
REDUCE = TaskSpec(TaskType.REDUCE, 5.0)


def in_progress(
    pending: tuple[TaskSpec, ...], running: tuple[TaskSpec, ...], started: float = 95.0
) -> JobInProgress:
    spec = JobSpec("old", 90.0, "a", pending)
    return JobInProgress(
        spec,
        running=tuple(RunningContainer(t, started, "node-0001") for t in running),
        am_started_s=91.0,
        am_node_id="node-0001",
    )


def test_running_job_continues_from_the_snapshot() -> None:
    # t=100: AM + two maps (ending at 105) hold 3 of 4 containers; two maps and a
    # reduce wait. One map runs 100-110, the other 105-115, the reduce 115-120.
    start = SimulationStart(100.0, (in_progress((MAP, MAP, REDUCE), (MAP, MAP)),))
    result = simulate(Workload(()), CONFIG, cluster(1, 4), OPTIONS, start=start)
    old = result.job("old")
    assert old.status is JobStatus.FINISHED
    assert (old.submit_s, old.start_s, old.finish_s) == (90.0, 91.0, 120.0)
    # at t=100 the queue holds the 3 adopted containers plus the map granted at once
    assert result.queue_usage["root.a"].memory_mb[0] == 4 * 1024


def test_snapshot_usage_holds_back_new_jobs() -> None:
    # the old job holds all 4 containers until 105; a new job submitted at 101 waits
    start = SimulationStart(100.0, (in_progress((), (MAP, MAP, MAP)),))
    new = workload(job("new", "b", submit=101.0, duration=10))
    result = simulate(new, CONFIG, cluster(1, 4), OPTIONS, start=start)
    assert result.queue_usage["root.a"].memory_mb[0] == 4 * 1024  # AM + 3 maps
    assert result.job("new").start_s == 105.0


def test_waiting_job_is_submitted_at_the_start_and_keeps_its_submit_time() -> None:
    waiting = JobInProgress(JobSpec("w", 50.0, "b", (MAP,)))
    start = SimulationStart(100.0, (waiting,))
    result = simulate(Workload(()), CONFIG, cluster(1, 4), OPTIONS, start=start)
    w = result.job("w")
    assert (w.submit_s, w.start_s, w.finish_s) == (50.0, 100.0, 110.0)
    assert w.wait_s == 50.0


def test_reduce_already_running_while_maps_remain() -> None:
    # MapReduce slow-start: a reduce runs (until 115) while a map is still pending;
    # the job ends when both the map (100-110) and that reduce are done
    start = SimulationStart(100.0, (in_progress((MAP,), (TaskSpec(TaskType.REDUCE, 20.0),)),))
    result = simulate(Workload(()), CONFIG, cluster(1, 4), OPTIONS, start=start)
    assert result.job("old").finish_s == 115.0


def test_finished_running_containers_end_at_the_start() -> None:
    start = SimulationStart(100.0, (in_progress((), (MAP,), started=10.0),))
    result = simulate(Workload(()), CONFIG, cluster(1, 4), OPTIONS, start=start)
    assert result.job("old").finish_s == 100.0


def test_observed_waiting_job_keeps_its_fifo_place() -> None:
    # the snapshot's waiting job was submitted before the new one: FIFO serves it first
    waiting = JobInProgress(JobSpec("earlier", 50.0, "a", (MAP,)))
    later = workload(job("later", "a", submit=100.0, duration=10))
    options = SimulationOptions(am_containers=False)
    result = simulate(
        later, CONFIG, cluster(1, 1), options, start=SimulationStart(100.0, (waiting,))
    )
    earlier_start, later_start = result.job("earlier").start_s, result.job("later").start_s
    assert earlier_start is not None and later_start is not None
    assert earlier_start < later_start
    assert [j.id for j in result.jobs] == ["earlier", "later"]


def test_jobs_the_rm_accepted_stay_when_their_queue_now_admits_fewer() -> None:
    """Three waiting jobs accepted before a refresh that lowered root.a's
    maximum-applications to 1 and stopped root.b: YARN checks both at submission
    only, so the accepted jobs run; a job submitted afterwards is refused."""
    limited = capacity_tree(
        capacity_leaf(
            "a",
            50,
            100,
            user_limit_factor=10.0,
            other_properties=(("maximum-applications", "1"),),
        ),
        capacity_leaf("b", 50, 100, user_limit_factor=10.0, state=QueueState.STOPPED),
    )
    accepted = tuple(JobInProgress(JobSpec(f"w{i}", 50.0 + i, "a", (MAP,))) for i in range(3))
    start = SimulationStart(100.0, (*accepted, JobInProgress(JobSpec("wb", 60.0, "b", (MAP,)))))
    late = workload(job("late", "a", submit=101.0, duration=10))
    result = simulate(late, limited, cluster(1, 8), OPTIONS, start=start)
    for name in ("w0", "w1", "w2", "wb"):
        assert result.job(name).status is JobStatus.FINISHED, name
    assert result.job("late").status is JobStatus.REJECTED
