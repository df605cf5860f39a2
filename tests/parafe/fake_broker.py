"""A fake Parafé broker: a real HTTP server on 127.0.0.1, for tests of the I/O edges.

It serves what a verifier touches (parafe-verifier.md §2): the JWKS, agent DID documents
(revoked agents answer 410 with the reference's body), and `POST /consent/verify` with a
configurable answer. It counts and records requests, and can answer slowly or fail. Only the
standard library; reusable by the Provider and adapter integration tests::

    with FakeBroker(jwks=keyset_document) as broker:
        broker.add_agent("prf_agent_alex0001", public_jwk)
        broker.revoke("prf_agent_gone0001", revoked_at="2026-09-30T05:00:00.000Z")
        broker.verify_answer = (401, {"valid": False, "error": "token_expired"})
        keys = BrokerKeys(broker.url, fetch_policy=FetchPolicy(allow_http_on_loopback=True))
        ...
        assert broker.hits["/.well-known/jwks.json"] == 1

`mode` is "ok", "fail" (500 everywhere), "slow" (wait `delay` seconds first) or "garbage"
(200 with a body that is not JSON); attributes may be changed at any time from the test.
`did_status` is the status DID documents are served with (200 unless a test changes it).
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from tests.support.net import closed_port_url

__all__ = ["FakeBroker", "unreachable_url"]

_Broker = TypeVar("_Broker", bound="FakeBroker")

VerifyAnswer = tuple[int, Any] | Callable[[dict[str, Any]], tuple[int, Any]]


def unreachable_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (connections are refused)."""
    return closed_port_url()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.owner._serve(self, "GET")

    def do_POST(self) -> None:
        self.server.owner._serve(self, "POST")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: FakeBroker


class FakeBroker:
    """See the module docstring."""

    jwks_path = "/.well-known/jwks.json"

    def __init__(self, jwks: Mapping[str, Any] | None = None) -> None:
        self.jwks: Mapping[str, Any] = jwks if jwks is not None else {"keys": []}
        self.did_documents: dict[str, Any] = {}
        self.revoked: dict[str, Any] = {}
        self.did_status = 200
        self.verify_answer: VerifyAnswer = (
            200,
            {"valid": True, "permitted": True, "action": "create_order"},
        )
        self.mode = "ok"
        self.delay = 0.0
        self.hits: Counter[str] = Counter()
        self.requests: list[tuple[str, str, Any]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self: _Broker) -> _Broker:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self: _Broker) -> _Broker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def reset(self) -> None:
        with self._lock:
            self.hits.clear()
            self.requests.clear()
        self.mode = "ok"
        self.delay = 0.0
        self.did_status = 200

    # -- content -------------------------------------------------------------------------

    def add_agent(self, agent_id: str, document: Mapping[str, Any]) -> None:
        """Serve `document` as the agent's DID document."""
        self.did_documents[agent_id] = dict(document)

    def revoke(self, agent_id: str, *, revoked_at: str | None) -> None:
        """Answer 410 for the agent, with the reference's body (`revoked_at` None: without
        it, which verifiers must treat as a fetch failure)."""
        body: dict[str, Any] = {
            "error": "agent_revoked",
            "did_document": self.did_documents.get(agent_id),
            "did_document_metadata": {"deactivated": True},
        }
        if revoked_at is not None:
            body["revoked_at"] = revoked_at
        self.revoked[agent_id] = body

    # -- serving -------------------------------------------------------------------------

    def _serve(self, handler: _Handler, method: str) -> None:
        path = urlsplit(handler.path).path
        body: Any = None
        if method == "POST":
            length = int(handler.headers.get("Content-Length") or 0)
            raw = handler.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
        with self._lock:
            self.hits[path] += 1
            self.requests.append((method, path, body))
        if self.mode == "slow":
            time.sleep(self.delay)
        if self.mode == "fail":
            self._send(handler, 500, {"error": "internal_error"})
            return
        if self.mode == "garbage":
            self._send_raw(handler, 200, b"<html>not json")
            return
        if method == "GET" and path == self.jwks_path:
            self._send(handler, 200, self.jwks)
            return
        if method == "GET" and path.startswith("/agents/") and path.endswith("/did.json"):
            agent_id = unquote(path[len("/agents/") : -len("/did.json")])
            if agent_id in self.revoked:
                self._send(handler, 410, self.revoked[agent_id])
            elif agent_id in self.did_documents:
                self._send(handler, self.did_status, self.did_documents[agent_id])
            else:
                self._send(handler, 404, {"error": "agent_not_found"})
            return
        if method == "POST" and path == "/consent/verify":
            answer = self.verify_answer
            status, payload = answer(body) if callable(answer) else answer
            self._send(handler, status, payload)
            return
        self._send(handler, 404, {"error": "not_found"})

    def _send(
        self,
        handler: _Handler,
        status: int,
        payload: Any,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._send_raw(handler, status, json.dumps(payload).encode(), headers)

    @staticmethod
    def _send_raw(
        handler: _Handler, status: int, body: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:
            pass  # the client gave up (a timeout test): nothing to do
