"""The PostgreSQL Store: shared state for Providers running on many machines.

Needs the `postgres` extra (psycopg 3). Each turn decision runs in one transaction that
locks the conversation row (`SELECT ... FOR UPDATE`), so concurrent duplicates anywhere
serialize on that row and exactly one of them owns the turn; unique constraints back the
invariants up. The delegation operations work the same way: each locks the row it decides
on (device code, refresh token, grant) or is one conditional statement, and upserts of a
grant key also take a per-key advisory lock, since the first grant has no row yet to lock.
Connection problems, lock waits past the lock timeout, a server that does not answer
within the operation timeout and a read-only database surface as `StoreUnavailable`, other
database errors as `StoreError`; neither message contains the DSN's password.

Connections are the opening process's own: a forked child (`gunicorn --preload`) starts
with an empty pool and fresh locks, and leaves the parent's connections to the parent
(core/_fork.py). psycopg does not close a connection that another process opened when it
is garbage-collected, so forgetting them is enough.
"""

from __future__ import annotations

import contextlib
import itertools
import select
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from pactmw.core import _fork
from pactmw.store._sql.flavours import PostgresFlavour
from pactmw.store._sql.migrations import POSTGRES_MIGRATIONS
from pactmw.store._watchdog import Watch, Watchdog
from pactmw.store.base import StoreError, StoreUnavailable

__all__ = ["MIGRATIONS", "PostgresStore"]

_Connection = psycopg.Connection[TupleRow]
_Cursor = psycopg.Cursor[TupleRow]

# A fixed key for pg_advisory_xact_lock so that processes starting together migrate one at
# a time (CREATE TABLE IF NOT EXISTS alone races on the catalog). The digits spell "pactmw".
_MIGRATION_LOCK_KEY = 0x70_61_63_74_6D_77

# The schema versions (store/_sql/migrations.py), read when the store opens: one name of
# this module, so that a test can open a store at an older version.
MIGRATIONS: tuple[tuple[str, ...], ...] = POSTGRES_MIGRATIONS


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
        # Held only to move a connection or a count: never across a system call (the poll
        # of `_quiet`, a connect, a close), which releases the GIL while every other worker
        # thread queues on this lock (py-spy: 10% of their time at 16 connections).
        self._cond = threading.Condition(threading.Lock())
        self._idle: list[_Connection] = []
        self._size = 0
        self._waiting = 0  # callers in `wait`: a release notifies only when someone waits
        self._closed = False
        _fork.reset_in_child(self)

    def _reset_in_child(self) -> None:
        """In a forked child: the idle connections and those in use are the parent's (a
        busy one belongs to a thread the child does not have), and so may be the lock."""
        self._cond = threading.Condition(threading.Lock())
        self._idle = []
        self._size = 0
        self._waiting = 0

    def acquire(self) -> _Connection:
        """Take an idle connection or open one; wait up to `timeout` when all are busy."""
        deadline = time.monotonic() + self._timeout
        while (conn := self._take(deadline)) is not None:
            if _quiet(conn):
                return conn
            # The server closed it while it sat idle (a database restart, a
            # pg_terminate_backend): drop it rather than fail a request on it.
            self._forget()
            conn.close()
        try:
            return self._connect()
        except BaseException:
            self._forget()
            raise

    def _take(self, deadline: float) -> _Connection | None:
        """An idle connection, or None when a slot for a new one was reserved."""
        with self._cond:
            while True:
                if self._closed:
                    raise StoreUnavailable(f"the PostgreSQL store {self._describe} is closed")
                if self._idle:
                    return self._idle.pop()
                if self._size < self._max_size:
                    self._size += 1
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise StoreUnavailable(
                        f"no free connection to PostgreSQL {self._describe} "
                        f"within {self._timeout:g} s"
                    )
                self._waiting += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._waiting -= 1

    def _forget(self) -> None:
        """Free the slot of a connection that is gone (or was never opened)."""
        with self._cond:
            self._size -= 1
            if self._waiting:
                self._cond.notify()

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
            if self._waiting:
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


class PostgresStore(PostgresFlavour):
    """A Store in a PostgreSQL database; see the module docstring.

    `dsn` is a libpq URL or key/value string. Nothing connects until the first operation,
    which also creates or migrates the schema, so an app can start before its database.
    At most `max_connections` connections are open; a caller waits up to `acquire_timeout`
    seconds for one, then gets `StoreUnavailable`. A statement waits up to `lock_timeout`
    seconds for a lock another session holds, then fails with `StoreUnavailable`, unless
    the DSN (`options=-c lock_timeout=...`), the role or the database sets its own. One
    operation (its transaction, all its statements) waits up to `operation_timeout` seconds
    for the server's answers, then its connection is closed and it fails with
    `StoreUnavailable`: a server that stopped answering (a frozen machine, a network that
    drops packets) would otherwise hold the calling thread for ever. Keep it above the
    lock waits an operation may make. Two jobs that may rightly run long are not bounded
    by it: migrating the schema when the store opens, and `cleanup`.
    """

    def __init__(
        self,
        dsn: str,
        *,
        max_connections: int = 10,
        connect_timeout: int = 10,
        acquire_timeout: float = 30.0,
        lock_timeout: float = 5.0,
        operation_timeout: float = 20.0,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if not lock_timeout > 0:
            raise ValueError("lock_timeout must be a positive number of seconds")
        if not operation_timeout > 0:
            raise ValueError("operation_timeout must be a positive number of seconds")
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error:
            # The parser's message may quote the DSN, password included.
            raise ValueError("invalid PostgreSQL DSN") from None
        self._dsn = dsn
        self._password = str(params.get("password") or "")
        self._describe = _describe(params)
        # Autocommit: a read, or a write that is one statement, is one round trip instead of
        # three (BEGIN, the statement, COMMIT); `_write` opens its transaction explicitly.
        self._connect_kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            self._connect_kwargs["connect_timeout"] = connect_timeout
        if "application_name" not in params:
            self._connect_kwargs["application_name"] = "pactmw"
        self._lock_timeout = f"{max(1, round(lock_timeout * 1000))}ms"
        # Client-side, since the server's own timeouts need a server that runs: see
        # store/_watchdog.py for why the connection's socket is shut down past it.
        self._watchdog = Watchdog(operation_timeout)
        self._pool = _Pool(
            self._open_connection,
            max_size=max_connections,
            timeout=acquire_timeout,
            describe=self._describe,
        )
        self._schema_lock = threading.Lock()
        self._schema_ready = False
        self._ops = itertools.count()  # paces the opportunistic purge; see _maybe_purge
        # In a forked child: a thread migrating at the fork held this lock, and is gone.
        _fork.fresh_lock_in_child(self, "_schema_lock")

    def _scrub(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        message = self._driver_message(exc)
        return StoreUnavailable(
            self._scrub(f"PostgreSQL {self._describe} is unavailable: {message}")
        )

    def _no_answer(self) -> StoreUnavailable:
        return StoreUnavailable(
            f"PostgreSQL {self._describe} is unavailable: no answer within "
            f"{self._watchdog.timeout:g} s (operation_timeout), so the connection was closed"
        )

    def _error(self, exc: BaseException) -> StoreError:
        message = self._driver_message(exc)
        return StoreError(self._scrub(f"PostgreSQL {self._describe}: {message}"))

    def _open_connection(self) -> _Connection:
        try:
            conn = psycopg.connect(self._dsn, **self._connect_kwargs)
        except psycopg.Error as exc:
            # `from None`: the driver's exception is summarised, scrubbed, in our message.
            raise self._unavailable(exc) from None
        watch = self._watchdog.watch(conn)
        try:
            # PostgreSQL waits for a lock forever by default: another session holding a
            # table or a row (a migration, an operator's LOCK, a stuck transaction) would
            # hang every request. Bound the wait as sqlite's busy timeout does, unless the
            # DSN's options, the role or the database already set a lock_timeout.
            with watch:
                conn.execute(
                    "SELECT set_config('lock_timeout', %s, false)"
                    " WHERE current_setting('lock_timeout') = '0'",
                    (self._lock_timeout,),
                )
        except psycopg.Error as exc:
            conn.close()
            raise (self._no_answer() if watch.fired else self._unavailable(exc)) from None
        return conn

    def _migrate(self, conn: _Connection, watch: Watch) -> None:
        where = f"PostgreSQL {self._describe}"
        # Read first, write only to create or migrate: a hot standby, a read-only database
        # or a role with only SELECT whose schema is current opens and serves reads.
        with watch, conn.cursor() as cur:
            if self._schema_is_current(cur, MIGRATIONS, where):
                return
        # Unbounded: a migration may rightly take long on a big table (an index to build);
        # lock_timeout still bounds its waits for locks, the advisory one included.
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
            self._apply_migrations(cur, MIGRATIONS, where)

    @contextlib.contextmanager
    def _connection(self, *, bounded: bool = True) -> Iterator[_Connection]:
        """A pooled connection, the schema migrated, driver errors translated; the body
        under the operation timeout unless not `bounded`."""
        conn = self._pool.acquire()
        # Armed after the acquire: a wait for a free connection has its own bound.
        watch = self._watchdog.watch(conn)
        try:
            if not self._schema_ready:
                # Outside the deadline: waiting here is waiting for another thread's
                # migration, which may rightly take long.
                with self._schema_lock:
                    if not self._schema_ready:
                        self._migrate(conn, watch)
                        self._schema_ready = True
            with watch if bounded else contextlib.nullcontext():
                yield conn
        except psycopg.Error as exc:
            if watch.fired:  # whatever the driver made of the socket cut under it
                raise self._no_answer() from None
            if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
                raise self._unavailable(exc) from None
            # A constraint broken, bad data: the store's own fault, unless the database
            # refuses for now.
            if self._refuses_for_now(exc):
                raise self._unavailable(exc) from None
            raise self._error(exc) from None
        finally:
            if watch.fired:
                # Cut after its last answer came: the body succeeded, but the connection
                # must not go back to the pool with its socket shut down.
                conn.close()
            self._pool.release(conn)

    @contextlib.contextmanager
    def _write(self) -> Iterator[_Cursor]:
        """Run the body in one transaction on a pooled connection; roll back if it raises."""
        with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    @contextlib.contextmanager
    def _long_write(self) -> Iterator[_Cursor]:
        """`_write` without the operation timeout (see `SqlCore._long_write`)."""
        with self._connection(bounded=False) as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    @contextlib.contextmanager
    def _read(self) -> Iterator[_Cursor]:
        """Run the body's statements each in a transaction of its own (autocommit).

        At READ COMMITTED, where the store runs, each statement of a transaction takes its
        own snapshot anyway: a transaction around reads only cost two more round trips.
        """
        with self._connection() as conn, conn.cursor() as cur:
            yield cur

    # One statement is atomic by itself: no BEGIN and COMMIT around it.
    _one_statement = _read

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
