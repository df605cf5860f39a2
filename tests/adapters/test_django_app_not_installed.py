"""A site with `PACTMW["store"] = "django"` whose `INSTALLED_APPS` lacks
`"pactmw.adapters.django"` has no pactmw tables (`migrate` creates them only for an installed
app) and no system checks to say so. The server says it at startup, naming the setting, and
answers 503 on pactmw's paths (never a 500 with a traceback per request); the rest of the
site keeps working. A site with the app whose database was not migrated yet gets the same
503 (Django itself warns of unapplied migrations at startup), the log saying to migrate, on
the Provider's paths and on the site's own views pactmw guards (whose check of the caller
reads the store's agents), never a 500."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.commands import CHECKOUT_ENV
from tests.adapters.tokens import AgentKey, claims, jwks
from tests.support.agent import user_message
from tests.support.servers import django_server

pytestmark = pytest.mark.timeout(120)

AUDIENCE = "http://127.0.0.1/a2a"
SAID = "'pactmw.adapters.django' is not in INSTALLED_APPS"


def _config(key: AgentKey) -> dict[str, Any]:
    return {
        "base_url": "http://127.0.0.1",
        "audience": AUDIENCE,
        "agents": [{"issuer": "https://pa.example", "jwks": jwks(key)}],
        "store": "django",
        "brands": {"shop": {"handler": "examples.bots:order_bot"}},
    }


def _send(base: str, key: AgentKey) -> httpx.Response:
    return httpx.post(
        f"{base}/a2a/shop/message:send",
        json={"message": user_message("Where is my order?")},
        headers={
            "Authorization": f"Bearer {key.sign(claims('https://pa.example', aud=AUDIENCE))}",
            "A2A-Version": "1.0",
        },
    )


@pytest.mark.parametrize("asgi", [False, True], ids=["wsgi", "asgi"])
def test_the_missing_app_is_reported_at_startup_and_answered_503(
    tmp_path: Path, asgi: bool
) -> None:
    key = AgentKey.generate("ES256", "k1")
    env = {**CHECKOUT_ENV, "PACTMW_TEST_DATABASE": str(tmp_path / "site.db")}
    log = tmp_path / "site.log"
    settings = "pactmw_testsite.noapp_settings"
    with django_server(
        _config(key), asgi=asgi, settings=settings, workdir=tmp_path, name="site", extra_env=env
    ) as base:
        assert SAID in log.read_text()  # before any request: at startup
        for _ in range(2):
            answer = _send(base, key)
            assert (answer.status_code, answer.content) == (503, b"")
        assert httpx.get(f"{base}/public").status_code == 200
    said = log.read_text()
    assert said.count(SAID) == 1, said  # logged once
    assert "store" in said.split(SAID)[0].splitlines()[-1]  # the line names the setting
    assert "Traceback" not in said


@pytest.mark.parametrize("asgi", [False, True], ids=["wsgi", "asgi"])
def test_an_unmigrated_database_is_answered_503_saying_to_migrate(
    tmp_path: Path, asgi: bool
) -> None:
    key = AgentKey.generate("ES256", "k1")
    env = {**CHECKOUT_ENV, "PACTMW_TEST_DATABASE": str(tmp_path / "site.db")}
    settings = "pactmw_testsite.sitedb_settings"
    with django_server(
        _config(key), asgi=asgi, settings=settings, workdir=tmp_path, name="site", extra_env=env
    ) as base:
        answer = _send(base, key)
        assert (answer.status_code, answer.content) == (503, b"")
        assert answer.headers["retry-after"] == "1"
        assert httpx.get(f"{base}/public").status_code == 200
    said = (tmp_path / "site.log").read_text()
    assert "has no pactmw tables" in said
    assert "manage.py migrate pactmw --database default" in said
    assert "INSTALLED_APPS" not in said  # the app is installed: migrating is all it lacks
    assert "Traceback" not in said


@pytest.mark.parametrize("asgi", [False, True], ids=["wsgi", "asgi"])
def test_the_sites_guarded_views_on_an_unmigrated_database_are_503_not_500(
    tmp_path: Path, asgi: bool
) -> None:
    key = AgentKey.generate("ES256", "k1")
    env = {**CHECKOUT_ENV, "PACTMW_TEST_DATABASE": str(tmp_path / "site.db")}
    settings = "pactmw_testsite.sitedb_settings"
    token = key.sign(claims("https://pa.example", aud=AUDIENCE))
    with django_server(
        _config(key), asgi=asgi, settings=settings, workdir=tmp_path, name="site", extra_env=env
    ) as base:
        # Under the protected prefix (the middleware), and behind the decorator, sync and async.
        for path in ("/a2a/echo", "/decorated-sync", "/decorated-async"):
            answer = httpx.get(f"{base}{path}", headers={"Authorization": f"Bearer {token}"})
            assert (answer.status_code, answer.content) == (503, b""), path
            assert answer.headers["retry-after"] == "1", path
        assert httpx.get(f"{base}/public").status_code == 200
    said = (tmp_path / "site.log").read_text()
    assert "has no pactmw tables" in said
    assert "Traceback" not in said


@pytest.mark.parametrize("asgi", [False, True], ids=["wsgi", "asgi"])
def test_drf_views_on_an_unmigrated_database_are_503_not_500(tmp_path: Path, asgi: bool) -> None:
    key = AgentKey.generate("ES256", "k1")
    env = {**CHECKOUT_ENV, "PACTMW_TEST_DATABASE": str(tmp_path / "site.db")}
    settings = "pactmw_testsite.sitedb_drf_settings"
    token = key.sign(claims("https://pa.example", aud=AUDIENCE))
    with django_server(
        _config(key), asgi=asgi, settings=settings, workdir=tmp_path, name="site", extra_env=env
    ) as base:
        for path in ("/drf/me", "/drf/orders"):
            answer = httpx.get(f"{base}{path}", headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 503, (path, answer.text[:300])
            assert answer.headers["retry-after"] == "1", path
            # DRF's body, for people; the log says why.
            detail = "Service temporarily unavailable, try again later."
            assert answer.json() == {"detail": detail}, path
        assert httpx.get(f"{base}/public").status_code == 200
    said = (tmp_path / "site.log").read_text()
    assert "has no pactmw tables" in said
    assert "Traceback" not in said
