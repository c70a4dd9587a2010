"""Fixtures of the service tests: a headless Debian Chromium driven by Selenium
(no browser download: the system's /usr/bin/chromium and /usr/bin/chromedriver,
installed by tests/setup.sh)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[object]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        from tests.conftest import unavailable

        unavailable("chromium and chromium-driver are not installed (tests/setup.sh installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tmp_path / "chromium-profile"
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # network requests
    driver = webdriver.Chrome(
        service=DriverService(executable_path=str(CHROMEDRIVER)), options=options
    )
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
