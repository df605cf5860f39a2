"""PostgreSQL goes away under a running `pactmw serve`, and comes back.

Agents keep talking while the test stops the database (`pg_ctl stop -m fast`, which cuts the
Provider's connections, mid-transaction if need be). Meanwhile every answer is a bare 503
with `Retry-After` (never a 500, never a stack trace), and nothing the store already holds is
damaged. When PostgreSQL starts again on the same port and data directory, the same server
process recovers by itself: the conversations go on, and a retry of any message answered
before (or during) the outage returns the very bytes first sent.

The agents behave as PACT asks: after a 503 they send the same messageId again; while the
message is claimed but unanswered (its worker lost the database between running the bot and
storing the reply) they wait for the claim lease, after which a retry runs the bot again.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

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
    send,
    write_config,
)
from tests.support.net import free_port, loopback_client
from tests.support.pg import (
    PostgresServer,
    log_tail,
    pg_start,
    pg_stop,
    postgres_server_fixture,
)
from tests.support.servers import process_server, serve_argv

LEASE = 2.0  # claim_lease_seconds of the server
AGENTS = 6
OUTAGE = 3.0  # seconds PostgreSQL stays down while agents talk


# Its own server, not the session's: this module stops and starts it.
postgres = postgres_server_fixture(scope="module")


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="outage-1")


@attrs.define
class Served:
    base: str
    process: subprocess.Popen[bytes]
    runs: Path  # the bot's run log
    dsn: str
    log: Path  # the server's output


@pytest.fixture
def served(
    postgres: PostgresServer, key: PrivateJWK, tmp_path: Path
) -> Iterator[tuple[Served, PostgresServer]]:
    port = free_port()
    runs = tmp_path / "runs.txt"
    dsn = postgres.create_database()
    config = write_config(
        tmp_path / "pactmw.toml",
        port=port,
        store=dsn,
        agents=[inline_agent(key)],
        claim_lease_seconds=LEASE,
    )
    log = tmp_path / "serve.log"
    try:
        with process_server(serve_argv(config, port), port, env=bot_env(runs), log=log) as proc:
            yield Served(f"http://127.0.0.1:{port}", proc, runs, dsn, log), postgres
    finally:
        _ensure_running(postgres)


def _ensure_running(server: PostgresServer) -> None:
    try:
        with psycopg.connect(server.dsn_for("postgres"), connect_timeout=2):
            return
    except psycopg.OperationalError:
        pg_start(server)


def assert_unavailable(response: httpx.Response) -> None:
    """The Provider's answer while its store is down: 503, Retry-After, nothing else."""
    assert response.status_code == 503, (response.status_code, response.text)
    retry_after = response.headers.get("retry-after")
    assert retry_after is not None, response.headers
    assert retry_after.isdigit(), response.headers
    assert response.content == b"", response.content  # no stack trace, no DSN, nothing


class Agent:
    """One personal agent user talking in one conversation, one message at a time."""

    def __init__(self, index: int, base: str, key: PrivateJWK) -> None:
        self.index = index
        self.base = base
        self.key = key
        self.sub = f"outage-user-{index}"
        self.context_id: str | None = None
        self.answered: list[str] = []  # message ids answered in this conversation, in order
        self.texts: dict[str, str] = {}
        self.bodies: dict[str, bytes] = {}  # the first 200 body of each message id
        self.statuses: list[tuple[float, int]] = []  # (monotonic time, status) of every answer
        self.slowest = 0.0
        self.failures: list[str] = []

    def turn(self, client: httpx.Client, deadline: float) -> None:
        """Send the next message until it is answered (or `deadline`)."""
        message_id = f"o{self.index}-{len(self.answered)}"
        text = f"message {len(self.answered)} of agent {self.index}"
        self.texts[message_id] = text
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                answer = send(
                    client, self.base, bearer(self.key, self.sub), text, message_id, self.context_id
                )
            except httpx.TransportError as exc:
                self.failures.append(f"{message_id}: transport error {exc!r}")
                return
            took = time.monotonic() - started
            self.slowest = max(self.slowest, took)
            self.statuses.append((time.monotonic(), answer.status_code))
            if answer.status_code == 200:
                message = assert_reply(
                    answer,
                    message_id=message_id,
                    text=text,
                    earlier=self.answered,
                    context_id=self.context_id,
                )
                self.context_id = message["contextId"]
                self.answered.append(message_id)
                self.bodies[message_id] = answer.content
                return
            if answer.status_code == 503:
                assert_unavailable(answer)
                time.sleep(0.1)  # Retry-After says 1 s; the test keeps it short
            elif is_pending(answer):
                time.sleep(0.2)  # claimed by a turn that lost the database: wait for the lease
            else:
                self.failures.append(f"{message_id}: {answer.status_code} {answer.text}")
                return
        self.failures.append(f"{message_id}: not answered before the deadline")

    def run(self, stop: threading.Event, deadline: float) -> None:
        try:
            with loopback_client(timeout=30) as client:
                while not stop.is_set() and not self.failures:
                    self.turn(client, deadline)
        except AssertionError as exc:
            self.failures.append(f"assertion: {exc}")


def test_outage_gives_503_and_the_same_process_recovers(
    served: tuple[Served, PostgresServer], key: PrivateJWK
) -> None:
    server, postgres = served
    agents = [Agent(i, server.base, key) for i in range(AGENTS)]
    stop = threading.Event()
    deadline = time.monotonic() + 90
    threads = [threading.Thread(target=a.run, args=(stop, deadline)) for a in agents]
    for thread in threads:
        thread.start()
    try:
        # Steady traffic first: every agent has a conversation with a few turns.
        while min(len(a.answered) for a in agents) < 3:
            assert all(t.is_alive() for t in threads), [a.failures for a in agents]
            assert time.monotonic() < deadline, "no steady traffic"
            time.sleep(0.02)
        before = {a.index: dict(a.bodies) for a in agents}

        stopped_at = time.monotonic()
        pg_stop(postgres)
        down_at = time.monotonic()  # pg_ctl -w: the server has exited
        time.sleep(OUTAGE)
        restart_at = time.monotonic()
        pg_start(postgres)
        started_at = time.monotonic()

        # The same process answers again by itself, and every conversation moves on.
        counts = {a.index: len(a.answered) for a in agents}
        while any(len(a.answered) < counts[a.index] + 3 for a in agents):
            assert all(t.is_alive() for t in threads), [a.failures for a in agents]
            assert time.monotonic() < started_at + 30, "no recovery within 30 s"
            time.sleep(0.02)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    failures = [f for a in agents for f in a.failures]
    assert not failures, [*failures, log_tail(server.log)]
    assert server.process.poll() is None  # the same process, never restarted
    assert "Traceback" not in server.log.read_text(errors="replace")  # outages are expected

    statuses = [s for a in agents for s in a.statuses]
    assert {code for _, code in statuses} <= {200, 400, 503}, statuses
    during = [code for at, code in statuses if stopped_at < at < restart_at]
    assert 503 in during, "nobody saw the outage"
    # (A margin for an answer whose store work ended just before the stop.)
    assert 200 not in [code for at, code in statuses if down_at + 0.5 < at < restart_at]
    after_start = [code for at, code in statuses if at > started_at]
    late_503 = after_start.count(503)
    first_200 = min(at for at, code in statuses if code == 200 and at > started_at)
    print(
        f"\npostgres outage: {len(statuses)} answers, {during.count(503)} x 503 while down, "
        f"{late_503} x 503 after the restart, first 200 {first_200 - started_at:.2f} s after "
        f"pg_ctl start returned, slowest answer {max(a.slowest for a in agents):.2f} s"
    )
    # A 503 must come quickly: the agent is told to come back, not left hanging.
    assert max(a.slowest for a in agents) < 12

    # Retries of everything ever answered return the first bytes, before or after the outage.
    runs = bot_runs(server.runs)
    with loopback_client(timeout=30) as client:
        for agent in agents:
            for message_id in agent.answered:
                again = send(
                    client,
                    server.base,
                    bearer(key, agent.sub),
                    agent.texts[message_id],
                    message_id,
                    agent.context_id,
                )
                assert again.status_code == 200, again.text
                assert again.content == agent.bodies[message_id], message_id
            for message_id in before[agent.index]:
                # Answered before the outage: the bot ran once, whatever happened after.
                assert runs[message_id] == 1, (message_id, runs[message_id])
    assert bot_runs(server.runs) == runs  # retries ran nothing

    # The database holds exactly what the agents were told, once each.
    with psycopg.connect(server.dsn) as conn:
        rows = conn.execute(
            "SELECT context_id, message_id, reply FROM pactmw_messages ORDER BY id"
        ).fetchall()
    stored = {(r[0], r[1]): bytes(r[2]) if r[2] is not None else None for r in rows}
    expected = {
        (agent.context_id, message_id): body
        for agent in agents
        for message_id, body in agent.bodies.items()
    }
    assert stored == expected


def _pactmw_sessions(postgres: PostgresServer, dsn: str) -> int:
    with psycopg.connect(postgres.dsn_for("postgres"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = 'pactmw' AND datname = %s",
            (dsn.rsplit("/", 1)[1],),
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("how", ["restart", "terminate"])
def test_connections_lost_while_idle_cost_no_request(
    served: tuple[Served, PostgresServer], key: PrivateJWK, how: str
) -> None:
    """Pooled connections the server ended while they sat idle are dropped, not used.

    Regression: each one used to fail one request with a 503 after PostgreSQL was back (up to
    `max_connections` failed requests per process after every database restart).
    """
    server, postgres = served
    agents = [Agent(i, server.base, key) for i in range(8)]
    stop = threading.Event()
    deadline = time.monotonic() + 60
    threads = [threading.Thread(target=a.run, args=(stop, deadline)) for a in agents]
    for thread in threads:
        thread.start()
    while min(len(a.answered) for a in agents) < 3:
        assert time.monotonic() < deadline, [a.failures for a in agents]
        time.sleep(0.02)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert not [f for a in agents for f in a.failures]
    idle = _pactmw_sessions(postgres, server.dsn)
    assert idle > 1  # several connections wait in the pool
    if how == "restart":
        pg_stop(postgres)
        pg_start(postgres)
    else:
        with psycopg.connect(postgres.dsn_for("postgres"), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'pactmw'"
            )
        while _pactmw_sessions(postgres, server.dsn):
            time.sleep(0.02)
    codes = []
    with loopback_client(timeout=30) as client:
        for agent in agents:
            for _ in range(2):
                before = len(agent.answered)
                agent.turn(client, time.monotonic() + 10)
                codes.append(200 if len(agent.answered) > before else agent.statuses[-1][1])
    assert codes == [200] * len(codes), (idle, codes, [a.failures for a in agents])
