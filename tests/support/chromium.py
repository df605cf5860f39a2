"""Debian's headless Chromium driven by Selenium (never downloaded), for every test that
needs a person in a browser (tests/browser's `browser` fixture too), with extra command-line
arguments where a test world needs them (its host mapping and its certificate)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["CHROMEDRIVER", "CHROMIUM", "WAIT", "headless_chromium", "spki_pin"]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: Every explicit wait gives up after this many seconds.
WAIT = 15.0


def spki_pin(certificate_pem: bytes) -> str:
    """base64(SHA-256(SubjectPublicKeyInfo)) of a certificate: what Chromium's
    `--ignore-certificate-errors-spki-list` trusts, that one key and nothing else."""
    key = x509.load_pem_x509_certificate(certificate_pem).public_key()
    der = key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode("ascii")


@contextlib.contextmanager
def headless_chromium(profile: Path, *arguments: str) -> Iterator[WebDriver]:
    """A fresh headless Chromium with its own profile directory; quit afterwards.

    Fails (never skips) without Debian's chromium and chromium-driver: `.ci/run` installs
    them, and a skip would let CI pass without a person ever approving in a browser.
    """
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        raise RuntimeError("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # An explicit driver and browser path keep Selenium Manager out; offline in case it runs.
    os.environ.setdefault("SE_OFFLINE", "true")
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
        f"--user-data-dir={profile}",
        *arguments,
    ):
        options.add_argument(argument)
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console, for get_log
    service = Service(executable_path=str(CHROMEDRIVER), log_output=str(profile) + ".driver.log")
    driver = webdriver.Chrome(service=service, options=options)
    try:
        driver.set_page_load_timeout(WAIT)
        driver.set_script_timeout(WAIT)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
