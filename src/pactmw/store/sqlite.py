"""The embedded default Store: one sqlite file, safe across threads and processes.

Good for one machine running several worker processes. Every read-modify-write runs in a
`BEGIN IMMEDIATE` transaction, which takes sqlite's write lock up front, so two processes
cannot both decide they own a turn. The file lives in WAL mode so readers do not block the
writer. Do not put the file on a network filesystem: sqlite's locks are not reliable there.

A turn's two writes are one statement each (`_TURN_SCHEMA`): starting a conversation with
its first claim, and storing a reply with the conversation's touch. A statement that writes
takes the write lock before it reads, and is atomic by itself, so neither needs a
transaction of its own; the reply falls back to the locked transaction when it changes
nothing, to say why. Three statements a turn instead of nine matter because the sqlite
module releases and takes back the GIL around each one while this store's lock is held:
every extra statement is a chance for the lock holder to wait for the GIL while the
other worker threads wait for the lock (docs/performance.md).

sqlite keeps the file it opened: once the path names another file (an `rm`, a backup moved
over it), its writes would go to a file nobody opens again, and the old file's WAL, left at
the path, would be replayed onto the new file at the next open, undoing a restore. So a
write first checks that the path still names the open file (its device and inode: a hard
link is the same file), and otherwise fails with `StoreUnavailable` (logged once); the old
file's WAL is emptied into the old file then, and again on `close`, so that the file at the
path opens as it is. A `-wal` deleted under the store is refused the same way: sqlite goes
on appending to the deleted one, which a crash loses, so the check empties it into the file
first. A deleted `-shm` loses nothing (sqlite rebuilds it from the WAL) and is not checked.

Reads go on answering from the old file: it is intact and holds what this process wrote, so
a read loses nothing, and failing reads too would turn a write outage into a full one until
the restart the error asks for. sqlite's own check (`SQLITE_FCNTL_HAS_MOVED`, a `stat` too)
is not reachable from the `sqlite3` module, so the identities are taken from the paths right
after the connection opens the files.

The connection is the opening process's own. sqlite forbids using it in a forked child: its
file locks belong to the process that took them (a child writing through the parent's
connection holds none, and the parent closing its own deletes the WAL under the child), and
sqlite's record of the locks held in the process, copied into the child, goes on saying that
a lock taken at the fork is held, so even a connection the child opens itself can wait for
it for ever. So just before a fork the store waits for its operation in progress, if any,
and closes its connection; the parent and the child each open their own at their next
operation (core/_fork.py). The lock is held across the fork, so that no operation starts
meanwhile and the child's copy is not held by a thread it does not have; a moved file is
dealt with at that close as at `close`, and the next open takes the file at the path.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from pactmw.core import _fork
from pactmw.store._sql.flavours import SqliteFlavour
from pactmw.store._sql.migrations import SQLITE_MIGRATIONS
from pactmw.store.base import Conversation, StoreError, StoreUnavailable

__all__ = ["MIGRATIONS", "SqliteStore"]

logger = logging.getLogger("pactmw.store")

# The schema versions (store/_sql/migrations.py), read when the store opens: one name of
# this module, so that a test can open a store at an older version.
MIGRATIONS: tuple[tuple[str, ...], ...] = SQLITE_MIGRATIONS

# Made on each connection (TEMP: nothing is stored in the file, so no migration, and other
# connections, the Django store's included, never see them): a reply's update touches its
# conversation, and an insert into the view starts a conversation with its first claim, or
# changes nothing (RAISE(IGNORE)) when the id is taken.
_TURN_SCHEMA = (
    """
    CREATE TEMP TRIGGER pactmw_reply_touches
    AFTER UPDATE OF reply ON main.pactmw_messages WHEN NEW.reply IS NOT NULL
    BEGIN
        UPDATE pactmw_conversations SET last_activity = NEW.replied_at
        WHERE context_id = NEW.context_id;
    END
    """,
    """
    CREATE TEMP VIEW pactmw_turn_starts
        (context_id, brand_id, issuer, sub, created_at, account, message_id, text)
    AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0
    """,
    """
    CREATE TEMP TRIGGER pactmw_turn_start INSTEAD OF INSERT ON pactmw_turn_starts
    BEGIN
        SELECT RAISE(IGNORE) WHERE EXISTS
            (SELECT 1 FROM pactmw_conversations WHERE context_id = NEW.context_id);
        INSERT INTO pactmw_conversations
            (context_id, brand_id, issuer, sub, created_at, last_activity, closed, account)
        VALUES (NEW.context_id, NEW.brand_id, NEW.issuer, NEW.sub, NEW.created_at,
            NEW.created_at, 0, NEW.account);
        INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)
        VALUES (NEW.context_id, NEW.message_id, NEW.text, NEW.created_at);
    END
    """,
)
_START_TURN = (
    "INSERT INTO pactmw_turn_starts"
    " (context_id, brand_id, issuer, sub, created_at, account, message_id, text)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


# What `_file_id` answers when it cannot tell; never taken for another file.
_UNKNOWN = (-1, -1)


def _file_id(name: str) -> tuple[int, int] | None:
    """The (device, inode) of the file `name` names now; None when it names none."""
    try:
        st = os.stat(name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        # Cannot tell (a folder made unsearchable): no sign of another file, and refusing
        # writes on a guess would be an outage of its own.
        return _UNKNOWN
    return st.st_dev, st.st_ino


def _read_only(exc: sqlite3.OperationalError) -> bool:
    """Whether sqlite refused because the file may not be written (SQLITE_READONLY)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    return code & 0xFF == 8 if code is not None else "readonly" in str(exc)


class SqliteStore(SqliteFlavour):
    """A Store in one sqlite file; see the module docstring.

    The parent directory is created if missing, and the schema is created or migrated when
    the store opens. Share one instance between threads.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5000) -> None:
        self._path = Path(path)
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file holds the folder's name, no permission, read-only
            # mkdir says "File exists" when a file has the folder's name: say what is wrong.
            why = "a file has that name" if isinstance(exc, FileExistsError) else exc.strerror
            raise StoreUnavailable(
                f"cannot open sqlite database {self._path}: cannot create its folder "
                f"{self._path.parent}: {why}"
            ) from exc
        self._busy_timeout_ms = busy_timeout_ms
        # One connection behind a lock rather than one per thread: sqlite admits one writer
        # at a time anyway, and in-process writers queued on our lock wake at once, while
        # separate connections would wait in sqlite's busy handler, which sleeps in growing
        # steps. It also leaks nothing when short-lived worker threads exit. Other processes
        # are kept out by BEGIN IMMEDIATE and wait up to busy_timeout_ms.
        self._lock = threading.Lock()
        self._closed = False
        self._ops = itertools.count()  # paces the opportunistic purge; see _maybe_purge
        # Absolute, as sqlite opened it: a later chdir must not make the path name another
        # file. A symlink's target is replaced when the link is pointed elsewhere, so it is
        # followed at each check, not resolved now.
        self._file_name = os.path.abspath(self._path)
        # None when closed for a fork (see the module docstring) until the next operation.
        self._conn: sqlite3.Connection | None = None
        conn = self._connect()
        try:
            self._migrate()
            with self._read() as conn:
                self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        _fork.hold_across_fork(self)

    def _connect(self) -> sqlite3.Connection:
        """Open this process's connection, configured, its file watched (`self._conn`)."""
        try:
            conn = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
                check_same_thread=False,  # guarded by self._lock instead
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open sqlite database {self._path}: {exc}") from exc
        # sqlite opens (or creates) the file in connect(): this is the file it holds. Its WAL
        # is known once a read opened it (`_prepare`); until then only the file is checked.
        self._watched: tuple[tuple[str, tuple[int, int]], ...] = ()
        self._watch(self._file_name)
        self._moved_logged = False
        try:
            self._configure(conn)
        except sqlite3.OperationalError as exc:
            conn.close()
            raise StoreUnavailable(
                f"cannot set up sqlite database {self._path}: {self._driver_message(exc)}"
            ) from exc
        except sqlite3.Error as exc:  # e.g. the file is not a database
            conn.close()
            raise StoreError(
                f"cannot set up sqlite database {self._path}: {self._driver_message(exc)}"
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Make the connection's TEMP schema and watch its WAL, once the schema is current."""
        for statement in _TURN_SCHEMA:
            conn.execute(statement)
        # In WAL mode the WAL is open now, and stays the same file while this connection
        # is: sqlite deletes it only when the last connection closes. No -wal (a rollback
        # journal, a file nobody may write): nothing to check.
        self._watch(f"{os.path.realpath(self._path)}-wal")  # where sqlite puts it

    def _forking(self) -> None:
        """Just before a fork: wait for the operation in progress, then close the connection
        (see the module docstring); the lock is held until `_forked`."""
        self._lock.acquire()
        try:
            if self._conn is not None and not self._closed:
                self._moved()  # leaves no WAL at the path for another file, as `close` does
                self._conn.close()
        finally:
            self._conn = None  # even if closing failed: the child must never use it

    def _forked(self) -> None:
        self._lock.release()

    def _configure(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        # In WAL mode, NORMAL syncs at checkpoints instead of on every commit: a killed
        # process loses nothing (the WAL is in the OS's hands), only an OS crash or power loss
        # can roll back the last commits, and the database stays consistent either way. It
        # roughly triples message:send bookkeeping here (benchmarks/store.py); deployments
        # that need every commit on disk before the reply use PostgreSQL.
        conn.execute("PRAGMA synchronous = NORMAL")
        # WAL lets readers run while a writer commits. The mode is stored in the file, so
        # only the first opener switches; but while it does, other openers' PRAGMA fails at
        # once with "database is locked" (the busy handler is not consulted; seen with
        # several workers opening a new file together), so retry within the busy timeout.
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if _read_only(exc):
                    # A file nobody may write keeps the journal it has: its readers need
                    # none, and its writes fail anyway (StoreUnavailable).
                    return
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    def _migrate(self) -> None:
        where = f"sqlite database {self._path}"
        # Read first, write only to create or migrate: a read-only file whose schema is
        # current opens and serves reads (BEGIN IMMEDIATE alone fails on it).
        with self._read() as conn:
            if self._schema_is_current(conn, MIGRATIONS, where):
                return
        with self._write() as conn:
            self._apply_migrations(conn, MIGRATIONS, where)

    def _start_conversation(
        self, conversation: Conversation, message_id: str, text: str, derived: bool
    ) -> bool:
        c = conversation
        values = (c.context_id, c.brand_id, c.issuer, c.sub, c.created_at, c.account)
        with self._writing() as conn:
            # A view's INSTEAD OF insert counts no changes of its own (rowcount is 0); the
            # connection's total counts its trigger's, and the lock keeps other calls out.
            before = conn.total_changes
            conn.execute(_START_TURN, (*values, message_id, text))
            started = conn.total_changes != before
        if not started and not derived:
            raise StoreError(f"random conversation id {c.context_id!r} is already taken")
        return started

    def _store_reply(
        self, context_id: str, message_id: str, reply_id: str, text: str, reply: bytes, now: float
    ) -> None:
        free = (reply_id, text, reply, now, context_id, message_id, context_id, reply_id)
        with self._writing() as conn:
            if conn.execute(self._sql.store_free_reply, free).rowcount == 1:
                return  # stored, and the trigger touched the conversation
        # Nothing changed: the transaction finds out why (or stores it, if it became free).
        super()._store_reply(context_id, message_id, reply_id, text, reply, now)

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """Hold the connection for statements that need no transaction of their own."""
        with self._lock:
            if self._closed:
                raise StoreUnavailable(f"the sqlite store {self._path} is closed")
            try:
                conn = self._conn
                if conn is None:  # closed for a fork: open this process's own
                    conn = self._connect()
                    try:
                        self._prepare(conn)
                    except BaseException:
                        self._conn = None
                        conn.close()
                        raise
                yield conn
            except sqlite3.OperationalError as exc:  # locked, I/O error, disk full
                raise StoreUnavailable(
                    f"sqlite database {self._path}: {self._driver_message(exc)}"
                ) from exc
            except sqlite3.Error as exc:  # a constraint broken, a corrupt file
                raise StoreError(
                    f"sqlite database {self._path}: {self._driver_message(exc)}"
                ) from exc

    def _watch(self, name: str) -> None:
        """Check before each write that `name` still names the file it names now (if any)."""
        opened = _file_id(name)
        if opened is not None and opened != _UNKNOWN:
            self._watched = (*self._watched, (name, opened))

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """`_read`, for statements that write: refused once the file was deleted or replaced."""
        with self._read() as conn:
            moved = self._moved()
            if moved is None:
                yield conn
                return
            message = (
                f"{moved} was deleted or replaced while this process had it open, so writes "
                "would be lost: restart to open the files now at that path"
            )
            if not self._moved_logged:
                self._moved_logged = True
                logger.error("%s", message)
            raise StoreUnavailable(message)

    def _moved(self) -> str | None:
        """Which open file the paths no longer name (the database, or its WAL), or None;
        when one is named, the WAL is emptied into the database file sqlite has open.

        Called with the lock held, before each write: two `stat`s, a few µs against a turn's
        writes (benchmarks/sqlite_moved.py). A replaced database: the WAL stays at the path,
        and sqlite does not checkpoint a moved file when it closes, so the next opener would
        replay this file's pages onto the new one; checkpointing them into the old file and
        truncating the WAL leaves nothing to replay. A deleted WAL: sqlite goes on appending
        to it, where a crash loses every write since the last checkpoint; checkpointing puts
        them in the database file. Best effort: a checkpoint that cannot finish now (another
        process reading) is tried again on the next write and on close.
        """
        for name, opened in self._watched:
            now = _file_id(name)
            if now != opened and now != _UNKNOWN:
                break
        else:
            return None
        if name == self._file_name:
            moved = f"sqlite database {self._path}"
        else:
            moved = f"the write-ahead log {name} of sqlite database {self._path}"
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return moved

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """Run the body in a BEGIN IMMEDIATE transaction; roll back if it raises."""
        with self._writing() as conn:
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

    def close(self) -> None:
        """Close the connection; later calls raise `StoreUnavailable`."""
        with self._lock:
            if not self._closed and self._conn is not None:
                try:
                    self._moved()  # leaves no WAL at the path for another file
                finally:
                    self._conn.close()
            self._closed = True
