"""Starting a simulation from an observed cluster state instead of an empty cluster.

The tuner simulates forward from "now": jobs already running hold containers (so
their queues' usage is what the RM reports), others wait. A minimal description is
enough for that:

* every job in progress is a :class:`JobInProgress` whose ``job.tasks`` are the
  tasks *not yet started* and whose ``running`` are the containers it holds now;
* ``am_started_s`` set means the job's ApplicationMaster runs (the job is active in
  its queue and charged against the AM limit even if that limit is now lower);
  ``None`` means the job still waits for its AM and is submitted again at the start
  time, keeping its original ``submit_s`` for latency;
* a running container ends at ``started_s + task.duration_s`` (at once if that is
  already past); it sits on ``node_id``, or on the first node with room when the
  node is unknown or full.

Queue usage follows from the containers; the simulation clock starts at
``time_s``. Reduces wait for the job's maps as usual.
"""

from __future__ import annotations

from dataclasses import dataclass

from yarn_adapt.model.workload import JobSpec, TaskSpec


@dataclass(frozen=True)
class RunningContainer:
    task: TaskSpec
    started_s: float
    node_id: str | None = None


@dataclass(frozen=True)
class JobInProgress:
    job: JobSpec
    running: tuple[RunningContainer, ...] = ()
    am_started_s: float | None = None
    am_node_id: str | None = None


@dataclass(frozen=True)
class SimulationStart:
    time_s: float
    jobs: tuple[JobInProgress, ...] = ()
