"""`manage.py check` warns (pactmw.W003) when `PACTMW` lists brands but the site's URLconf
does not route `/a2a/{brand}/` to pactmw's view (`urlpatterns += a2a_urlpatterns()`
forgotten): every agent would get a 404, and nothing would say why."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.commands import django_check
from tests.adapters.tokens import AgentKey, jwks
from tests.support.parties import AUDIENCE

pytestmark = pytest.mark.timeout(120)


def _check(tmp_path: Path, settings_module: str, **brand: Any) -> subprocess.CompletedProcess[str]:
    key = AgentKey.generate("ES256", "k1")
    settings: dict[str, Any] = {
        "base_url": "https://shop.example",
        "audience": AUDIENCE,
        "agents": [{"issuer": "https://pa.example", "jwks": jwks(key)}],
        "store": "memory://",
        "brands": {"acme": {"name": "Acme", "handler": "examples.bots:order_bot", **brand}},
    }
    return django_check(settings, tmp_path / "pactmw.json", DJANGO_SETTINGS_MODULE=settings_module)


def test_brands_without_the_providers_urls_are_warned(tmp_path: Path) -> None:
    done = _check(tmp_path, "pactmw_testsite.settings")  # its urls.py has no a2a_urlpatterns
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, said  # a warning: the site still starts
    assert "pactmw.W003" in said
    assert "no URL pattern routes /a2a/acme/ to pactmw's view" in said
    assert "urlpatterns += a2a_urlpatterns()" in said


def test_the_urls_are_warned_beside_another_warning(tmp_path: Path) -> None:
    # A same-app delegation on a site without request.user is pactmw.W002; the missing URLs
    # are still said, not hidden behind it.
    delegation = {"scopes": {"orders:read": "See your orders"}, "login_url": "/login"}
    done = _check(tmp_path, "pactmw_testsite.settings", delegation=delegation)
    said = " ".join((done.stdout + done.stderr).split())
    assert "pactmw.W002" in said, said
    assert "pactmw.W003" in said, said


def test_brands_with_the_providers_urls_pass(tmp_path: Path) -> None:
    done = _check(tmp_path, "pactmw_testsite.contract_settings")
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout, done.stdout + done.stderr


def _login_check(tmp_path: Path, login_url: str) -> str:
    delegation = {"scopes": {"orders:read": "See your orders"}, "login_url": login_url}
    done = _check(tmp_path, "pactmw_testsite.contract_settings", delegation=delegation)
    assert done.returncode == 0, done.stderr  # a warning: the site still starts
    return " ".join((done.stdout + done.stderr).split())


def test_a_login_url_no_pattern_serves_is_warned(tmp_path: Path) -> None:
    # A person sent to sign in before consenting would get the site's 404.
    said = _login_check(tmp_path, "/accounts/login/?from=pactmw")
    assert "pactmw.W004" in said, said
    assert "brands.acme.delegation.login_url is '/accounts/login/?from=pactmw'" in said
    assert "no URL pattern of the ROOT_URLCONF serves /accounts/login/" in said


@pytest.mark.parametrize(
    "login_url",
    ["/public", "/public?from=pactmw", "https://login.shop.example/", "//login.shop.example/"],
    ids=["routed", "routed-with-query", "absolute", "another-host"],
)
def test_a_routed_or_absolute_login_url_passes(tmp_path: Path, login_url: str) -> None:
    said = _login_check(tmp_path, login_url)
    assert "pactmw.W004" not in said, said
