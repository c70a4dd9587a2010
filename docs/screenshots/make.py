"""Regenerate the console screenshots in docs/screenshots/ (docs/demo.md's tour uses them).

    python docs/screenshots/make.py [--rounds 10]

Runs the demo in-process (the real tuner on the bundled FB-2009 trace, review mode),
approves its proposals through the desk as a named operator on the page would (with a
reason), reverts to the first version once, judges the run as the demo does at its
end, and photographs the pages in headless Chromium (/usr/bin/chromium, as the
browser tests use), signed in with that operator's token."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service as DriverService

from yarn_adapt.service.demo.replay import DemoOptions, build_demo, note_round, run_summary
from yarn_adapt.service.state.records import ProposalState
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.console_routes import revert
from yarn_adapt.service.web.operators import OperatorTokens
from yarn_adapt.service.web.server import WebServer

HERE = Path(__file__).resolve().parent
WIDTH = 1360


def browser(profile: Path) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(service=DriverService("/usr/bin/chromedriver"), options=options)


def shoot(driver: webdriver.Chrome, url: str, name: str, unfold: bool = False) -> None:
    driver.set_window_size(WIDTH, 900)
    driver.get(url)
    if unfold:
        for summary in driver.find_elements("css selector", "details.jobs-details summary"):
            summary.click()
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WIDTH, min(int(height) + 20, 4000))
    driver.save_screenshot(str(HERE / f"{name}.png"))
    print(f"wrote {HERE / name}.png")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="yarn-adapt-shots-"))
    options = DemoOptions(state_dir=state, review=True, token="x" * 24, port=0)
    service = build_demo(options)
    operator = OperatorTokens(service.store).issue("alice", "make.py")
    actor, why = "alice (web)", "the q1 backlog keeps growing"
    last_pending = None
    rounds = 0
    for number in range(args.rounds):
        note_round(service, service.loop.run_round())
        rounds += 1
        pending = service.store.proposals(limit=1, states=[ProposalState.PENDING])
        if pending and number < args.rounds - 1:  # leave the last one waiting on the page
            service.desk.approve(pending[0].id, actor, why)
        elif pending:
            last_pending = pending[0].id
    versions = service.store.versions()
    if len(versions) > 1:
        reverted = revert(service, versions[-1].id, actor)
        service.desk.approve(reverted.id, actor, "back to the start for the tour")
    for _ in range(6):  # end with a proposal waiting for review, marked on the tree
        note_round(service, service.loop.run_round())
        rounds += 1
        pending = service.store.proposals(limit=1, states=[ProposalState.PENDING])
        if pending:
            last_pending = pending[0].id
            break
    run_summary(service, options, rounds)
    server = WebServer(create_app(service), "127.0.0.1", 0).start()
    driver = browser(state / "profile")
    try:
        driver.get(server.url + "/login")
        driver.find_element("id", "token").send_keys(operator.token)
        driver.find_element("id", "sign-in-submit").click()
        shoot(driver, server.url + "/?refresh=off", "overview")
        checked = {c.proposal_id for c in service.store.prediction_errors()}
        applied = [
            p for p in service.store.proposals(limit=50) if p.groups and p.state != "pending"
        ]
        shown = [p for p in applied if p.id in checked] or applied
        if shown:
            shoot(driver, f"{server.url}/proposals/{shown[-1].id}", "proposal", unfold=True)
        if last_pending:
            shoot(driver, f"{server.url}/proposals/{last_pending}", "pending")
            shoot(driver, f"{server.url}/proposals/{last_pending}/confirm/approve", "confirm")
        shoot(driver, server.url + "/versions", "versions")
        listed = service.store.versions()
        if len(listed) > 1:
            shoot(
                driver,
                f"{server.url}/versions/diff?from={listed[-1].id}&to={listed[1].id}",
                "version-diff",
            )
    finally:
        driver.quit()
        server.stop()
        service.close()


if __name__ == "__main__":
    main()
