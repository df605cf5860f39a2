"""A Django project that installed pactmw but has no `settings.PACTMW` yet is told that, the
words `manage.py check` uses (pactmw.E002), wherever it looks: the server's log and
`manage.py pactmw`. Its first key is not reported as missing from a setting that is not
there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.adapters.commands import CHECKOUT_ENV, django_environment
from tests.support.servers import REPO, django_server

pytestmark = pytest.mark.timeout(120)

SETTINGS = "pactmw_testsite.unset_settings"
SAID = "settings.PACTMW is missing or not a dict"


def _django(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m django ARGV` of the test project without its `PACTMW`."""
    unused = tmp_path / "unused.json"  # the base settings read one before SETTINGS drops it
    unused.write_text("{}")
    return subprocess.run(
        [sys.executable, "-m", "django", *argv],
        env={**django_environment(unused), "DJANGO_SETTINGS_MODULE": SETTINGS},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_server_without_the_setting_logs_that_it_is_missing(tmp_path: Path) -> None:
    server = django_server(
        {}, asgi=True, settings=SETTINGS, workdir=tmp_path, name="site", extra_env=CHECKOUT_ENV
    )
    with server as base:
        for _ in range(2):
            answer = httpx.get(f"{base}/a2a/acme/.well-known/agent-card.json")
            assert (answer.status_code, answer.content) == (503, b"")
        assert httpx.get(f"{base}/public").status_code == 200
    said = (tmp_path / "site.log").read_text()
    assert said.count(SAID) == 1, said  # logged once
    assert "pactmw.E002" in said
    assert "audience is required" not in said


def test_manage_py_pactmw_says_the_setting_is_missing(tmp_path: Path) -> None:
    done = _django(tmp_path, "pactmw", "grants", "list")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"pactmw is not configured: {SAID}" in done.stderr
    assert done.stderr.count(SAID) == 1, done.stderr  # not the server's log line as well
    assert "audience" not in done.stderr


def test_manage_py_check_says_the_setting_is_missing(tmp_path: Path) -> None:
    done = _django(tmp_path, "check")
    assert done.returncode != 0, done.stdout + done.stderr
    assert f"pactmw.E002) {SAID}" in done.stderr
