"""A `PACTMW` whose Provider does not build (a store that does not open: nothing the system
checks can see, as they open nothing) is said in the server's log as the server starts, under
`runserver` and under uvicorn (which runs no check), not at the first request to pactmw's
paths, which may come hours later; those paths answer 503 and the rest of the site works."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.commands import CHECKOUT_ENV
from tests.adapters.tokens import AgentKey, jwks
from tests.support.servers import django_server

pytestmark = pytest.mark.timeout(120)

SAID = "settings.PACTMW: the store does not open"


def _config(key: AgentKey, store: str) -> dict[str, Any]:
    return {
        "base_url": "http://127.0.0.1",
        "audience": "http://127.0.0.1/a2a",
        "agents": [{"issuer": "https://pa.example", "jwks": jwks(key)}],
        "store": store,
        "brands": {"shop": {"handler": "examples.bots:order_bot"}},
    }


@pytest.mark.parametrize("asgi", [False, True], ids=["wsgi", "asgi"])
def test_a_provider_that_does_not_build_is_logged_at_startup(tmp_path: Path, asgi: bool) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the store's folder should be")
    config = _config(AgentKey.generate("ES256", "k1"), f"sqlite:///{blocker}/pactmw.db")
    log = tmp_path / "site.log"
    settings = "pactmw_testsite.contract_settings"
    with django_server(
        config, asgi=asgi, settings=settings, workdir=tmp_path, name="site", extra_env=CHECKOUT_ENV
    ) as base:
        assert SAID in log.read_text()  # before any request: at startup
        card = httpx.get(f"{base}/a2a/shop/.well-known/agent-card.json")
        assert card.status_code == 503
        assert httpx.get(f"{base}/public").status_code == 200
    said = log.read_text()
    assert said.count(SAID) == 1, said  # logged once, not again at the request
    assert "a file has that name" in said
    assert "Traceback" not in said
