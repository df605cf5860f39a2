"""Every HTTP client the tests open on their own servers comes from `loopback_client`.

A pooled connection left idle as long as a server's keep-alive timeout (uvicorn's is 5 s)
can be reused just as the server closes it, and the request fails with "connection reset by
peer": a CI run failed that way once. `loopback_client` drops idle connections first; this
test keeps every new test on it (read with `ast`, nothing imported).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.net import CLIENT_KEEPALIVE_EXPIRY, loopback_client

TESTS = Path(__file__).parent
ALLOWED = {TESTS / "support" / "net.py"}
SERVER_KEEPALIVE_SECONDS = 5.0  # uvicorn's `timeout_keep_alive` default, the shortest here


def _client_constructions(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "Client"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "httpx"
    ]


def test_tests_open_http_clients_only_through_loopback_client() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        if path not in ALLOWED
        for line in _client_constructions(path)
    ]
    assert offenders == [], "use tests.support.net.loopback_client instead of httpx.Client"


def test_loopback_client_drops_idle_connections_before_the_servers_do() -> None:
    assert CLIENT_KEEPALIVE_EXPIRY < SERVER_KEEPALIVE_SECONDS / 2
    with loopback_client() as client:
        pool = client._transport._pool  # type: ignore[attr-defined]
        assert pool._keepalive_expiry == CLIENT_KEEPALIVE_EXPIRY
