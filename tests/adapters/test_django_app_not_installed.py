"""A site with `PACTMW["store"] = "django"` whose `INSTALLED_APPS` lacks
`"pactmw.adapters.django"` has no pactmw tables (`migrate` creates them only for an installed
app) and no system checks to say so. The server says it at startup, naming the setting, and
answers 503 on pactmw's paths (never a 500 with a traceback per request); the rest of the
site keeps working."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.adapters.commands import CHECKOUT_ENV
from tests.adapters.tokens import AgentKey, claims, jwks
from tests.support.agent import user_message
from tests.support.servers import django_server

pytestmark = pytest.mark.timeout(120)

AUDIENCE = "http://127.0.0.1/a2a"
SAID = "'pactmw.adapters.django' is not in INSTALLED_APPS"


@pytest.mark.parametrize("asgi", [False, True], ids=["wsgi", "asgi"])
def test_the_missing_app_is_reported_at_startup_and_answered_503(
    tmp_path: Path, asgi: bool
) -> None:
    key = AgentKey.generate("ES256", "k1")
    config = {
        "base_url": "http://127.0.0.1",
        "audience": AUDIENCE,
        "agents": [{"issuer": "https://pa.example", "jwks": jwks(key)}],
        "store": "django",
        "brands": {"shop": {"handler": "examples.bots:order_bot"}},
    }
    env = {**CHECKOUT_ENV, "PACTMW_TEST_DATABASE": str(tmp_path / "site.db")}
    log = tmp_path / "site.log"
    settings = "pactmw_testsite.noapp_settings"
    with django_server(
        config, asgi=asgi, settings=settings, workdir=tmp_path, name="site", extra_env=env
    ) as base:
        assert SAID in log.read_text()  # before any request: at startup
        token = key.sign(claims("https://pa.example", aud=AUDIENCE))
        for _ in range(2):
            answer = httpx.post(
                f"{base}/a2a/shop/message:send",
                json={"message": user_message("Where is my order?")},
                headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
            )
            assert (answer.status_code, answer.content) == (503, b"")
        assert httpx.get(f"{base}/public").status_code == 200
    said = log.read_text()
    assert said.count(SAID) == 1, said  # logged once
    assert "store" in said.split(SAID)[0].splitlines()[-1]  # the line names the setting
    assert "Traceback" not in said
