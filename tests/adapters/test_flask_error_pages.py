"""A Flask app's own error pages for 401 and 403 (`@app.errorhandler`), written as for any
werkzeug `HTTPException`: the page's body with the exception's headers
(`return page, error.code, error.get_headers()`), so PACT's challenge stays on the answer,
whether the page is HTML or a JSON API's error (flask-jwt-extended's error callbacks)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask, jsonify, render_template_string
from werkzeug.exceptions import HTTPException

from pactmw.adapters import flask as flask_adapter
from pactmw.store import open_store
from tests.adapters.contract_harness import Harness, Target, config, harness
from tests.adapters.support import CHALLENGE, INVALID_TOKEN
from tests.adapters.tokens import claims
from tests.support.net import loopback_client
from tests.support.parties import ISSUER
from tests.support.servers import werkzeug_server

pytestmark = pytest.mark.timeout(120)

PAGE = "<h1>{{ code }}: {{ name }}</h1>"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with harness(tmp_path_factory.mktemp("flask-pages")) as started:
        yield started


@pytest.fixture(scope="module")
def settings(world: Harness) -> dict[str, Any]:
    return config(world.workdir, "pages", world.agent, world.parafe)


def _guarded_views(app: Flask) -> None:
    """The views both apps guard: one a personal agent's, one needing a delegation."""

    @app.get("/mine")
    @flask_adapter.personal_agent_required
    def mine() -> Any:
        return {"ok": True}

    @app.get("/orders")
    @flask_adapter.delegation_required("orders:read")
    def orders() -> Any:
        return {"ok": True}


def _grants(world: Harness, settings: dict[str, Any]) -> Target:
    """What hands out delegations on the apps' store (closed with the world)."""
    store = open_store(str(settings["store"]))
    world.stack.callback(store.close)
    return Target(
        "pages", loopback_client(), (), store, world.signing, world.agent, world.parafe, settings
    )


def _app(settings: dict[str, Any]) -> Flask:
    app = Flask("pages")
    app.config["PACTMW"] = settings
    flask_adapter.Pactmw(app)

    @app.errorhandler(401)
    @app.errorhandler(403)
    def error_page(error: HTTPException) -> Any:
        page = render_template_string(PAGE, code=error.code, name=error.name)
        return page, error.code, error.get_headers()

    _guarded_views(app)

    return app


def test_the_apps_error_pages_keep_the_pact_challenge(
    world: Harness, settings: dict[str, Any]
) -> None:
    grants = _grants(world, settings)
    identity = {"Authorization": f"Bearer {world.agent.sign(claims(ISSUER))}"}
    with werkzeug_server(_app(settings)) as base, loopback_client(base_url=base) as client:
        anonymous = client.get("/mine")
        assert anonymous.status_code == 401
        assert anonymous.text == "<h1>401: Unauthorized</h1>"
        assert anonymous.headers["www-authenticate"] == CHALLENGE

        undelegated = client.get("/orders", headers=identity)
        assert undelegated.status_code == 401
        assert undelegated.headers["www-authenticate"] == INVALID_TOKEN

        other, _ = grants.delegation("orders:cancel")
        short = client.get("/orders", headers={**identity, "X-A2A-User-Delegation": other})
        assert short.status_code == 403
        assert short.text == "<h1>403: Forbidden</h1>"
        assert short.headers["www-authenticate"] == (
            'Bearer realm="a2a", error="insufficient_scope", scope="orders:read"'
        )
        assert short.headers["cache-control"] == "no-store"


def _json_api(settings: dict[str, Any]) -> Flask:
    app = Flask("json-api")
    app.config["PACTMW"] = settings
    flask_adapter.Pactmw(app)

    @app.errorhandler(flask_adapter.PersonalAgentRefused)
    def refused(error: flask_adapter.PersonalAgentRefused) -> Any:
        return jsonify(error="refused", reason=error.failure.reason), 401, error.get_headers()

    @app.errorhandler(flask_adapter.ScopeRefused)
    def short(error: flask_adapter.ScopeRefused) -> Any:
        return jsonify(error="insufficient_scope", missing=error.missing), 403, error.get_headers()

    _guarded_views(app)

    @app.get("/api/my-orders")  # the app's own view under the protected prefix
    @flask_adapter.delegation_required("orders:read")
    def my_orders() -> Any:
        return {"ok": True}

    return app


def test_a_json_error_handler_keeps_its_content_type_and_the_pact_challenge(
    world: Harness, settings: dict[str, Any]
) -> None:
    # The exception's headers carry the challenge, not werkzeug's HTML Content-Type: an API
    # answering JSON with `error.get_headers()` stays application/json, as jsonify made it.
    grants = _grants(world, settings)
    identity = {"Authorization": f"Bearer {world.agent.sign(claims(ISSUER))}"}
    with werkzeug_server(_json_api(settings)) as base, loopback_client(base_url=base) as client:
        anonymous = client.get("/mine")
        assert anonymous.status_code == 401
        assert anonymous.headers["content-type"] == "application/json"
        assert anonymous.json() == {"error": "refused", "reason": "missing_token"}
        assert anonymous.headers["www-authenticate"] == CHALLENGE
        assert anonymous.headers["cache-control"] == "no-store"

        other, _ = grants.delegation("orders:cancel")
        short = client.get("/orders", headers={**identity, "X-A2A-User-Delegation": other})
        assert short.status_code == 403
        assert short.headers["content-type"] == "application/json"
        assert short.json() == {"error": "insufficient_scope", "missing": ["orders:read"]}
        assert short.headers["www-authenticate"] == (
            'Bearer realm="a2a", error="insufficient_scope", scope="orders:read"'
        )


def test_under_the_prefix_the_credentials_refusal_is_pacts_the_decorators_the_apps(
    world: Harness, settings: dict[str, Any]
) -> None:
    # What docs/getting-started/flask.md says of a view under the protected prefix: the
    # prefix's check (the identity, a delegation that is sent) refuses before the view, with
    # PACT's empty-bodied 401 whatever the app's handlers; the decorator's own refusal (no
    # delegation, a scope missing) is its exception, which the app's handler answers.
    grants = _grants(world, settings)
    identity = {"Authorization": f"Bearer {world.agent.sign(claims(ISSUER))}"}
    with werkzeug_server(_json_api(settings)) as base, loopback_client(base_url=base) as client:
        anonymous = client.get("/api/my-orders")
        assert (anonymous.status_code, anonymous.content) == (401, b"")
        assert anonymous.headers["www-authenticate"] == CHALLENGE

        forged = {**identity, "X-A2A-User-Delegation": "Bearer not-a-delegation"}
        refused = client.get("/api/my-orders", headers=forged)
        assert (refused.status_code, refused.content) == (401, b"")
        assert refused.headers["www-authenticate"] == INVALID_TOKEN

        undelegated = client.get("/api/my-orders", headers=identity)
        assert undelegated.status_code == 401
        assert undelegated.json() == {"error": "refused", "reason": "required"}
        assert undelegated.headers["www-authenticate"] == INVALID_TOKEN

        other, _ = grants.delegation("orders:cancel")
        short = client.get("/api/my-orders", headers={**identity, "X-A2A-User-Delegation": other})
        assert short.status_code == 403
        assert short.json() == {"error": "insufficient_scope", "missing": ["orders:read"]}
