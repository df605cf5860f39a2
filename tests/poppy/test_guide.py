"""docs/poppy.md "From zero" as a reader follows it for FastAPI: the settings of step 1 in a
pactmw.toml (with the sqlite store the guide offers for one machine), a `shop.bot` module,
and the FastAPI app of steps 2 and 5 (the `poppy_fastapi` sample), served on uvicorn."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.net import loopback_client
from tests.support.samples import find_samples
from tests.support.servers import REPO, uvicorn_server

GUIDE = REPO / "docs" / "poppy.md"
BOT = """\
def answer(turn):
    return "Hello from the shop."
"""


def step_one_toml() -> str:
    """The settings block of step 1, its PostgreSQL store swapped for sqlite."""
    text = GUIDE.read_text(encoding="utf-8")
    step = text[text.index("**1. Settings.**") : text.index("**2. Mount it.**")]
    found = re.search(r"^```toml\n(.*?)^```$", step, re.S | re.M)
    assert found, "step 1 of docs/poppy.md lost its TOML block"
    sqlite = 'store = "sqlite:///pactmw.db"'
    toml, swapped = re.subn(r'^store = "postgresql://[^"]*"', sqlite, found.group(1), flags=re.M)
    assert swapped == 1, "step 1's store line changed: update this test"
    return toml


@pytest.fixture
def shop_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The reader's folder: pactmw.toml, shop/bot.py; the sample run from there."""
    (tmp_path / "pactmw.toml").write_text(step_one_toml(), encoding="utf-8")
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "shop" / "bot.py").write_text(BOT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sample = find_samples((GUIDE,))["poppy_fastapi"]
    namespace: dict[str, Any] = {"__name__": "readme_poppy_fastapi"}
    exec(compile(sample.code, sample.filename, "exec"), namespace)
    return namespace


def test_the_fastapi_site_serves_discovery_the_metadata_and_the_api(
    shop_site: dict[str, Any],
) -> None:
    with uvicorn_server(shop_site["app"]) as base, loopback_client() as client:
        host = {"Host": "shop.example"}
        discovery = client.get(f"{base}/.well-known/poppy.json", headers=host)
        assert discovery.status_code == 200, discovery.text
        document = discovery.json()
        assert document["organization"]["domain"] == "shop.example"
        issuer = document["auth"]["issuer"]
        assert issuer == "https://shop.example/a2a/shop/poppy"
        metadata = client.get(
            f"{base}/.well-known/oauth-authorization-server/a2a/shop/poppy", headers=host
        )
        assert metadata.status_code == 200, metadata.text
        assert metadata.json()["issuer"] == issuer
        assert metadata.json()["device_authorization_endpoint"] == f"{issuer}/device"
        # The API of step 5 wants a Session Token and its DPoP proof.
        api = client.get(f"{base}/api/orders", headers=host)
        assert api.status_code == 401
        assert api.headers["www-authenticate"].startswith("DPoP")
        # ...as its OpenAPI document says: the Brand's scheme and the refusals, challenged.
        openapi = client.get(f"{base}/openapi.json").json()
        assert openapi["components"]["securitySchemes"]["PoppySession.shop"]["scheme"] == "DPoP"
        refusals = openapi["paths"]["/api/orders"]["get"]["responses"]
        assert api.json() == {"error": "invalid_token"}
        assert "WWW-Authenticate" in refusals["401"]["headers"]
        assert {"400", "401", "403"} <= refusals.keys()
        # The consent page sends a signed-out person to the site's login (step 1's login_url).
        agents = client.get(f"{base}/a2a/shop/oauth/agents", headers=host)
        assert agents.status_code == 303
        assert agents.headers["location"].startswith("/login?next=")
