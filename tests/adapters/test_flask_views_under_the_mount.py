"""A Flask app that serves the Provider (`brands` in `PACTMW`) keeps its own views under the
protected prefix guarded: the Provider's routes authenticate themselves, the app's do not.

Reported in a new user's trial: docs/getting-started/flask.md's first app (`/a2a/whoami`)
given `brands`, as the page's next section does, answered an anonymous request with the
view itself (a 500 there, as the view expected a caller) instead of PACT's 401, and a
request with a valid token ran the view with no caller."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask

from pactmw.adapters import flask as flask_adapter
from tests.adapters.tokens import AgentKey, claims, jwks
from tests.support.net import loopback_client
from tests.support.parties import ISSUER
from tests.support.servers import werkzeug_server

AUDIENCE = "https://shop.example/a2a"
KEY = AgentKey.generate("ES256", "k1")


def _app(tmp_path: Path) -> Flask:
    app = Flask("views-under-the-mount")
    app.config["PACTMW"] = {
        "base_url": "https://shop.example",
        "audience": AUDIENCE,
        "agents": [{"issuer": ISSUER, "name": "PA", "jwks": jwks(KEY)}],
        "store": "memory://",
        "data_dir": str(tmp_path),  # the development signing key
        "brands": {"shop": {"handler": "examples.bots:order_bot"}},
    }
    flask_adapter.Pactmw(app, current_user=lambda: None)

    @app.get("/a2a/whoami")
    def whoami() -> Any:
        caller = flask_adapter.current_personal_agent()
        return {"actor_id": caller.actor_id if caller else None}

    @app.get("/a2a/shop/mine")
    def under_the_brand() -> Any:  # a path the guard leaves to the Provider, routed here
        return {"caller": flask_adapter.current_personal_agent() is not None}

    return app


def test_an_apps_own_view_under_the_providers_mount_needs_a_personal_agent(
    tmp_path: Path,
) -> None:
    token = KEY.sign(claims(ISSUER, sub="user-1", aud=AUDIENCE))
    with werkzeug_server(_app(tmp_path)) as base, loopback_client(base_url=base) as client:
        anonymous = client.get("/a2a/whoami")
        assert anonymous.status_code == 401, anonymous.text
        assert anonymous.headers["WWW-Authenticate"] == 'Bearer realm="a2a"'
        assert anonymous.content == b""
        admitted = client.get("/a2a/whoami", headers={"Authorization": f"Bearer {token}"})
        assert admitted.status_code == 200, admitted.text
        assert admitted.json()["actor_id"] is not None
        # Even under a Brand's id, a view of the app's (Flask routed the request to it, so
        # the Provider never sees it) needs a personal agent.
        assert client.get("/a2a/shop/mine").status_code == 401
        mine = client.get("/a2a/shop/mine", headers={"Authorization": f"Bearer {token}"})
        assert mine.json() == {"caller": True}
        # The Provider's own routes stay its own: its Agent Card is public.
        card = client.get("/a2a/shop/.well-known/agent-card.json")
        assert card.status_code == 200, card.text
