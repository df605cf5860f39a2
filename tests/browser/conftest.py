"""A real headless Chromium, driven by Selenium with Debian's chromedriver (never downloaded).

`.ci/run` installs `chromium` and `chromium-driver`; without them these tests fail (a skip
would let CI pass without ever opening the consent page in a browser).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.chromium import headless_chromium

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    """A fresh headless Chromium (own profile in tmp); quit whatever the test does."""
    with headless_chromium(tmp_path / "chromium-profile") as driver:
        yield driver
