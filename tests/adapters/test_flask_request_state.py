"""The Flask adapter keeps a request's verified caller with that request, not in `flask.g`:
`g` belongs to the app context, which Flask reuses for every request dispatched while one
is already pushed (a test's `with app.app_context():` around `app.test_client()`, or an app
that calls `app.app_context().push()` at import and is served in that thread), and which
`copy_current_request_context` does not carry into a background thread."""

from __future__ import annotations

import threading
from typing import Any

from flask import Flask, copy_current_request_context

from pactmw.adapters import flask as flask_adapter
from pactmw.protocols.identity import PersonalAgent
from tests.adapters.tokens import AgentKey, claims, jwks
from tests.support.parties import AUDIENCE, ISSUER

KEY = AgentKey.generate("ES256", "k1")


def _app() -> Flask:
    app = Flask("request-state")
    app.config["PACTMW"] = {
        "audience": AUDIENCE,
        "agents": [{"issuer": ISSUER, "name": "PA", "jwks": jwks(KEY)}],
    }
    flask_adapter.Pactmw(app)

    @app.get("/mine")
    @flask_adapter.personal_agent_required
    def mine() -> Any:
        caller = flask_adapter.current_personal_agent()
        return {"actor_id": caller.actor_id if caller else None}

    @app.get("/maybe")
    def maybe() -> Any:
        caller = flask_adapter.current_personal_agent()
        return {"actor_id": caller.actor_id if caller else None}

    @app.get("/in-a-thread")
    @flask_adapter.personal_agent_required
    def in_a_thread() -> Any:
        seen: list[PersonalAgent | None] = []

        @copy_current_request_context
        def work() -> None:
            seen.append(flask_adapter.current_personal_agent())

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        return {"actor_id": seen[0].actor_id if seen[0] else None}

    return app


def _bearer(sub: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY.sign(claims(ISSUER, sub=sub))}"}


def test_a_request_in_a_pushed_app_context_never_sees_the_previous_caller() -> None:
    app = _app()
    client = app.test_client()
    with app.app_context():  # as a test fixture does, around the test client's requests
        first = client.get("/mine", headers=_bearer("user-1"))
        assert first.status_code == 200
        assert first.json is not None
        assert first.json["actor_id"] is not None
        anonymous = client.get("/mine")
        assert anonymous.status_code == 401
        assert anonymous.headers["WWW-Authenticate"] == 'Bearer realm="a2a"'
        assert client.get("/maybe").json == {"actor_id": None}
        second = client.get("/mine", headers=_bearer("user-2"))
        assert second.json is not None
        assert second.json["actor_id"] not in (None, first.json["actor_id"])


def test_outside_a_request_there_is_no_caller() -> None:
    with _app().app_context():  # a CLI command, a task: no request, nobody calling
        assert flask_adapter.current_personal_agent() is None
        assert flask_adapter.current_parafe() is None
        assert flask_adapter.current_poppy_caller() is None


def test_a_background_thread_with_the_request_context_sees_the_caller() -> None:
    response = _app().test_client().get("/in-a-thread", headers=_bearer("user-1"))
    assert response.status_code == 200
    assert response.json is not None
    assert response.json["actor_id"] is not None
