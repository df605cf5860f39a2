"""A bounded soak: many personal agents talk at once, for `PACTMW_SOAK_SECONDS` (default 10).

Twenty agent users (each its own `sub`) hold multi-turn conversations, start new ones now and
then, resend an earlier message (a sequential retry) and sometimes send one new message twice
at once (a concurrent duplicate), against (a) one `pactmw serve` on sqlite and (b) two
`pactmw serve` processes sharing one PostgreSQL database, requests alternating between them.

Checked: no 5xx at all; every 200 reply belongs to its message and conversation and shows the
bot the exact history so far; every retry returns the bytes of the first reply; the bot ran
exactly once per messageId (counted in a file by every server process); the database holds
exactly the replies the agents received; the resident memory of each server process grows by
less than `RSS_GROWTH_LIMIT` between the start and the end of the steady state.

`make soak` runs this file for 60 s per store.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import attrs
import httpx
import psycopg
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from tests.reliability.support import (
    assert_reply,
    bearer,
    bot_env,
    bot_runs,
    inline_agent,
    is_pending,
    rss_kib,
    send,
    write_config,
)
from tests.support.net import free_port, loopback_client
from tests.support.pg import postgres_server
from tests.support.servers import process_server, serve_argv

SOAK_SECONDS = float(os.environ.get("PACTMW_SOAK_SECONDS", "10"))
AGENTS = 20
RSS_GROWTH_LIMIT = 30 * 1024  # KiB, per server process, over the steady state
TOKEN_REUSE = 30.0  # seconds an agent keeps using one JWT (PACT allows up to its expiry)
RETRY_RATE = 0.10  # share of requests that resend an earlier, answered message
DUPLICATE_RATE = 0.05  # share of new messages sent twice at once (one per server)


def warm_up_seconds(duration: float) -> float:
    """Traffic before the steady state (imports, caches, pools, allocator arenas settle)."""
    return min(5.0, max(2.0, duration * 0.2))


@attrs.define
class Sent:
    """One answered user message, as the agent knows it."""

    context_id: str
    text: str
    body: bytes


@attrs.define
class Tally:
    lock: threading.Lock = attrs.field(factory=threading.Lock)
    statuses: Counter[int] = attrs.field(factory=Counter)
    kinds: Counter[str] = attrs.field(factory=Counter)
    failures: list[str] = attrs.field(factory=list)
    slowest: float = 0.0

    def record(self, kind: str, status: int, took: float) -> None:
        with self.lock:
            self.statuses[status] += 1
            self.kinds[kind] += 1
            self.slowest = max(self.slowest, took)

    def fail(self, message: str) -> None:
        with self.lock:
            self.failures.append(message)


class SoakAgent:
    """One agent user: conversations of 3 to 8 turns, retries, concurrent duplicates."""

    def __init__(
        self, index: int, bases: list[str], key: PrivateJWK, tally: Tally, seed: int
    ) -> None:
        self.index = index
        self.bases = bases
        self.key = key
        self.tally = tally
        self.random = random.Random(seed)
        self.sub = f"soak-user-{index}-{uuid.uuid4().hex[:6]}"
        self.sent: dict[str, Sent] = {}  # every answered message id
        self.requests = 0
        self._token = ""
        self._token_at = -1e9
        self._context: str | None = None
        self._earlier: list[str] = []  # answered message ids of the current conversation
        self._length = 0

    def _base(self) -> str:
        self.requests += 1
        return self.bases[self.requests % len(self.bases)]

    def _authorization(self) -> str:
        if time.monotonic() - self._token_at > TOKEN_REUSE:
            self._token, self._token_at = bearer(self.key, self.sub), time.monotonic()
        return self._token

    def _send(
        self,
        client: httpx.Client,
        kind: str,
        text: str,
        message_id: str,
        context_id: str | None,
        base: str | None = None,
    ) -> httpx.Response:
        base = base or self._base()
        started = time.monotonic()
        answer = send(client, base, self._authorization(), text, message_id, context_id)
        self.tally.record(kind, answer.status_code, time.monotonic() - started)
        if answer.status_code >= 500:
            raise AssertionError(f"{kind} {message_id} on {base}: {answer.status_code}")
        return answer

    def run(self, end: float) -> None:
        try:
            with loopback_client(timeout=30) as client, loopback_client(timeout=30) as second:
                while time.monotonic() < end:
                    roll = self.random.random()
                    if roll < RETRY_RATE and self.sent:
                        self.retry(client)
                    else:
                        self.new_message(client, second, duplicate=roll > 1 - DUPLICATE_RATE)
        except Exception as exc:  # every failure is reported, with the agent that saw it
            self.tally.fail(f"agent {self.index}: {type(exc).__name__}: {exc}")

    def retry(self, client: httpx.Client) -> None:
        message_id = self.random.choice(list(self.sent))
        sent = self.sent[message_id]
        answer = self._send(client, "retry", sent.text, message_id, sent.context_id)
        assert answer.status_code == 200, (message_id, answer.status_code, answer.text)
        assert answer.content == sent.body, f"retry of {message_id} returned other bytes"

    def new_message(self, client: httpx.Client, second: httpx.Client, *, duplicate: bool) -> None:
        if self._context is None or len(self._earlier) >= self._length:
            self._context, self._earlier = None, []
            self._length = self.random.randint(3, 8)
        message_id = str(uuid.uuid4())
        text = f"agent {self.index} turn {len(self._earlier) + 1} ({self.random.random():.6f})"
        if duplicate:
            answers = self._duplicates(client, second, text, message_id)
        else:
            answers = [self._send(client, "new", text, message_id, self._context)]
        replies = [a for a in answers if a.status_code == 200]
        for answer in answers:
            assert answer.status_code == 200 or is_pending(answer), (
                answer.status_code,
                answer.text,
            )
        assert replies, [a.text for a in answers]
        assert len({a.content for a in replies}) == 1, "duplicates got different replies"
        message = assert_reply(
            replies[0],
            message_id=message_id,
            text=text,
            earlier=self._earlier,
            context_id=self._context,
        )
        self._context = message["contextId"]
        self._earlier.append(message_id)
        self.sent[message_id] = Sent(self._context, text, replies[0].content)

    def _duplicates(
        self, client: httpx.Client, second: httpx.Client, text: str, message_id: str
    ) -> list[httpx.Response]:
        """The same new message twice at once, one copy per server; retried while pending."""
        if self._context is None:
            # Without a contextId each copy would start its own conversation: start one first.
            opened, opening_text = str(uuid.uuid4()), f"{text} (opening)"
            first = self._send(client, "new", opening_text, opened, None)
            opening = assert_reply(first, message_id=opened, text=opening_text, earlier=[])
            self._context = opening["contextId"]
            self._earlier.append(opened)
            self.sent[opened] = Sent(self._context, opening_text, first.content)
        context_id = self._context
        other: list[httpx.Response] = []
        racer = threading.Thread(
            target=lambda: other.append(
                self._send(second, "duplicate", text, message_id, context_id, self.bases[-1])
            )
        )
        racer.start()
        mine = self._send(client, "duplicate", text, message_id, context_id, self.bases[0])
        racer.join(timeout=60)
        assert other, "the concurrent duplicate never came back"
        answers = [mine, *other]
        deadline = time.monotonic() + 30
        while not any(a.status_code == 200 for a in answers):
            assert time.monotonic() < deadline, "the duplicate was never answered"
            time.sleep(0.01)
            answers.append(self._send(client, "duplicate", text, message_id, context_id))
        return answers


@attrs.define
class Deployment:
    bases: list[str]
    pids: list[int]
    runs: Path
    logs: list[Path]
    rows: Any  # () -> list of (context_id, message_id, reply bytes or None)


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="soak-1")


@pytest.fixture(params=["sqlite", "postgres-two-processes"])
def deployment(
    request: pytest.FixtureRequest, tmp_path: Path, key: PrivateJWK
) -> Iterator[Deployment]:
    runs = tmp_path / "runs.txt"
    runs.write_text("")
    env = bot_env(runs)
    with ExitStack() as stack:
        if request.param == "sqlite":
            database = tmp_path / "pactmw.db"
            store = f"sqlite:///{database}"
            count = 1

            def rows() -> list[tuple[str, str, bytes | None]]:
                with sqlite3.connect(database) as conn:
                    return [
                        (r[0], r[1], None if r[2] is None else bytes(r[2]))
                        for r in conn.execute(
                            "SELECT context_id, message_id, reply FROM pactmw_messages"
                        )
                    ]

        else:
            store = stack.enter_context(postgres_server()).create_database()
            count = 2

            def rows() -> list[tuple[str, str, bytes | None]]:
                with psycopg.connect(store) as conn:
                    return [
                        (r[0], r[1], None if r[2] is None else bytes(r[2]))
                        for r in conn.execute(
                            "SELECT context_id, message_id, reply FROM pactmw_messages"
                        )
                    ]

        ports = [free_port() for _ in range(count)]
        config = write_config(
            tmp_path / "pactmw.toml", port=ports[0], store=store, agents=[inline_agent(key)]
        )
        logs = [tmp_path / f"serve-{port}.log" for port in ports]
        processes = [
            stack.enter_context(process_server(serve_argv(config, port), port, env=env, log=log))
            for port, log in zip(ports, logs, strict=True)
        ]
        yield Deployment(
            bases=[f"http://127.0.0.1:{port}" for port in ports],
            pids=[p.pid for p in processes],
            runs=runs,
            logs=logs,
            rows=rows,
        )


def test_soak(deployment: Deployment, key: PrivateJWK, request: pytest.FixtureRequest) -> None:
    tally = Tally()
    started = time.monotonic()
    end = started + SOAK_SECONDS
    agents = [SoakAgent(i, deployment.bases, key, tally, seed=i) for i in range(AGENTS)]
    threads = [threading.Thread(target=a.run, args=(end,)) for a in agents]
    for thread in threads:
        thread.start()

    # RSS: at the start of the steady state, at its end, and the peak in between.
    steady = started + warm_up_seconds(SOAK_SECONDS)
    while time.monotonic() < steady:
        time.sleep(0.05)
    first = {pid: rss_kib(pid) for pid in deployment.pids}
    requests_at_first = sum(tally.statuses.values())
    peak = dict(first)
    while any(t.is_alive() for t in threads) and time.monotonic() < end:
        for pid in deployment.pids:
            peak[pid] = max(peak[pid], rss_kib(pid))
        time.sleep(0.25)
    last = {pid: rss_kib(pid) for pid in deployment.pids}
    requests_in_steady_state = sum(tally.statuses.values()) - requests_at_first
    for thread in threads:
        thread.join(timeout=90)
    assert not any(t.is_alive() for t in threads), "an agent hung"
    elapsed = time.monotonic() - started

    total = sum(tally.statuses.values())
    memory = ", ".join(
        f"pid {pid}: {first[pid] / 1024:.1f} -> {last[pid] / 1024:.1f} MiB "
        f"(peak {peak[pid] / 1024:.1f}, growth {(last[pid] - first[pid]) / 1024:+.1f})"
        for pid in deployment.pids
    )
    summary = (
        f"soak {request.node.callspec.id}: {SOAK_SECONDS:g} s, {total} requests "
        f"({total / elapsed:.0f}/s; {requests_in_steady_state} in the steady state), "
        f"kinds {dict(tally.kinds)}, statuses {dict(tally.statuses)}, "
        f"slowest {tally.slowest:.2f} s; RSS {memory}"
    )
    print("\n" + summary)
    request.node.user_properties.append(("soak", summary))

    assert not tally.failures, tally.failures[:10]
    assert not [s for s in tally.statuses if s >= 500], tally.statuses
    assert set(tally.statuses) <= {200, 400}, tally.statuses  # 400: a duplicate's "pending"
    assert tally.kinds["new"] > AGENTS, "too little traffic to call this a soak"

    # The bot ran exactly once per unique messageId, across every server process.
    answered = {mid: sent for agent in agents for mid, sent in agent.sent.items()}
    started_runs = bot_runs(deployment.runs)
    assert set(started_runs) == set(answered)
    assert [mid for mid, n in started_runs.items() if n != 1] == []
    assert bot_runs(deployment.runs, "done") == started_runs

    # No reply lost or changed: the store holds exactly what the agents received.
    stored = {(ctx, mid): reply for ctx, mid, reply in deployment.rows()}
    assert stored == {(sent.context_id, mid): sent.body for mid, sent in answered.items()}

    for pid in deployment.pids:
        assert last[pid] - first[pid] < RSS_GROWTH_LIMIT, memory
    for log in deployment.logs:
        assert "Traceback" not in log.read_text(errors="replace"), log
