"""The embedded default Store: one sqlite file, safe across threads and processes.

Good for one machine running several worker processes. Every read-modify-write runs in a
`BEGIN IMMEDIATE` transaction, which takes sqlite's write lock up front, so two processes
cannot both decide they own a turn. The file lives in WAL mode so readers do not block the
writer. Do not put the file on a network filesystem: sqlite's locks are not reliable there.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pactmw.store._sql import (
    AccountTokenStatements,
    Dialect,
    OperationStatements,
    SessionStatements,
    SqlStore,
    Statements,
    account_tokens,
    operations,
    sessions,
)
from pactmw.store.base import StoreError, StoreUnavailable

__all__ = ["MIGRATIONS", "SqliteStore"]

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
            created_at REAL NOT NULL,
            last_activity REAL NOT NULL,
            closed INTEGER NOT NULL DEFAULT 0,
            account TEXT
        )
        """,
        # One row per user message; the reply columns stay NULL while the turn is claimed.
        # The two unique constraints are the idempotency invariants (NULLs never collide).
        """
        CREATE TABLE pactmw_messages (
            id INTEGER PRIMARY KEY,
            context_id TEXT NOT NULL
                REFERENCES pactmw_conversations (context_id) ON DELETE CASCADE,
            message_id TEXT NOT NULL,
            text TEXT NOT NULL,
            claimed_at REAL NOT NULL,
            reply_message_id TEXT,
            reply_text TEXT,
            reply BLOB,
            replied_at REAL,
            UNIQUE (context_id, message_id),
            UNIQUE (context_id, reply_message_id)
        )
        """,
        """
        CREATE TABLE pactmw_agent_overrides (
            issuer TEXT PRIMARY KEY,
            enabled INTEGER NOT NULL
        )
        """,
    ),
    # Version 2: the PACT Delegated profile. Scope lists are JSON arrays of strings.
    (
        """
        CREATE TABLE pactmw_grants (
            grant_id TEXT PRIMARY KEY,
            brand_id TEXT NOT NULL,
            account TEXT NOT NULL,
            client_id TEXT NOT NULL,
            pa_sub TEXT NOT NULL,
            scopes TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            revoked_at REAL
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
            user_code TEXT NOT NULL UNIQUE,
            brand_id TEXT NOT NULL,
            client_id TEXT NOT NULL,
            pa_sub TEXT NOT NULL,
            scopes TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            interval_seconds REAL NOT NULL,
            last_polled_at REAL,
            status TEXT NOT NULL
                CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
            account TEXT,
            granted_scopes TEXT NOT NULL,
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
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            used_at REAL
        )
        """,
        "CREATE INDEX pactmw_refresh_tokens_grant ON pactmw_refresh_tokens (grant_id)",
        "CREATE INDEX pactmw_refresh_tokens_expires ON pactmw_refresh_tokens (expires_at)",
        """
        CREATE TABLE pactmw_used_values (
            namespace TEXT NOT NULL,
            value TEXT NOT NULL,
            expires_at REAL NOT NULL,
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
            expires_at REAL,
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
            added_at REAL NOT NULL
        )
        """,
    ),
    # Version 5: rate-limit counters shared by every process on this store, one row per
    # counter key (a hash: no client address or user id at rest) holding its current window.
    (
        """
        CREATE TABLE pactmw_rate_counters (
            counter_key TEXT PRIMARY KEY,
            window_start REAL NOT NULL,
            window_end REAL NOT NULL,
            requests INTEGER NOT NULL
        )
        """,
        "CREATE INDEX pactmw_rate_counters_end ON pactmw_rate_counters (window_end)",
    ),
    # Version 6: Poppy Sessions (each with its one live Session Token hash) and Account
    # Tokens; store/_sql/ holds the statements, shared with the Django store.
    (*sessions.SQLITE_MIGRATION, *account_tokens.SQLITE_MIGRATION),
    # Version 7: when a grant was last used (the connected agents page), written at most
    # once a minute per grant.
    ("ALTER TABLE pactmw_grants ADD COLUMN last_used_at REAL",),
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
    ("ALTER TABLE pactmw_refresh_tokens ADD COLUMN successor BLOB",),
    # Version 10: a Poppy device authorization names no user until the poll that collects it
    # binds one, so `pa_sub` may be NULL. sqlite cannot drop NOT NULL in place: the table is
    # rebuilt (nothing references it) with the same columns, keys and index.
    (
        """
        CREATE TABLE pactmw_device_authorizations_10 (
            device_code_hash TEXT PRIMARY KEY,
            user_code TEXT NOT NULL UNIQUE,
            brand_id TEXT NOT NULL,
            client_id TEXT NOT NULL,
            pa_sub TEXT,
            scopes TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            interval_seconds REAL NOT NULL,
            last_polled_at REAL,
            status TEXT NOT NULL
                CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
            account TEXT,
            granted_scopes TEXT NOT NULL,
            grant_id TEXT REFERENCES pactmw_grants (grant_id)
        )
        """,
        """
        INSERT INTO pactmw_device_authorizations_10 (device_code_hash, user_code, brand_id,
            client_id, pa_sub, scopes, created_at, expires_at, interval_seconds,
            last_polled_at, status, account, granted_scopes, grant_id)
        SELECT device_code_hash, user_code, brand_id, client_id, pa_sub, scopes, created_at,
            expires_at, interval_seconds, last_polled_at, status, account, granted_scopes,
            grant_id
        FROM pactmw_device_authorizations
        """,
        "DROP TABLE pactmw_device_authorizations",
        "ALTER TABLE pactmw_device_authorizations_10 RENAME TO pactmw_device_authorizations",
        """
        CREATE INDEX pactmw_device_authorizations_expires
            ON pactmw_device_authorizations (expires_at)
        """,
    ),
    # Version 11: Poppy operations (Operations v1), store/_sql/operations.py.
    operations.SQLITE_MIGRATION,
)


# No row locks: every write transaction holds the database's write lock (BEGIN IMMEDIATE).
# Scope lists are JSON arrays of strings in TEXT columns.
_DIALECT = Dialect(
    placeholder="?",
    lock="",
    lock_no_key="",
    lock_refresh="",
    scopes="?",
    no_scopes="'[]'",
    nullable_text="?",
    collate_c="",  # sqlite's default BINARY collation compares by code point already
    true="1",
    false="0",
)


class SqliteStore(SqlStore):
    """A Store in one sqlite file; see the module docstring.

    The parent directory is created if missing, and the schema is created or migrated when
    the store opens. Share one instance between threads.
    """

    _sql = Statements(_DIALECT)
    _session_sql = SessionStatements(_DIALECT)
    _account_sql = AccountTokenStatements(_DIALECT)
    _operation_sql = OperationStatements(_DIALECT)
    # UPDATE ... RETURNING needs sqlite 3.35 (older distributions lack it): read, then write.
    _returning = False
    _locks_rows = False
    # Counted per process unless asked (rate_limit.shared): every count would take the
    # database's one write lock, and an embedded store usually serves one process.
    shares_rate_limits = False

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5000) -> None:
        self._path = Path(path)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_ms = busy_timeout_ms
        # One connection behind a lock rather than one per thread: sqlite admits one writer
        # at a time anyway, and in-process writers queued on our lock wake at once, while
        # separate connections would wait in sqlite's busy handler, which sleeps in growing
        # steps. It also leaks nothing when short-lived worker threads exit. Other processes
        # are kept out by BEGIN IMMEDIATE and wait up to busy_timeout_ms.
        self._lock = threading.Lock()
        self._closed = False
        self._ops = itertools.count()  # paces the opportunistic purge; see _maybe_purge
        try:
            self._conn = sqlite3.connect(
                self._path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
                check_same_thread=False,  # guarded by self._lock instead
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open sqlite database {self._path}: {exc}") from exc
        try:
            try:
                self._configure()
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(
                    f"cannot set up sqlite database {self._path}: {exc}"
                ) from exc
            except sqlite3.Error as exc:  # e.g. the file is not a database
                raise StoreError(f"cannot set up sqlite database {self._path}: {exc}") from exc
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def _configure(self) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        # In WAL mode, NORMAL syncs at checkpoints instead of on every commit: a killed
        # process loses nothing (the WAL is in the OS's hands), only an OS crash or power loss
        # can roll back the last commits, and the database stays consistent either way. It
        # roughly triples message:send bookkeeping here (benchmarks/store.py); deployments
        # that need every commit on disk before the reply use PostgreSQL.
        self._conn.execute("PRAGMA synchronous = NORMAL")
        # WAL lets readers run while a writer commits. The mode is stored in the file, so
        # only the first opener switches; but while it does, other openers' PRAGMA fails at
        # once with "database is locked" (the busy handler is not consulted; seen with
        # several workers opening a new file together), so retry within the busy timeout.
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    def _migrate(self) -> None:
        with self._write() as conn:
            self._apply_migrations(conn, MIGRATIONS, f"sqlite database {self._path}")

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """Hold the connection for statements that need no transaction of their own."""
        with self._lock:
            if self._closed:
                raise StoreUnavailable(f"the sqlite store {self._path} is closed")
            try:
                yield self._conn
            except sqlite3.OperationalError as exc:  # locked, I/O error, disk full
                raise StoreUnavailable(f"sqlite database {self._path}: {exc}") from exc
            except sqlite3.Error as exc:  # a constraint broken, a corrupt file
                raise StoreError(f"sqlite database {self._path}: {exc}") from exc

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """Run the body in a BEGIN IMMEDIATE transaction; roll back if it raises."""
        with self._read() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _encode_scopes(scopes: Sequence[str]) -> str:
        return json.dumps(list(scopes), ensure_ascii=False)

    @staticmethod
    def _decode_scopes(value: Any) -> tuple[str, ...]:
        return tuple(json.loads(value))

    def close(self) -> None:
        """Close the connection; later calls raise `StoreUnavailable`."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
