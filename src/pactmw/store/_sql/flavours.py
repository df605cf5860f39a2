"""The two database engines the SQL backends run on, each written once.

`SqliteFlavour` is what `SqliteStore` and the Django store on sqlite share, `PostgresFlavour`
what `PostgresStore` and the Django store on PostgreSQL share: the dialect, the capabilities
that choose statements, how scope lists are stored, and how upserts of one grant key are
serialized. A backend class extends its flavour with only its connection handling (and the
placeholder its driver wants); its statements are built when the class is made (see
`SqlStore.__init_subclass__`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from pactmw.store._sql import Executor, SqlStore
from pactmw.store._sql.dialect import Dialect

__all__ = ["POSTGRES_DIALECT", "SQLITE_DIALECT", "PostgresFlavour", "SqliteFlavour"]

# No row locks: every write transaction holds the database's write lock (BEGIN IMMEDIATE).
# Scope lists are JSON arrays of strings in TEXT columns.
SQLITE_DIALECT = Dialect(
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

# Decisions lock the rows they read. Grant rows take NO KEY UPDATE: the key never changes,
# so foreign-key checks need not wait; `FOR UPDATE OF t` locks only the token row of the
# token-grant join. Ids compare by code point (COLLATE "C") as in the other backends.
POSTGRES_DIALECT = Dialect(
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

# The SQLSTATEs of a database that refuses for now what it will do again later, which psycopg
# does not class as OperationalError: 25006, read_only_sql_transaction (a hot standby after
# a failover, a database an operator set read-only; a read-only sqlite file is an
# OperationalError, hence unavailable, too).
_REFUSED_FOR_NOW = frozenset({"25006"})

# A lock wait that ended in the driver's timeout (sqlite's busy timeout, PostgreSQL's
# lock_timeout), said the same way by every store: the driver's own text says it in its words
# (PostgreSQL's over several lines, with the statement), which an operator should not have to
# decode from a log.
_LOCK_WAIT = "a lock wait timed out ({holder}); try again later"

# The SQLSTATE of a lock wait past lock_timeout (lock_not_available).
_LOCK_NOT_AVAILABLE = "55P03"

# The first half of the two-int4 advisory lock taken per grant key by upsert_grant ("pacg").
# PostgreSQL keeps two-int4 keys apart from bigint keys (the migration lock's).
_GRANT_LOCK_CLASS = 0x70_61_63_67


class SqliteFlavour(SqlStore):
    """sqlite: no row locks (each write transaction holds the one write lock), no
    `UPDATE ... RETURNING` (sqlite 3.35 added it; older distributions lack it), scope lists
    as JSON text."""

    _dialect = SQLITE_DIALECT
    _returning = False
    _locks_rows = False
    # Counted per process unless asked (rate_limit.shared): every count would take the
    # database's one write lock, and an embedded database usually serves one process.
    shares_rate_limits = False
    _schema_table_exists = (
        "SELECT EXISTS (SELECT 1 FROM sqlite_master"
        " WHERE type = 'table' AND name = 'pactmw_schema')"
    )

    @staticmethod
    def _driver_message(exc: BaseException) -> str:
        # The primary code: an extended one (SQLITE_BUSY_SNAPSHOT...) is a busy database too.
        for error in _driver_errors(exc):
            code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
            if isinstance(error, sqlite3.OperationalError) and (
                (code is not None and code & 0xFF == 5)  # SQLITE_BUSY
                or (code is None and str(error) == "database is locked")
            ):
                return _LOCK_WAIT.format(holder="another connection holds the write lock")
        return SqlStore._driver_message(exc)

    @staticmethod
    def _encode_scopes(scopes: Sequence[str]) -> str:
        return json.dumps(list(scopes), ensure_ascii=False)

    @staticmethod
    def _decode_scopes(value: Any) -> tuple[str, ...]:
        return tuple(json.loads(value))


class PostgresFlavour(SqlStore):
    """PostgreSQL: row locks, `RETURNING`, `TEXT[]` scope lists, and an advisory lock per
    grant key (the first grant of a key has no row to lock)."""

    _dialect = POSTGRES_DIALECT
    _returning = True
    _locks_rows = True
    # Many processes and machines share a PostgreSQL database: count rate limits in it, so
    # N workers allow a limit once (a write per limited request; see docs/deployment.md).
    shares_rate_limits = True
    # Where CREATE TABLE IF NOT EXISTS looks: the first schema of the search path.
    _schema_table_exists = (
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables"
        " WHERE schemaname = current_schema() AND tablename = 'pactmw_schema')"
    )

    @staticmethod
    def _refuses_for_now(exc: BaseException) -> bool:
        return any(
            getattr(error, "sqlstate", None) in _REFUSED_FOR_NOW for error in _driver_errors(exc)
        )

    @staticmethod
    def _driver_message(exc: BaseException) -> str:
        # The server's primary message only: str() adds the statement's text (LINE 1: ...)
        # and its DETAIL and HINT.
        for error in _driver_errors(exc):
            sqlstate = getattr(error, "sqlstate", None)
            if sqlstate == _LOCK_NOT_AVAILABLE:
                return _LOCK_WAIT.format(holder="another session holds a lock the store needs")
            primary = getattr(getattr(error, "diag", None), "message_primary", None)
            if sqlstate and isinstance(primary, str) and primary:
                return " ".join(primary.split())
        return SqlStore._driver_message(exc)

    @staticmethod
    def _encode_scopes(scopes: Sequence[str]) -> list[str]:
        return list(scopes)

    @staticmethod
    def _decode_scopes(value: Any) -> tuple[str, ...]:
        return tuple(value)

    def _lock_grant_key(
        self, ex: Executor, brand_id: str, account: str, client_id: str, pa_sub: str
    ) -> None:
        # A transaction-scoped advisory lock, the same number in every process (and in both
        # backends, so they may share one database).
        ex.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)",
            (_GRANT_LOCK_CLASS, _grant_lock_key(brand_id, account, client_id, pa_sub)),
        )


def _driver_errors(exc: BaseException) -> tuple[BaseException | None, ...]:
    """Where a driver's error (sqlite3's, psycopg's) may be: `exc` itself, or the error a
    Django database error wraps (its cause)."""
    return (exc, exc.__cause__)


def _grant_lock_key(brand_id: str, account: str, client_id: str, pa_sub: str) -> int:
    """A stable signed 32-bit key for the grant key's advisory lock (same in every process).

    Two keys sharing a number only serialize each other; the unique index stays the guard.
    """
    digest = hashlib.sha256(json.dumps([brand_id, account, client_id, pa_sub]).encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)
