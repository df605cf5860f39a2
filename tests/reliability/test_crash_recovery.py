"""A `pactmw serve` killed with SIGKILL mid-turn: the restarted server finishes the turn.

The bot sleeps on a `[slow]` message; the test kills the server process while that
`message:send` is in flight (after the bot started, so the turn is claimed and unanswered),
starts a new server on the same sqlite database, and retries the message. Within the claim
lease the retry is told the message has no reply yet; after `claim_lease_seconds` it takes the
turn over, runs the bot and gets a reply, and later retries get the very same bytes. The
turns answered before the crash are neither lost nor run again.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
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
from tests.support.servers import process_server, serve_argv

LEASE = 3.0  # claim_lease_seconds in the server's configuration
SLOW = 1.5  # how long the bot works on a `[slow]` message


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="crash-1")


def test_turn_in_flight_at_sigkill_is_answered_after_restart(
    tmp_path: Path, key: PrivateJWK
) -> None:
    port = free_port()
    runs = tmp_path / "runs.txt"
    database = tmp_path / "pactmw.db"
    config = write_config(
        tmp_path / "pactmw.toml",
        port=port,
        store=f"sqlite:///{database}",
        agents=[inline_agent(key)],
        claim_lease_seconds=LEASE,
    )
    argv, env = serve_argv(config, port), bot_env(runs, SLOW)
    slow_text = "[slow] where is my order?"
    answered: dict[str, bytes] = {}
    outcome: dict[str, object] = {}

    with loopback_client(timeout=30) as client:
        with process_server(argv, port, env=env, log=tmp_path / "first.log") as server:
            base = f"http://127.0.0.1:{port}"
            first = send(client, base, bearer(key), "hello", "m1")
            context_id = assert_reply(first, message_id="m1", text="hello", earlier=[])["contextId"]
            answered["m1"] = first.content
            second = send(client, base, bearer(key), "and again", "m2", context_id)
            assert_reply(second, message_id="m2", text="and again", earlier=["m1"])
            answered["m2"] = second.content

            def in_flight() -> None:
                try:
                    outcome["response"] = send(
                        client, base, bearer(key), slow_text, "m3", context_id
                    )
                except httpx.HTTPError as exc:
                    outcome["error"] = exc

            sender = threading.Thread(target=in_flight)
            sender.start()
            deadline = time.monotonic() + 15
            while bot_runs(runs)["m3"] == 0:
                assert time.monotonic() < deadline, "the bot never started on m3"
                assert sender.is_alive(), outcome
                time.sleep(0.01)
            claimed_at = time.monotonic()
            server.kill()  # SIGKILL: no shutdown, no release of the claim
            server.wait(timeout=10)
            sender.join(timeout=15)
            assert not sender.is_alive()
        # The client saw the connection die, never a reply.
        assert "response" not in outcome, outcome
        assert isinstance(outcome["error"], httpx.TransportError), outcome
        assert bot_runs(runs, "done")["m3"] == 0

        with process_server(argv, port, env=env, log=tmp_path / "second.log"):
            base = f"http://127.0.0.1:{port}"
            # Within the lease the dead worker's claim still holds the turn.
            early = send(client, base, bearer(key), slow_text, "m3", context_id)
            if time.monotonic() - claimed_at < LEASE - 0.5:
                assert is_pending(early), (early.status_code, early.text)
            else:  # the restart took longer than the lease: the retry may own the turn
                assert early.status_code in (200, 400), early.text
            # After the lease, a retry takes the turn over and runs the bot.
            deadline = time.monotonic() + LEASE + SLOW + 20
            retry = early
            while retry.status_code != 200:
                assert is_pending(retry), (retry.status_code, retry.text)
                assert time.monotonic() < deadline, "the turn was never taken over"
                time.sleep(0.25)
                retry = send(client, base, bearer(key), slow_text, "m3", context_id)
            assert time.monotonic() - claimed_at >= LEASE - 0.1
            assert_reply(
                retry, message_id="m3", text=slow_text, earlier=["m1", "m2"], context_id=context_id
            )
            answered["m3"] = retry.content
            # Every further retry returns the stored bytes, without running the bot again.
            for message_id, text in (("m3", slow_text), ("m1", "hello"), ("m2", "and again")):
                again = send(client, base, bearer(key), text, message_id, context_id)
                assert again.status_code == 200, again.text
                assert again.content == answered[message_id], message_id
            # The conversation goes on, with every earlier turn in its history, once.
            fourth = send(client, base, bearer(key), "thanks", "m4", context_id)
            assert_reply(
                fourth,
                message_id="m4",
                text="thanks",
                earlier=["m1", "m2", "m3"],
                context_id=context_id,
            )

    started, done = bot_runs(runs), bot_runs(runs, "done")
    # m3 ran twice: once in the killed process (never finished), once after the takeover.
    assert started == {"m1": 1, "m2": 1, "m3": 2, "m4": 1}, started
    assert done == {"m1": 1, "m2": 1, "m3": 1, "m4": 1}, done
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = conn.execute(
            "SELECT message_id, reply FROM pactmw_messages WHERE context_id = ? ORDER BY id",
            (context_id,),
        ).fetchall()
    assert [r[0] for r in rows] == ["m1", "m2", "m3", "m4"]
    for message_id, reply in rows[:3]:
        assert bytes(reply) == answered[message_id]


def test_sigkill_under_load_loses_no_answered_turn(tmp_path: Path, key: PrivateJWK) -> None:
    """Kill the server while eight agents talk at once; every 200 they got survives."""
    port = free_port()
    runs = tmp_path / "runs.txt"
    database = tmp_path / "pactmw.db"
    config = write_config(
        tmp_path / "pactmw.toml",
        port=port,
        store=f"sqlite:///{database}",
        agents=[inline_agent(key)],
        claim_lease_seconds=LEASE,
    )
    argv, env = serve_argv(config, port), bot_env(runs, SLOW)
    base = f"http://127.0.0.1:{port}"
    stop = threading.Event()
    lock = threading.Lock()
    got: dict[str, tuple[str, str, bytes]] = {}  # message id -> (sub, text, body) of a 200
    statuses: list[int] = []

    def agent(index: int) -> None:
        sub = f"user-{index}"
        context_id: str | None = None
        turn = 0
        with loopback_client(timeout=10) as client:
            while not stop.is_set():
                message_id = f"a{index}-{turn}"
                try:
                    answer = send(
                        client, base, bearer(key, sub), f"t{turn}", message_id, context_id
                    )
                except httpx.TransportError:
                    time.sleep(0.05)
                    continue
                with lock:
                    statuses.append(answer.status_code)
                if answer.status_code == 200:
                    context_id = answer.json()["message"]["contextId"]
                    with lock:
                        got[message_id] = (sub, f"t{turn}", answer.content)
                    turn += 1

    with process_server(argv, port, env=env, log=tmp_path / "first.log") as server:
        threads = [threading.Thread(target=agent, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 20
        while len(got) < 40:
            assert time.monotonic() < deadline, f"only {len(got)} replies"
            time.sleep(0.01)
        server.kill()
        server.wait(timeout=10)
        stop.set()
        for thread in threads:
            thread.join(timeout=20)
    assert all(status < 500 for status in statuses), statuses
    before = dict(got)

    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with (
        process_server(argv, port, env=env, log=tmp_path / "second.log"),
        loopback_client(timeout=30) as client,
    ):
        for message_id, (sub, text, body) in before.items():
            context_id = json.loads(body)["message"]["contextId"]
            again = send(client, base, bearer(key, sub), text, message_id, context_id)
            assert again.status_code == 200, (message_id, again.text)
            assert again.content == body, message_id
    started = bot_runs(runs)
    for message_id in before:
        assert started[message_id] == 1, (message_id, started[message_id])
