""" "Used" means one thing (issue 29, item 4): the share of the whole cluster a queue
holds, as the scheduler measures it -- so leaves never add up to more than their
parent -- and ``observe`` names the RM's used-of-guarantee as such."""

from __future__ import annotations

from tests.service.factories import CONTAINER, demo_file
from yarn_adapt.cli.observe import _queue_text
from yarn_adapt.model import Resources, TaskType
from yarn_adapt.model.scheduler_state import QueueStatus
from yarn_adapt.model.workload import JobSpec, TaskSpec
from yarn_adapt.service.state.usage import usage_of_jobs
from yarn_adapt.sim import JobInProgress, RunningContainer
from yarn_adapt.yarn.confxml import read_capacity

AM = Resources(1024, 1)


def _job(job_id: str, queue: str, running: int) -> JobInProgress:
    task = TaskSpec(TaskType.MAP, 600.0, CONTAINER)
    spec = JobSpec(id=job_id, submit_s=0.0, queue=queue, tasks=(task,) * running, am_resources=AM)
    return JobInProgress(spec, tuple(RunningContainer(task, 1.0) for _ in range(running)), 0.5)


def test_leaves_never_hold_more_than_their_parent() -> None:
    """8 containers of 2 GB / 1 vcore: 3 tasks and 2 ApplicationMasters of 1 GB in each
    leaf fill the memory exactly while over-committing vcores (10 of 8), which the
    Capacity Scheduler's default calculator does not count."""
    config = read_capacity(demo_file()).config
    jobs = (_job("a", "q1", 3), _job("b", "q1", 0), _job("c", "q2", 3), _job("d", "q2", 0))
    usage = {u.queue: u.used_percent for u in usage_of_jobs(jobs, CONTAINER * 8, config)}
    assert usage == {"root": 100.0, "root.q1": 50.0, "root.q2": 50.0}
    assert usage["root.q1"] + usage["root.q2"] <= usage["root"]


def test_observe_names_each_share_for_what_it_is() -> None:
    queue = QueueStatus(
        "root.q1", "RUNNING", capacity=50.0, maximum_capacity=100.0,
        used_capacity=25.0, absolute_used_capacity=12.5, used=Resources(4096, 4),
        num_applications=2,
    )  # fmt: skip
    line = _queue_text(queue)
    assert "holds <memory:4096MB, vCores:4> (12.5% of the cluster, 25.0% of its guarantee)" in line
    assert line.count("used") == 0
