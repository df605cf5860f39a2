"""What every SQL store operation stands on: the dialect hooks, row mappers and the purge.

A backend (sqlite.py, postgres.py) subclasses `SqlStore` and supplies only the hooks below:
how to open a read or a write transaction (taking the locks and translating driver errors to
`StoreError`s), its `Statements`, how a scope list is stored, and the few capabilities that
change which statements an operation runs.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol, TypeVar

from pactmw.store._sql.rows import CONVERSATION_ROW, DEVICE_ROW, GRANT_ROW
from pactmw.store._sql.rows import opt_bytes as opt_bytes
from pactmw.store._sql.rows import opt_float as opt_float
from pactmw.store._sql.statements import Statements
from pactmw.store.base import (
    EXPIRED_RETENTION,
    MAX_REFRESH_REUSE_INTERVAL,
    PURGE_EVERY,
    Conversation,
    DeviceAuthorization,
    Grant,
    StoreError,
)

__all__ = ["Executor", "Rows", "SqlCore", "conversation_from_row"]

_Read = TypeVar("_Read")


class Rows(Protocol):
    """The result of one statement (a DB-API cursor)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Executor(Protocol):
    """Runs statements inside the current transaction (a sqlite connection, a psycopg cursor)."""

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> Rows: ...


def conversation_from_row(row: Sequence[Any]) -> Conversation:
    return CONVERSATION_ROW.read(row)


class SqlCore(abc.ABC):
    """The dialect hooks and shared helpers of the SQL stores' operation mixins."""

    # The dialect's statements, built once per backend class.
    _sql: ClassVar[Statements]
    # Whether the dialect runs UPDATE ... RETURNING: then a conditional update answers in
    # one statement; without it the operation reads, then writes, under its write lock.
    _returning: ClassVar[bool]
    # Whether transactions lock the rows they decide on (PostgreSQL). Without row locks
    # (sqlite) every write transaction holds the database's one write lock instead.
    _locks_rows: ClassVar[bool]

    _ops: itertools.count[int]  # paces the opportunistic purge; see _maybe_purge
    # A query whose one row and column says whether the pactmw_schema table exists, asked
    # before anything is written so that opening a read-only database writes nothing.
    _schema_table_exists: ClassVar[str]

    @abc.abstractmethod
    def _read(self) -> AbstractContextManager[Executor]:
        """Run the body's reads; raise `StoreUnavailable` when the store is closed or down."""

    @abc.abstractmethod
    def _write(self) -> AbstractContextManager[Executor]:
        """Run the body in one write transaction; roll back if it raises."""

    def _long_write(self) -> AbstractContextManager[Executor]:
        """Run the body in one write transaction that may rightly run long (the operator's
        cleanup of a big database): a backend that bounds how long one operation waits for
        its database (PostgreSQL's operation timeout) lifts the bound. Lock waits stay bounded.
        """
        return self._write()

    def _one_statement(self) -> AbstractContextManager[Executor]:
        """Run one write statement that is atomic by itself (a data-modifying `WITH`).

        A write transaction unless the backend commits single statements on their own
        (PostgreSQL's autocommit: one round trip instead of three).
        """
        return self._write()

    @staticmethod
    @abc.abstractmethod
    def _encode_scopes(scopes: Sequence[str]) -> object:
        """A scope list as the dialect's scope parameter takes it."""

    @staticmethod
    @abc.abstractmethod
    def _decode_scopes(value: Any) -> tuple[str, ...]:
        """A scope list as a scope column reads."""

    def _lock_grant_key(  # noqa: B027 (a hook that may rightly do nothing)
        self, ex: Executor, brand_id: str, account: str, client_id: str, pa_sub: str
    ) -> None:
        """Serialize upserts of one grant key even while it has no row to lock.

        Nothing to do where the write transaction holds the whole database.
        """

    @staticmethod
    def _refuses_for_now(exc: BaseException) -> bool:
        """Whether a driver error that is no connection problem still says the database
        cannot serve for now (then `StoreUnavailable`, not `StoreError`). None by default."""
        return False

    @staticmethod
    def _driver_message(exc: BaseException) -> str:
        """What a driver error says, as one line for a store's message; the flavours name a
        lock wait that timed out and leave the statement's text out."""
        return " ".join(str(exc).split())

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; later calls raise `StoreUnavailable`. Idempotent."""

    # --- shared helpers ----------------------------------------------------------------------

    def _read_one(
        self, statement: str, params: Sequence[Any], read: Callable[[Sequence[Any]], _Read]
    ) -> _Read | None:
        """The one row `statement` selects, as `read` makes it, or None when it selects none
        (a lookup by key, in a read transaction of its own)."""
        with self._read() as ex:
            row = ex.execute(statement, params).fetchone()
        return None if row is None else read(row)

    def _schema_version(self, ex: Executor) -> int | None:
        """The schema version the database records, None when it has no schema yet.

        Reads only: a read-only database (a hot standby, a role with only SELECT, a
        read-only sqlite file) answers it.
        """
        if not ex.execute(self._schema_table_exists).fetchone()[0]:
            return None
        row = ex.execute("SELECT version FROM pactmw_schema").fetchone()
        return None if row is None else int(row[0])

    def _schema_is_current(
        self, ex: Executor, migrations: Sequence[Sequence[str]], where: str
    ) -> bool:
        """Whether the schema is at `len(migrations)` already, so opening writes nothing.

        A database whose version is newer than this pactmw knows is refused (`StoreError`,
        naming `where`).
        """
        return self._checked(self._schema_version(ex), migrations, where) == len(migrations)

    @staticmethod
    def _checked(version: int | None, migrations: Sequence[Sequence[str]], where: str) -> int:
        if version is not None and version > len(migrations):
            raise StoreError(
                f"{where} has schema version {version}, newer than "
                f"this pactmw supports ({len(migrations)}); upgrade pactmw"
            )
        return version or 0

    def _apply_migrations(
        self, ex: Executor, migrations: Sequence[Sequence[str]], where: str
    ) -> None:
        """Bring the schema to `len(migrations)`, inside the caller's (locked) transaction.

        `migrations[n]` holds the statements that take version n to n+1. A database whose
        version is newer than this pactmw knows is refused (`StoreError`, naming `where`).
        Writes nothing when another opener migrated it meanwhile.
        """
        version = self._schema_version(ex)
        if version is None:
            ex.execute("CREATE TABLE IF NOT EXISTS pactmw_schema (version INTEGER NOT NULL)")
            if ex.execute("SELECT version FROM pactmw_schema").fetchone() is None:
                ex.execute("INSERT INTO pactmw_schema (version) VALUES (0)")
        current = self._checked(version, migrations, where)
        if current == len(migrations):
            return
        for step in migrations[current:]:
            for statement in step:
                ex.execute(statement)
        ex.execute(self._sql.set_schema_version, (len(migrations),))

    def _maybe_purge(self, ex: Executor, now: float) -> None:
        # Inside the caller's write transaction. Only every PURGE_EVERY-th call deletes, so
        # the cost is spread thin; the expires_at indexes keep each delete a range scan.
        if next(self._ops) % PURGE_EVERY:
            return
        horizon = now - EXPIRED_RETENTION
        ex.execute(self._sql.purge_used_values, (now,))
        ex.execute(self._sql.purge_devices, (horizon,))
        ex.execute(self._sql.purge_refresh_tokens, (horizon,))
        ex.execute(self._sql.purge_successors, (now - MAX_REFRESH_REUSE_INTERVAL,))

    def _device(self, row: Sequence[Any]) -> DeviceAuthorization:
        return DEVICE_ROW.read(row, self._decode_scopes)

    def _grant(self, row: Sequence[Any]) -> Grant:
        return GRANT_ROW.read(row, self._decode_scopes)
