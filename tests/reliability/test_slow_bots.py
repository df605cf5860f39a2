"""Slow bots over a real `pactmw serve`: a turn keeps its claim while its bot works, and
`turn_timeout` abandons a turn and leaves its message retryable (issue 15, point 4).

A bot slower than `claim_lease_seconds` used to run twice for one `messageId`: a retry after
the lease took the turn over, and the two callers got different replies. Now the running turn
renews its lease, so every retry meanwhile is told the message has no reply yet (PACT §4.3),
the bot runs once, and every caller ends up with the same bytes.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.provider._send import TURN_TIMED_OUT
from tests.reliability.support import (
    assert_reply,
    bearer,
    bot_env,
    bot_runs,
    inline_agent,
    is_pending,
    send,
    write_config,
)
from tests.support.net import free_port, loopback_client
from tests.support.pg import PostgresServer, postgres_server_fixture
from tests.support.servers import process_server, serve_argv

LEASE = 3.0  # claim_lease_seconds of the server (renewed every third of it)
SLOW = 7.0  # the bot works this long on a `[slow]` message: more than two leases
TIMEOUT = 2.0  # turn_timeout of the server in the timeout test


postgres = postgres_server_fixture(scope="module")  # started only by the PostgreSQL case


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="slow-1")


def _wait_for_start(runs: Path, message_id: str, sender: threading.Thread) -> None:
    deadline = time.monotonic() + 20
    while bot_runs(runs)[message_id] == 0:
        assert time.monotonic() < deadline, f"the bot never started on {message_id}"
        assert sender.is_alive(), "the request ended before its bot started"
        time.sleep(0.01)


def _store_url(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if store == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres")
        return server.create_database()
    return f"sqlite:///{tmp_path / 'pactmw.db'}" if store == "sqlite" else "memory://"


@pytest.mark.parametrize("store", ["sqlite", "memory", "postgresql"])
def test_bot_slower_than_the_lease_runs_once_and_retries_wait(
    tmp_path: Path, key: PrivateJWK, store: str, request: pytest.FixtureRequest
) -> None:
    port = free_port()
    runs = tmp_path / "runs.txt"
    url = _store_url(store, tmp_path, request)
    config = write_config(
        tmp_path / "pactmw.toml",
        port=port,
        store=url,
        agents=[inline_agent(key)],
        claim_lease_seconds=LEASE,
    )
    slow_text = "[slow] where is my order?"
    outcome: dict[str, httpx.Response] = {}
    retries: list[tuple[float, httpx.Response]] = []
    with (
        loopback_client(timeout=60) as client,
        process_server(serve_argv(config, port), port, env=bot_env(runs, SLOW)),
    ):
        base = f"http://127.0.0.1:{port}"
        first = send(client, base, bearer(key), "hello", "m0")
        context_id = assert_reply(first, message_id="m0", text="hello", earlier=[])["contextId"]

        def answer() -> None:
            outcome["first"] = send(client, base, bearer(key), slow_text, "m1", context_id)

        sender = threading.Thread(target=answer)
        sender.start()
        _wait_for_start(runs, "m1", sender)
        started = time.monotonic()
        # Retries until the first request is answered, well past the first lease.
        while sender.is_alive():
            retry = send(client, base, bearer(key), slow_text, "m1", context_id)
            retries.append((time.monotonic() - started, retry))
            time.sleep(0.25)
        sender.join()
        reply = outcome["first"]
        assert_reply(reply, message_id="m1", text=slow_text, earlier=["m0"], context_id=context_id)
        # Once answered, a retry gets the stored bytes.
        again = send(client, base, bearer(key), slow_text, "m1", context_id)
        assert again.content == reply.content

    late = [response for elapsed, response in retries if elapsed > 1.5 * LEASE]
    assert late, "no retry was sent after the first lease had run out"
    for _, retry in retries:
        # Each retry was told to wait, or (sent as the reply was stored) got that very reply.
        assert is_pending(retry) or retry.content == reply.content, (retry.status_code, retry.text)
    assert bot_runs(runs) == {"m0": 1, "m1": 1}, bot_runs(runs)
    assert bot_runs(runs, "done") == {"m0": 1, "m1": 1}


def test_turn_past_turn_timeout_is_abandoned_and_stays_retryable(
    tmp_path: Path, key: PrivateJWK
) -> None:
    port = free_port()
    runs = tmp_path / "runs.txt"
    config = write_config(
        tmp_path / "pactmw.toml",
        port=port,
        store=f"sqlite:///{tmp_path / 'pactmw.db'}",
        agents=[inline_agent(key)],
        bot="tests.reliability.bots:slow_first_bot",
        claim_lease_seconds=LEASE,
        turn_timeout=TIMEOUT,
    )
    with (
        loopback_client(timeout=60) as client,
        process_server(
            serve_argv(config, port), port, env=bot_env(runs, SLOW), log=tmp_path / "serve.log"
        ),
    ):
        base = f"http://127.0.0.1:{port}"
        first = send(client, base, bearer(key), "hello", "m0")
        context_id = assert_reply(first, message_id="m0", text="hello", earlier=[])["contextId"]
        slow_text = "[slow] where is my order?"
        abandoned = send(client, base, bearer(key), slow_text, "m1", context_id)
        assert abandoned.status_code == 500, abandoned.text
        assert abandoned.headers["content-type"] == "application/a2a+json"
        error = abandoned.json()["error"]
        assert error["status"] == "INTERNAL"
        assert error["message"] == TURN_TIMED_OUT
        assert error["details"][0]["reason"] == "INTERNAL"
        # The abandoned bot is still working; the message was released, so a retry runs the
        # bot again (answering at once this time) instead of waiting for the lost answer.
        assert bot_runs(runs, "done")["m1"] == 0
        retry = send(client, base, bearer(key), slow_text, "m1", context_id)
        assert_reply(retry, message_id="m1", text=slow_text, earlier=["m0"], context_id=context_id)
        # The abandoned run finishes later: its answer is dropped, the stored reply stays.
        deadline = time.monotonic() + SLOW + 20
        while bot_runs(runs, "done")["m1"] < 2:
            assert time.monotonic() < deadline, "the abandoned run never finished"
            time.sleep(0.1)
        again = send(client, base, bearer(key), slow_text, "m1", context_id)
        assert again.content == retry.content
        later = send(client, base, bearer(key), "next", "m2", context_id)
        assert_reply(later, message_id="m2", text="next", earlier=["m0", "m1"])
    assert bot_runs(runs) == {"m0": 1, "m1": 2, "m2": 1}
