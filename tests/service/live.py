"""A service wired to the real mini YARN cluster (RM + NM + JobHistory), for the
live acceptance tests."""

from __future__ import annotations

import getpass
from pathlib import Path

import requests

from tests.service.factories import TOKEN, FixedProposer, settings_for
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.proposers.choose import snapshot_proposer
from yarn_adapt.service.proposers.seam import Proposer
from yarn_adapt.service.service import Service
from yarn_adapt.service.settings import Settings

# The mini cluster starts at default 40 / a 30 / b 30.
PROPOSED = {"default": 20.0, "a": 50.0, "b": 30.0}


def live_settings(cluster: MiniCluster, tmp_path: Path, **tables: dict[str, object]) -> Settings:
    base: dict[str, dict[str, object]] = {
        "yarn": {
            "rm": [cluster.rm_url],
            "history": cluster.jhs_url,
            "user": getpass.getuser(),
            "retries": 0,
            "timeout_s": 10.0,
        },
        "scheduler": {
            "file": str(cluster.scheduler_xml_path),
            "refresh_command": list(cluster.refresh_command),
            "verify_timeout_s": 30.0,
        },
        "http": {"port": 0},
    }
    for table, values in tables.items():
        base.setdefault(table, {}).update(values)
    return settings_for(tmp_path, **base)


def live_service(
    cluster: MiniCluster,
    tmp_path: Path,
    proposer: Proposer | None = None,
    **tables: dict[str, object],
) -> Service:
    settings = live_settings(cluster, tmp_path, **tables)
    stand_in = FixedProposer(capacities=PROPOSED)
    return Service.build(settings, YarnBackend(settings), proposer or stand_in, token=TOKEN)


def reported_capacities(cluster: MiniCluster) -> dict[str, float]:
    queues = cluster.rm_get("scheduler")["scheduler"]["schedulerInfo"]["queues"]["queue"]
    return {q["queueName"]: round(float(q["capacity"]), 1) for q in queues}


def api(base_url: str, method: str, path: str, token: str | None = TOKEN) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.request(method, base_url + path, headers=headers, timeout=120)


def snapshot_proposer_for(cluster: MiniCluster, tmp_path: Path) -> Proposer:
    """The real tuner, reading the RM's snapshot (and JobHistory) as ``serve`` does."""
    return snapshot_proposer(live_settings(cluster, tmp_path))
