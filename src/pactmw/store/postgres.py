"""The PostgreSQL Store: shared state for Providers running on many machines.

Needs the `postgres` extra (psycopg 3). Each turn decision runs in one transaction that
locks the conversation row (`SELECT ... FOR UPDATE`), so concurrent duplicates anywhere
serialize on that row and exactly one of them owns the turn; unique constraints back the
invariants up. The delegation operations work the same way: each locks the row it decides
on (device code, refresh token, grant) or is one conditional statement, and upserts of a
grant key also take a per-key advisory lock, since the first grant has no row yet to lock.
Connection problems surface as `StoreUnavailable`, other database errors as `StoreError`;
neither message contains the DSN's password.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from pactmw.store._sql import (
    AccountTokenStatements,
    Dialect,
    Executor,
    OperationStatements,
    SessionStatements,
    SqlStore,
    Statements,
    account_tokens,
    operations,
    sessions,
)
from pactmw.store.base import StoreError, StoreUnavailable

__all__ = ["MIGRATIONS", "PostgresStore"]

_Connection = psycopg.Connection[TupleRow]
_Cursor = psycopg.Cursor[TupleRow]

# A fixed key for pg_advisory_xact_lock so that processes starting together migrate one at
# a time (CREATE TABLE IF NOT EXISTS alone races on the catalog). The digits spell "pactmw".
_MIGRATION_LOCK_KEY = 0x70_61_63_74_6D_77

# The first half of the two-int4 advisory lock taken per grant key by upsert_grant ("pacg").
# PostgreSQL keeps two-int4 keys apart from bigint keys, so it never meets the one above.
_GRANT_LOCK_CLASS = 0x70_61_63_67

# Each entry is one schema version: the statements that bring version N-1 to N. Append new
# steps; never edit a released one, since databases in the field already ran it.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE pactmw_conversations (
            context_id TEXT PRIMARY KEY,
            brand_id TEXT NOT NULL,
            issuer TEXT NOT NULL,
            sub TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            last_activity DOUBLE PRECISION NOT NULL,
            closed BOOLEAN NOT NULL DEFAULT FALSE,
            account TEXT
        )
        """,
        # One row per user message; the reply columns stay NULL while the turn is claimed.
        # The two unique constraints are the idempotency invariants (NULLs never collide).
        """
        CREATE TABLE pactmw_messages (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            context_id TEXT NOT NULL
                REFERENCES pactmw_conversations (context_id) ON DELETE CASCADE,
            message_id TEXT NOT NULL,
            text TEXT NOT NULL,
            claimed_at DOUBLE PRECISION NOT NULL,
            reply_message_id TEXT,
            reply_text TEXT,
            reply BYTEA,
            replied_at DOUBLE PRECISION,
            CONSTRAINT pactmw_messages_user_key UNIQUE (context_id, message_id),
            CONSTRAINT pactmw_messages_agent_key UNIQUE (context_id, reply_message_id)
        )
        """,
        """
        CREATE TABLE pactmw_agent_overrides (
            issuer TEXT PRIMARY KEY,
            enabled BOOLEAN NOT NULL
        )
        """,
    ),
    # Version 2: the PACT Delegated profile.
    (
        """
        CREATE TABLE pactmw_grants (
            grant_id TEXT PRIMARY KEY,
            brand_id TEXT NOT NULL,
            account TEXT NOT NULL,
            client_id TEXT NOT NULL,
            pa_sub TEXT NOT NULL,
            scopes TEXT[] NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            revoked_at DOUBLE PRECISION
        )
        """,
        # One unrevoked grant per key: the invariant behind upsert_grant, kept by the database.
        """
        CREATE UNIQUE INDEX pactmw_grants_one_live
            ON pactmw_grants (brand_id, account, client_id, pa_sub) WHERE revoked_at IS NULL
        """,
        "CREATE INDEX pactmw_grants_account ON pactmw_grants (account, brand_id)",
        """
        CREATE TABLE pactmw_device_authorizations (
            device_code_hash TEXT PRIMARY KEY,
            user_code TEXT NOT NULL CONSTRAINT pactmw_device_authorizations_user_code UNIQUE,
            brand_id TEXT NOT NULL,
            client_id TEXT NOT NULL,
            pa_sub TEXT NOT NULL,
            scopes TEXT[] NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            interval_seconds DOUBLE PRECISION NOT NULL,
            last_polled_at DOUBLE PRECISION,
            status TEXT NOT NULL
                CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
            account TEXT,
            granted_scopes TEXT[] NOT NULL,
            grant_id TEXT REFERENCES pactmw_grants (grant_id)
        )
        """,
        """
        CREATE INDEX pactmw_device_authorizations_expires
            ON pactmw_device_authorizations (expires_at)
        """,
        """
        CREATE TABLE pactmw_refresh_tokens (
            token_hash TEXT PRIMARY KEY,
            grant_id TEXT NOT NULL REFERENCES pactmw_grants (grant_id),
            client_id TEXT NOT NULL,
            brand_id TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            used_at DOUBLE PRECISION
        )
        """,
        "CREATE INDEX pactmw_refresh_tokens_grant ON pactmw_refresh_tokens (grant_id)",
        "CREATE INDEX pactmw_refresh_tokens_expires ON pactmw_refresh_tokens (expires_at)",
        """
        CREATE TABLE pactmw_used_values (
            namespace TEXT NOT NULL,
            value TEXT NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (namespace, value)
        )
        """,
        "CREATE INDEX pactmw_used_values_expires ON pactmw_used_values (expires_at)",
    ),
    # Version 3: RFC 9396 authorization details of device authorizations and grants
    # (owner `device:<code hash>` or `grant:<grant id>`), each entry once per owner.
    (
        """
        CREATE TABLE pactmw_authorization_details (
            owner TEXT NOT NULL,
            digest TEXT NOT NULL,
            position INTEGER NOT NULL,
            entry TEXT NOT NULL,
            expires_at DOUBLE PRECISION,
            PRIMARY KEY (owner, digest)
        )
        """,
        """
        CREATE INDEX pactmw_authorization_details_expires
            ON pactmw_authorization_details (expires_at)
        """,
    ),
    # Version 4: personal agents added at runtime, on top of the configured ones. Whether
    # one may call stays in pactmw_agent_overrides, as for configured agents.
    (
        """
        CREATE TABLE pactmw_agents (
            issuer TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            jwks_uri TEXT NOT NULL,
            added_at DOUBLE PRECISION NOT NULL
        )
        """,
    ),
    # Version 5: rate-limit counters shared by every process on this store, one row per
    # counter key (a hash: no client address or user id at rest) holding its current window.
    (
        """
        CREATE TABLE pactmw_rate_counters (
            counter_key TEXT PRIMARY KEY,
            window_start DOUBLE PRECISION NOT NULL,
            window_end DOUBLE PRECISION NOT NULL,
            requests INTEGER NOT NULL
        )
        """,
        "CREATE INDEX pactmw_rate_counters_end ON pactmw_rate_counters (window_end)",
    ),
    # Version 6: Poppy Sessions (each with its one live Session Token hash) and Account
    # Tokens; store/_sql/ holds the statements, shared with the Django store.
    (*sessions.POSTGRES_MIGRATION, *account_tokens.POSTGRES_MIGRATION),
    # Version 7: when a grant was last used (the connected agents page), written at most
    # once a minute per grant.
    ("ALTER TABLE pactmw_grants ADD COLUMN last_used_at DOUBLE PRECISION",),
    # Version 8: the last answered turns of a context, straight from an index, newest first
    # (`history` reads `ORDER BY id DESC LIMIT 50`): no scan of the whole conversation and no
    # sort, so turn 1,000 costs what turn 2 does. Partial, as the query only wants answered
    # turns; unanswered claims and the other columns stay out of it.
    (
        """
        CREATE INDEX pactmw_messages_answered
            ON pactmw_messages (context_id, id) WHERE reply IS NOT NULL
        """,
    ),
    # Version 9: the sealed answer of the rotation that spent a refresh token, kept for the
    # reuse interval so a repeated refresh gets the same token pair (Rotation `repeated`).
    ("ALTER TABLE pactmw_refresh_tokens ADD COLUMN successor BYTEA",),
    # Version 10: a Poppy device authorization names no user until the poll that collects it
    # binds one, so `pa_sub` may be NULL.
    ("ALTER TABLE pactmw_device_authorizations ALTER COLUMN pa_sub DROP NOT NULL",),
    # Version 11: Poppy operations (Operations v1), store/_sql/operations.py.
    operations.POSTGRES_MIGRATION,
)

# Decisions lock the rows they read. Grant rows take NO KEY UPDATE: the key never changes,
# so foreign-key checks need not wait; `FOR UPDATE OF t` locks only the token row of the
# token-grant join. Ids compare by code point (COLLATE "C") as in the other backends.
_DIALECT = Dialect(
    placeholder="%s",
    lock=" FOR UPDATE",
    lock_no_key=" FOR NO KEY UPDATE",
    lock_refresh=" FOR UPDATE OF t",
    scopes="?::text[]",
    no_scopes="'{}'",
    nullable_text="?::text",
    collate_c=' COLLATE "C"',
    true="TRUE",
    false="FALSE",
)


def _grant_lock_key(brand_id: str, account: str, client_id: str, pa_sub: str) -> int:
    """A stable signed 32-bit key for the grant key's advisory lock (same in every process).

    Two keys sharing a number only serialize each other; the unique index stays the guard.
    """
    digest = hashlib.sha256(json.dumps([brand_id, account, client_id, pa_sub]).encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def _quiet(conn: _Connection) -> bool:
    """Whether an idle pooled connection has nothing to read, so it is still usable.

    The server says nothing to an idle session unless it ends it: a terminated session is
    readable (the FATAL message, then end of file). A poll without waiting costs no round trip.
    """
    try:
        fd = conn.fileno()
    except psycopg.Error:  # closed
        return False
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return not poller.poll(0)
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover (Windows)
    return not readable


class _Pool:
    """A few reusable connections, opened on demand, at most `max_size` at once.

    Kept tiny on purpose (no background threads, no health checks): a connection that broke
    is dropped when it comes back, and the next caller opens a fresh one.
    """

    def __init__(
        self,
        connect: Callable[[], _Connection],
        *,
        max_size: int,
        timeout: float,
        describe: str,
    ) -> None:
        self._connect = connect
        self._max_size = max_size
        self._timeout = timeout
        self._describe = describe
        self._cond = threading.Condition()
        self._idle: list[_Connection] = []
        self._size = 0
        self._closed = False

    def acquire(self) -> _Connection:
        """Take an idle connection or open one; wait up to `timeout` when all are busy."""
        deadline = time.monotonic() + self._timeout
        stale: list[_Connection] = []
        try:
            with self._cond:
                while True:
                    if self._closed:
                        raise StoreUnavailable(f"the PostgreSQL store {self._describe} is closed")
                    while self._idle:
                        conn = self._idle.pop()
                        if _quiet(conn):
                            return conn
                        # The server closed it while it sat idle (a database restart, a
                        # pg_terminate_backend): drop it rather than fail a request on it.
                        self._size -= 1
                        stale.append(conn)
                    if self._size < self._max_size:
                        self._size += 1
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise StoreUnavailable(
                            f"no free connection to PostgreSQL {self._describe} "
                            f"within {self._timeout:g} s"
                        )
                    self._cond.wait(remaining)
        finally:
            for conn in stale:
                conn.close()
        try:
            return self._connect()
        except BaseException:
            with self._cond:
                self._size -= 1
                self._cond.notify()
            raise

    def release(self, conn: _Connection) -> None:
        """Return a connection; one that is broken or mid-transaction is closed instead."""
        reusable = (
            not conn.closed
            and not conn.broken
            and conn.info.transaction_status == TransactionStatus.IDLE
        )
        with self._cond:
            keep = reusable and not self._closed
            if keep:
                self._idle.append(conn)
            else:
                self._size -= 1
            self._cond.notify()
        if not keep:
            conn.close()

    def close(self) -> None:
        """Close idle connections now, and busy ones when they come back."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._size -= len(idle)
            self._cond.notify_all()
        for conn in idle:
            conn.close()


class PostgresStore(SqlStore):
    """A Store in a PostgreSQL database; see the module docstring.

    `dsn` is a libpq URL or key/value string. Nothing connects until the first operation,
    which also creates or migrates the schema, so an app can start before its database.
    At most `max_connections` connections are open; a caller waits up to `acquire_timeout`
    seconds for one, then gets `StoreUnavailable`.
    """

    _sql = Statements(_DIALECT)
    _session_sql = SessionStatements(_DIALECT)
    _account_sql = AccountTokenStatements(_DIALECT)
    _operation_sql = OperationStatements(_DIALECT)
    _returning = True
    _locks_rows = True
    # Many processes and machines share a PostgreSQL store: count rate limits here, so N
    # workers allow a limit once (a write per limited request; see docs/deployment.md).
    shares_rate_limits = True

    def __init__(
        self,
        dsn: str,
        *,
        max_connections: int = 10,
        connect_timeout: int = 10,
        acquire_timeout: float = 30.0,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error:
            # The parser's message may quote the DSN, password included.
            raise ValueError("invalid PostgreSQL DSN") from None
        self._dsn = dsn
        self._password = str(params.get("password") or "")
        self._describe = _describe(params)
        self._connect_kwargs: dict[str, Any] = {"autocommit": False}
        if "connect_timeout" not in params:
            self._connect_kwargs["connect_timeout"] = connect_timeout
        if "application_name" not in params:
            self._connect_kwargs["application_name"] = "pactmw"
        self._pool = _Pool(
            self._open_connection,
            max_size=max_connections,
            timeout=acquire_timeout,
            describe=self._describe,
        )
        self._schema_lock = threading.Lock()
        self._schema_ready = False
        self._ops = itertools.count()  # paces the opportunistic purge; see _maybe_purge

    def _scrub(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        message = " ".join(str(exc).split())
        return StoreUnavailable(
            self._scrub(f"PostgreSQL {self._describe} is unavailable: {message}")
        )

    def _error(self, exc: BaseException) -> StoreError:
        message = " ".join(str(exc).split())
        return StoreError(self._scrub(f"PostgreSQL {self._describe}: {message}"))

    def _open_connection(self) -> _Connection:
        try:
            return psycopg.connect(self._dsn, **self._connect_kwargs)
        except psycopg.Error as exc:
            # `from None`: the driver's exception is summarised, scrubbed, in our message.
            raise self._unavailable(exc) from None

    def _migrate(self, conn: _Connection) -> None:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
            self._apply_migrations(cur, MIGRATIONS, f"PostgreSQL {self._describe}")

    @contextlib.contextmanager
    def _write(self) -> Iterator[_Cursor]:
        """Run the body in one transaction on a pooled connection; roll back if it raises."""
        conn = self._pool.acquire()
        try:
            if not self._schema_ready:
                with self._schema_lock:
                    if not self._schema_ready:
                        self._migrate(conn)
                        self._schema_ready = True
            with conn.transaction(), conn.cursor() as cur:
                yield cur
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise self._unavailable(exc) from None
        except psycopg.Error as exc:  # a constraint broken, bad data: the store's own fault
            raise self._error(exc) from None
        finally:
            self._pool.release(conn)

    # Reads run in a transaction too: one per operation, on a pooled connection.
    _read = _write

    @staticmethod
    def _encode_scopes(scopes: Sequence[str]) -> list[str]:
        return list(scopes)

    @staticmethod
    def _decode_scopes(value: Any) -> tuple[str, ...]:
        return tuple(value)

    def _lock_grant_key(
        self, ex: Executor, brand_id: str, account: str, client_id: str, pa_sub: str
    ) -> None:
        # A transaction-scoped advisory lock: the first grant of a key has no row to lock.
        ex.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)",
            (_GRANT_LOCK_CLASS, _grant_lock_key(brand_id, account, client_id, pa_sub)),
        )

    def close(self) -> None:
        """Close the pool; later calls raise `StoreUnavailable`."""
        self._pool.close()


def _describe(params: dict[str, Any]) -> str:
    """Name the server and database for messages, leaving the password out."""
    user = params.get("user") or ""
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    dbname = params.get("dbname") or user or ""
    return f"{user}@{host}:{port}/{dbname}" if user else f"{host}:{port}/{dbname}"
