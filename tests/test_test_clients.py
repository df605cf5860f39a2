"""Every HTTP client the tests open on their own servers comes from `loopback_client` (or
`loopback_async_client`).

A pooled connection left idle as long as a server's keep-alive timeout (uvicorn's is 5 s)
can be reused just as the server closes it, and the request fails with "connection reset by
peer": a CI run failed that way once, and the SDKs' `httpx.AsyncClient`s were still outside
this rule. `loopback_client` drops idle connections first; this test keeps every new test on
it (read with `ast`, nothing imported): no test builds an httpx client or transport itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.net import CLIENT_KEEPALIVE_EXPIRY, loopback_async_client, loopback_client

TESTS = Path(__file__).parent
ALLOWED = {TESTS / "support" / "net.py"}
SERVER_KEEPALIVE_SECONDS = 5.0  # uvicorn's `timeout_keep_alive` default, the shortest here
#: What holds a connection pool: the clients, and the transports a client may be given.
POOLED = {"Client", "AsyncClient", "HTTPTransport", "AsyncHTTPTransport"}


def _client_constructions(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in POOLED
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
    assert offenders == [], "use tests.support.net.loopback_client (or loopback_async_client)"


def test_loopback_clients_drop_idle_connections_before_the_servers_do() -> None:
    assert CLIENT_KEEPALIVE_EXPIRY < SERVER_KEEPALIVE_SECONDS / 2
    # The transport's own options too: httpx ignores a client's limits when it is given a
    # transport, so the pool must be the one loopback_client builds.
    with loopback_client(local_address="127.0.0.1", verify=False) as client:
        pool = client._transport._pool  # type: ignore[attr-defined]
        assert pool._keepalive_expiry == CLIENT_KEEPALIVE_EXPIRY
        assert pool._local_address == "127.0.0.1"
    pool = loopback_async_client(verify=False)._transport._pool  # type: ignore[attr-defined]
    assert pool._keepalive_expiry == CLIENT_KEEPALIVE_EXPIRY


def test_loopback_client_refuses_a_transport_whose_pool_it_cannot_limit() -> None:
    with pytest.raises(TypeError, match="not a transport"):
        loopback_client(transport=object())
