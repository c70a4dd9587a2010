"""Record the real RM answers the client tests need beyond tests/fixtures/record.py.

Run ``python tests/client/record_rm_extra.py`` (Java + the mini cluster's Maven jars).
It starts the harness's memory-store Capacity Scheduler cluster and saves, as JSON
files under tests/fixtures/rm-client/ (status, content type, body):

- ``validate-accepted``/``validate-refused``: POST /scheduler-conf/validate;
- ``unknown-path-404``: a path this RM does not serve, i.e. what an RM without the
  validate endpoint answers;
- ``wrong-method-405``: a method the path does not accept.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import requests

from yarn_adapt.minicluster import MiniCluster, MiniClusterSpec

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "rm-client"
ACCEPTED = """<sched-conf><update-queue><queue-name>root.a</queue-name><params>
<entry><key>capacity</key><value>50</value></entry></params></update-queue>
<update-queue><queue-name>root.b</queue-name><params>
<entry><key>capacity</key><value>10</value></entry></params></update-queue></sched-conf>"""
REFUSED = """<sched-conf><update-queue><queue-name>root.a</queue-name><params>
<entry><key>capacity</key><value>80</value></entry></params></update-queue></sched-conf>"""
XML = {"Accept": "application/json", "Content-Type": "application/xml"}


def capture(method: str, url: str, body: str | None = None) -> dict[str, object]:
    response = requests.request(
        method, url, data=body, headers=XML, params={"user.name": "yarn-adapt"}, timeout=60
    )
    return {
        "request": f"{method} {url.split('/ws/', 1)[1]}",
        "status": response.status_code,
        "content_type": response.headers.get("Content-Type", ""),
        "body": response.text,
    }


def record(cluster: MiniCluster) -> dict[str, dict[str, object]]:
    base = f"{cluster.rm_url}/ws/v1/cluster"
    return {
        "validate-accepted": capture("POST", f"{base}/scheduler-conf/validate", ACCEPTED),
        "validate-refused": capture("POST", f"{base}/scheduler-conf/validate", REFUSED),
        "unknown-path-404": capture("POST", f"{base}/scheduler-conf/no-such-endpoint", ACCEPTED),
        "wrong-method-405": capture("DELETE", f"{base}/scheduler-conf"),
    }


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with MiniCluster(MiniClusterSpec(scheduler="capacity", conf_store="memory")) as cluster:
        answers = record(cluster)
    for name, answer in answers.items():
        (OUT / f"{name}.json").write_text(json.dumps(answer, indent=2, sort_keys=True) + "\n")
        print(f"{name}: HTTP {answer['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
