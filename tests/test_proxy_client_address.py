"""The consent pages' per-address limit counts the client's real address under `pactmw serve`.

A client that is not a trusted proxy (`--forwarded-allow-ips`) cannot get a fresh bucket by
writing X-Forwarded-For itself: the address counted is the connection's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.client_address import LIMIT, WINDOW, consent_status, start_in_one_window
from tests.support.net import free_port
from tests.support.servers import process_server, serve_argv


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("proxy")
    port = free_port()
    config = tmp / "pactmw.toml"
    config.write_text(
        f'base_url = "http://127.0.0.1:{port}"\n'
        'audience = "pactmw-test-audience"\n'
        f'store = "sqlite:///{tmp / "store.db"}"\n'
        f'data_dir = "{tmp / "data"}"\n'
        f"consent_rate_limit = {{ per_agent = {LIMIT}, window = {WINDOW} }}\n"
        "[brands.acme]\n"
        'name = "Acme"\n'
        'handler = "tests.multiprocess_bot:counting_bot"\n'
        "[brands.acme.delegation]\n"
        'login_url = "/login"\n'
        'scopes = { "orders:read" = "Look up your orders" }\n'
    )
    # The one trusted proxy is elsewhere: this test's client (127.0.0.1) is not it.
    argv = [*serve_argv(config, port), "--forwarded-allow-ips", "192.0.2.1"]
    with process_server(argv, port, log=tmp / "serve.log"):
        yield f"http://127.0.0.1:{port}"


def test_a_spoofed_forwarded_for_gets_no_fresh_bucket(server: str) -> None:
    start_in_one_window()
    statuses = [
        consent_status(server, f"203.0.113.{i}", Forwarded=f"for=203.0.113.{i}")
        for i in range(LIMIT + 2)
    ]
    assert statuses == [200] * LIMIT + [429] * 2
