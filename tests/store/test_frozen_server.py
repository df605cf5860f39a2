"""PostgreSQL stops answering mid-operation: the store gives up after its operation timeout
with `StoreUnavailable` (a 503 for the Provider), never holding the calling thread until the
server comes back; the connection it gave up on is closed, and the store works again.

The test freezes the backend process that serves the store's pooled connection (SIGSTOP),
as a frozen VM or a network that drops packets does: the server's own timeouts
(`lock_timeout`, `statement_timeout`) cannot fire in a process that does not run, and the
operating system still acknowledges what the client sends.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.core.jwk import generate_private_jwk
from pactmw.provider import Provider
from pactmw.provider.settings import ProviderSettings
from pactmw.store import StoreUnavailable
from pactmw.store.postgres import PostgresStore
from tests.reliability.support import AUDIENCE, bearer, inline_agent, reply_of, send
from tests.support.net import loopback_client
from tests.support.pg import PostgresServer
from tests.support.servers import uvicorn_server
from tests.support.waits import outcome_within

#: The store's operation timeout in these tests.
TIMEOUT = 1.0
#: A hang check: far above the timeout, far below "until the server answers again".
BOUND = 3 * TIMEOUT + 10.0

AGENT = "https://pa.example"


def _backend_pid(store: PostgresStore) -> int:
    """The server process behind the store's (one) pooled connection."""
    with store._connection() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


@contextmanager
def _frozen(*pids: int) -> Iterator[None]:
    """The processes stopped (they read nothing, answer nothing) for the block."""
    stopped: list[int] = []
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        yield
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)


def _server_processes(server: PostgresServer) -> list[int]:
    """The postmaster and every process it started (backends, checkpointer...): the whole
    server, as a frozen machine holds it."""
    postmaster = int((server.data_dir / "postmaster.pid").read_text().split()[0])
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        if int(stat.rpartition(")")[2].split()[1]) == postmaster:
            children.append(int(entry.name))
    return [postmaster, *children]


@pytest.fixture
def store(postgres_server: PostgresServer) -> Iterator[PostgresStore]:
    dsn = postgres_server.create_database()
    # One connection: the frozen one is the connection the next operation would get back,
    # and an operation after it can only run if its slot was freed.
    opened = PostgresStore(dsn, max_connections=1, connect_timeout=1, operation_timeout=TIMEOUT)
    opened.set_agent_enabled(AGENT, True)  # migrates; the connection is pooled
    yield opened
    opened.close()
    postgres_server.drop_database(dsn.rsplit("/", 1)[1])


OPERATIONS: dict[str, Callable[[PostgresStore], object]] = {
    "read": lambda store: store.agent_enabled(AGENT),
    "write": lambda store: store.set_agent_enabled(AGENT, False),
}


@pytest.mark.parametrize("kind", list(OPERATIONS))
def test_a_frozen_server_is_unavailable_after_the_operation_timeout(
    store: PostgresStore, kind: str
) -> None:
    pid = _backend_pid(store)
    with _frozen(pid):
        outcome = outcome_within(BOUND, lambda: OPERATIONS[kind](store), waiting_for="PostgreSQL")
        assert isinstance(outcome, StoreUnavailable), repr(outcome)
        # What an operator reads: which store, and why, in one line.
        message = str(outcome)
        assert message.startswith("PostgreSQL postgres@127.0.0.1:"), message
        assert "no answer within 1 s (operation_timeout)" in message, message
        assert "\n" not in message, message
        # The frozen connection was dropped, its slot freed: while that backend is still
        # stopped, the next operation runs on a new connection to the server.
        assert (
            outcome_within(BOUND, lambda: store.agent_enabled(AGENT), waiting_for="PostgreSQL")
            is None
        )
        assert _backend_pid(store) != pid


def test_the_store_works_again_once_the_server_answers(store: PostgresStore) -> None:
    pid = _backend_pid(store)
    with _frozen(pid):
        outcome = outcome_within(
            BOUND, lambda: store.set_agent_enabled(AGENT, False), waiting_for="PostgreSQL"
        )
    assert isinstance(outcome, StoreUnavailable), repr(outcome)
    # Nothing was written: only the transaction's BEGIN was sent (the driver waits for each
    # answer before it sends the next statement), and the backend ends at the closed
    # connection. The store reads and writes on a new connection.
    assert store.agent_enabled(AGENT) is True
    store.set_agent_enabled(AGENT, False)
    assert store.agent_enabled(AGENT) is False
    assert _backend_pid(store) != pid


def test_a_whole_frozen_server_fails_every_operation_in_bounded_time(
    postgres_server: PostgresServer, store: PostgresStore
) -> None:
    """The machine freezes: the pooled connection is cut at the operation timeout, and the
    new connections the next operations try give up at the connect timeout."""
    with _frozen(*_server_processes(postgres_server)):
        first = outcome_within(BOUND, lambda: store.agent_enabled(AGENT), waiting_for="PostgreSQL")
        assert isinstance(first, StoreUnavailable), repr(first)
        assert "no answer within 1 s" in str(first)
        again = outcome_within(BOUND, lambda: store.agent_enabled(AGENT), waiting_for="PostgreSQL")
        assert isinstance(again, StoreUnavailable), repr(again)
    assert store.agent_enabled(AGENT) is True


def test_operations_that_answer_in_time_keep_their_connection(store: PostgresStore) -> None:
    """The deadline is per operation: a connection that served quick operations for longer
    than the timeout in all is the same connection still."""
    pid = _backend_pid(store)
    until = time.monotonic() + 2 * TIMEOUT
    while time.monotonic() < until:
        store.set_agent_enabled(AGENT, True)
    assert _backend_pid(store) == pid


def test_the_operators_cleanup_may_outlast_the_operation_timeout(store: PostgresStore) -> None:
    """`cleanup` is one transaction that may rightly run long (a first cleanup of a big
    database), so the operation timeout does not cut it; its lock waits stay bounded. Here
    it waits for a lock another session holds for longer than the operation timeout (and
    less than the lock timeout)."""
    holder = psycopg.connect(store._dsn)
    holder.execute("LOCK TABLE pactmw_device_authorizations IN SHARE MODE")
    release = threading.Timer(2.5 * TIMEOUT, holder.rollback)
    release.start()
    try:
        outcome = outcome_within(
            BOUND,
            lambda: store.cleanup(now=time.time(), conversations_idle_before=0.0),
            waiting_for="PostgreSQL",
        )
    finally:
        release.join()
        holder.close()
    assert outcome is None, repr(outcome)


def test_operation_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="operation_timeout"):
        PostgresStore("postgresql://127.0.0.1/x", operation_timeout=0)


def test_a_provider_answers_503_while_the_backend_is_frozen(store: PostgresStore) -> None:
    """Over HTTP: the request that meets the frozen connection gets a 503 with Retry-After
    (it used to hang with its worker thread), the next one a reply on a new connection, and
    the first one's retry its reply once the server runs again."""
    key = generate_private_jwk("ES256", kid="frozen-1")
    settings = ProviderSettings.from_mapping(
        {
            "base_url": "http://127.0.0.1",
            "audience": AUDIENCE,
            "store": "memory://",  # replaced by the PostgreSQL store below
            "agents": [inline_agent(key)],
            "brands": {"acme": {"name": "Acme", "handler": "bot"}},
        },
        handlers={"bot": lambda turn: f"answer to {turn.message_id}"},
    )
    provider = Provider.from_settings(settings, store=store)
    try:
        with (
            uvicorn_server(A2AProviderApp(provider)) as base,
            loopback_client(timeout=BOUND) as client,  # a hang is a ReadTimeout, not a pass
        ):
            reply_of(send(client, base, bearer(key), "hello", "m0"))  # the connection is pooled
            pid = _backend_pid(store)
            with _frozen(pid):
                refused = send(client, base, bearer(key), "are you there?", "m1")
                assert refused.status_code == 503, refused.text
                assert refused.headers["Retry-After"] == "1"
                assert reply_of(send(client, base, bearer(key), "hello again", "m2"))
            assert reply_of(send(client, base, bearer(key), "are you there?", "m1"))["parts"]
    finally:
        provider.close()
