"""A store that cannot be used, on every adapter: the site's guarded views are a 503.

Checking a caller reads the store (the agents added at runtime, each agent's runtime
switch; a delegation's grant). Found by a Django trial: when the store could not be used (a
database not migrated yet, or down), the Provider's own paths answered 503 with
`Retry-After`, but the site's own guarded views (the middleware's prefix, the decorators,
DRF's authentication) raised, a 500 with a traceback. One rule now, on every adapter: the
same 503 the Provider answers (DRF's in its own 503 form), the store's message logged as the
Provider's paths log it, never a traceback.

Each server's store is its own sqlite file (`contract_harness`); the test drops its tables
under the running server: every read then fails as an unmigrated database does (sqlite's
"no such table", a `StoreUnavailable`).
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterator

import httpx
import pytest
import websockets.sync.client
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from pactmw.store import open_store
from tests.adapters import contract_apps
from tests.adapters.contract_harness import SERVERS, Harness, Target, harness
from tests.adapters.support import WithoutDenialExtension
from tests.parafe_integration.support import a2a_message
from tests.support.servers import uvicorn_server

pytestmark = pytest.mark.timeout(120)

#: What the Provider's paths log for a store that cannot be used (`error_response`), and
#: what sqlite says of a table that is not there.
LOGGED = "store unavailable: "
WHY = "no such table"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with harness(tmp_path_factory.mktemp("outage")) as started:
        yield started


@pytest.fixture(params=list(SERVERS))
def target(request: pytest.FixtureRequest, servers: Harness) -> Target:
    return servers.get(request.param)


def _break_store(target: Target) -> None:
    """Drop every table of the server's store, as a database nothing migrated has none."""
    database = str(target.settings["store"]).removeprefix("sqlite:///")
    with sqlite3.connect(database, isolation_level=None) as conn:
        tables = [
            row[0]
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not row[0].startswith("sqlite_")
        ]
        for table in tables:
            conn.execute(f'DROP TABLE IF EXISTS "{table}"')
    conn.close()


def _server_log(servers: Harness, target: Target, caplog: pytest.LogCaptureFixture) -> str:
    """What the server said: Django's own process writes `NAME.log`, the others run here."""
    if target.name.startswith("django"):
        return (servers.workdir / f"{target.name}.log").read_text(errors="replace")
    lines = []
    for record in caplog.records:
        lines.append(f"{record.name} {record.levelname} {record.getMessage()}")
        if record.exc_info is not None:
            lines.append("Traceback (from exc_info)")
    return "\n".join(lines)


def _assert_unavailable(response: httpx.Response, what: str) -> None:
    assert response.status_code == 503, (what, response.status_code, response.text[:300])
    assert response.headers.get("retry-after") == "1", (what, dict(response.headers))


def test_guarded_views_answer_503_on_a_store_that_cannot_be_used(
    target: Target, servers: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    token = target.token()
    delegation, _ = target.delegation("orders:read")  # granted while the store still works
    _break_store(target)
    plain = target.headers(token)
    delegated = target.headers(token, delegation)
    guarded = [
        ("/api/echo", plain),  # the middleware
        ("/api/echo", delegated),
        *((f"/decorated-{variant}", plain) for variant in target.variants),
        *((f"/decorated-{variant}", delegated) for variant in target.variants),
        *((f"/api/scoped-{variant}", delegated) for variant in target.variants),
    ]
    if target.name == "starlette":  # AuthenticationMiddleware with PersonalAgentBackend
        guarded += [("/backend/echo", plain), ("/backend/echo", delegated)]
    for path, headers in guarded:
        answer = target.client.get(path, headers=headers)
        _assert_unavailable(answer, path)
        assert answer.content == b"", (path, answer.text[:300])
    if target.name.startswith("django"):  # DRF: its own 503 form, with its body for people
        for headers in (plain, delegated):
            answer = target.client.get("/drf/me", headers=headers)
            _assert_unavailable(answer, "/drf/me")
            detail = "Service temporarily unavailable, try again later."
            assert answer.json() == {"detail": detail}
    # A Parafé-guarded endpoint: its consent's proof is remembered in the store (replay).
    for variant in target.variants:
        message = target.parafe.presenter().attach(a2a_message(f"lamp-{variant}"))
        answer = target.client.post(f"/parafe-{variant}", json={"message": message})
        _assert_unavailable(answer, f"/parafe-{variant}")
    # The Provider's own paths: the 503 they answered already.
    sent = target.client.post(
        "/a2a/acme/message:send",
        json={"message": a2a_message("Where is my order A-1001?")},
        headers={**plain, "Content-Type": "application/a2a+json"},
    )
    _assert_unavailable(sent, "message:send")
    # Public routes read no store.
    assert target.client.get("/public").status_code == 200
    said = _server_log(servers, target, caplog)
    assert LOGGED in said, said[-3000:]
    assert WHY in said, said[-3000:]
    assert "Traceback" not in said, said[-3000:]


@pytest.mark.parametrize("name", ["starlette", "fastapi"])
def test_a_websocket_under_the_prefix_is_refused_with_the_503(
    name: str, servers: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    target = servers.get(name)
    _break_store(target)
    url = str(target.client.base_url).replace("http://", "ws://") + "/api/ws"
    headers = target.headers(target.token())
    with (
        pytest.raises(InvalidStatus) as refused,
        websockets.sync.client.connect(url, additional_headers=headers, open_timeout=20),
    ):
        pass
    response = refused.value.response  # the HTTP answer, as uvicorn lets a handshake have
    assert response.status_code == 503
    assert response.headers.get("Retry-After") == "1"
    said = _server_log(servers, target, caplog)
    assert "Traceback" not in said, said[-3000:]


def test_without_the_denial_extension_the_websocket_is_closed_with_1011(
    servers: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # A server that cannot answer a handshake with a response: closed unaccepted, the server
    # would answer 403, which reads as the caller's credential refused. Accepted and closed
    # with 1011 ("Internal Error") instead, as `Misconfigured` closes one.
    target = servers.get("starlette")
    app = contract_apps.starlette_app(dict(target.settings))  # opens (migrates) the store
    _break_store(target)
    with uvicorn_server(WithoutDenialExtension(app)) as base:
        url = base.replace("http://", "ws://") + "/api/ws"
        headers = target.headers(target.token())
        with (
            websockets.sync.client.connect(url, additional_headers=headers, open_timeout=20) as ws,
            pytest.raises(ConnectionClosedError) as closed,
        ):
            ws.recv(timeout=20)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1011
    said = _server_log(servers, target, caplog)
    assert "Traceback" not in said, said[-3000:]


def _repair_store(target: Target) -> None:
    """Create the store's tables again, as `migrate` would (the server's own connection sees
    them at its next statement)."""
    store = open_store(str(target.settings["store"]))
    try:
        store.lookup_agent("https://nobody.example")  # the first read creates the schema
    finally:
        store.close()


def _said_since(
    servers: Harness, target: Target, caplog: pytest.LogCaptureFixture, mark: int
) -> str:
    return _server_log(servers, target, caplog)[mark:]


def test_the_end_of_an_outage_is_logged_once(
    target: Target, servers: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # Found in an operations review: the log said when the store failed (and once a minute
    # while it did), never when it worked again, so an operator could not tell when the
    # outage ended, nor how many requests it refused.
    caplog.set_level(logging.INFO)
    headers = target.headers(target.token())
    _break_store(target)  # already, when the tests above ran first
    mark = len(_server_log(servers, target, caplog))
    for _ in range(3):
        _assert_unavailable(target.client.get("/api/echo", headers=headers), "/api/echo")
    # An outage the tests above began is counted, not said again; its end is not said yet.
    said = _said_since(servers, target, caplog, mark)
    assert "store available again" not in said, said[-3000:]
    mark = len(_server_log(servers, target, caplog))
    _repair_store(target)
    for _ in range(3):
        answer = target.client.get("/api/echo", headers=headers)
        assert answer.status_code == 200, (answer.status_code, answer.text[:300])
    said = _said_since(servers, target, caplog, mark)
    assert said.count("store available again after ") == 1, said[-3000:]
    ended = re.search(r"store available again after \d+ s: (\d+) requests answered 503", said)
    assert ended is not None, said[-3000:]
    assert int(ended.group(1)) >= 3, ended.group(0)  # at least this test's, maybe others' too
    assert "Traceback" not in said, said[-3000:]
