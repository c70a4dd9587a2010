"""Record what a real standby ResourceManager answers, for the HA fault tests.

Run ``python tests/client/record_ha.py`` (needs Java and the Maven jars the mini
cluster uses). It starts a real HA pair (yarn_adapt.minicluster.ha), asks both RMs,
and writes each answer (status, the headers that matter, body) as JSON under
tests/fixtures/rm-ha/. The fault tests replay these from local servers, changing
only the port in a Location header so that it points at the replaying server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import requests

from yarn_adapt.minicluster.ha import HAResourceManagerPair

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "rm-ha"
KEPT_HEADERS = ("Content-Type", "Location", "Refresh")


def capture(url: str) -> dict[str, object]:
    response = requests.get(
        url, headers={"Accept": "application/json"}, allow_redirects=False, timeout=30
    )
    headers = {name: response.headers[name] for name in KEPT_HEADERS if name in response.headers}
    return {"url": url, "status": response.status_code, "headers": headers, "body": response.text}


def record(pair: HAResourceManagerPair) -> dict[str, dict[str, object]]:
    active, standby = pair.web_url("rm1"), pair.web_url("rm2")
    found = {
        "active-info": capture(f"{active}/ws/v1/cluster/info"),
        "standby-info": capture(f"{standby}/ws/v1/cluster/info"),
        "standby-redirect-metrics": capture(f"{standby}/ws/v1/cluster/metrics"),
    }
    pair.transition("rm1", "standby")
    found["no-active-metrics"] = capture(f"{standby}/ws/v1/cluster/metrics")
    # RMWebAppFilter stops asking clients to refresh once the next wait would exceed
    # 300 s; refresh interval 7 gives 5 * 2**7 * [0.5, 1.5) s, always beyond it.
    found["no-active-gave-up-metrics"] = capture(
        f"{standby}/ws/v1/cluster/metrics?next.refresh.interval=7"
    )
    return found


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with HAResourceManagerPair() as pair:
        answers = record(pair)
    for name, answer in answers.items():
        (OUT / f"{name}.json").write_text(json.dumps(answer, indent=2, sort_keys=True) + "\n")
        print(f"{name}: HTTP {answer['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
