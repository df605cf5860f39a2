"""A real headless Chromium, driven by Selenium with Debian's chromedriver (never downloaded).

`.ci/run` installs `chromium` and `chromium-driver`; without them these tests fail (a skip
would let CI pass without ever opening the consent page in a browser).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: Every explicit wait in these tests gives up after this many seconds.
WAIT = 15.0


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WebDriver]:
    """A fresh headless Chromium (own profile in tmp); quit whatever the test does."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # An explicit driver and browser path keep Selenium Manager out; offline in case it runs.
    monkeypatch.setenv("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--window-size=1024,900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(argument)
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=str(CHROMEDRIVER), log_output=str(tmp_path / "driver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        driver.set_page_load_timeout(WAIT)
        driver.set_script_timeout(WAIT)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "chromium-profile", ignore_errors=True)
