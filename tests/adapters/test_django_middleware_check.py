"""`manage.py check` finds pactmw's middleware however `MIDDLEWARE` names it: by the
package's short path, by its module's own path, or as a site's subclass (as Django's admin
checks find `AuthenticationMiddleware`), and warns (pactmw.W001) only when it is absent."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.adapters.commands import django_check
from tests.adapters.tokens import AgentKey, jwks
from tests.support.parties import AUDIENCE

pytestmark = pytest.mark.timeout(120)


def _check(tmp_path: Path, middleware: str) -> subprocess.CompletedProcess[str]:
    key = AgentKey.generate("ES256", "k1")
    settings = {
        "audience": AUDIENCE,
        "agents": [{"issuer": "https://pa.example", "jwks": jwks(key)}],
    }
    return django_check(
        settings,
        tmp_path / "pactmw.json",
        DJANGO_SETTINGS_MODULE="pactmw_testsite.middleware_settings",
        PACTMW_TEST_MIDDLEWARE=middleware,
    )


@pytest.mark.parametrize(
    "middleware",
    [
        "pactmw.adapters.django.PersonalAgentMiddleware",
        "pactmw.adapters.django.middleware.PersonalAgentMiddleware",
        "pactmw_testsite.custom_middleware.SiteAgentMiddleware",
    ],
)
def test_the_middleware_is_found_however_it_is_named(tmp_path: Path, middleware: str) -> None:
    done = _check(tmp_path, middleware)
    assert done.returncode == 0, done.stderr
    assert "pactmw.W001" not in done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_a_site_without_the_middleware_is_warned(tmp_path: Path) -> None:
    done = _check(tmp_path, "")
    assert done.returncode == 0, done.stderr
    assert "pactmw.W001" in done.stderr
    assert "pactmw.adapters.django.PersonalAgentMiddleware is not in MIDDLEWARE" in done.stderr
