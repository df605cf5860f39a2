"""The embedded default Store: one sqlite file, safe across threads and processes.

Good for one machine running several worker processes. Every read-modify-write runs in a
`BEGIN IMMEDIATE` transaction, which takes sqlite's write lock up front, so two processes
cannot both decide they own a turn. The file lives in WAL mode so readers do not block the
writer. Do not put the file on a network filesystem: sqlite's locks are not reliable there.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from pactmw.store.base import (
    Claim,
    Conversation,
    NotFound,
    StoreError,
    StoreUnavailable,
    Turn,
    reject_nul,
)

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
)


class SqliteStore:
    """A Store in one sqlite file; see the module docstring.

    The parent directory is created if missing, and the schema is created or migrated when
    the store opens. Share one instance between threads.
    """

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
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def _configure(self) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        self._conn.execute("PRAGMA foreign_keys = ON")
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
            conn.execute("CREATE TABLE IF NOT EXISTS pactmw_schema (version INTEGER NOT NULL)")
            row = conn.execute("SELECT version FROM pactmw_schema").fetchone()
            if row is None:
                conn.execute("INSERT INTO pactmw_schema (version) VALUES (0)")
                version = 0
            else:
                version = int(row[0])
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"sqlite database {self._path} has schema version {version}, newer than "
                    f"this pactmw supports ({len(MIGRATIONS)}); upgrade pactmw"
                )
            for step in MIGRATIONS[version:]:
                for statement in step:
                    conn.execute(statement)
            conn.execute("UPDATE pactmw_schema SET version = ?", (len(MIGRATIONS),))

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """Hold the connection for statements that need no transaction of their own."""
        with self._lock:
            if self._closed:
                raise StoreUnavailable(f"the sqlite store {self._path} is closed")
            try:
                yield self._conn
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(f"sqlite database {self._path}: {exc}") from exc

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

    def create_conversation(self, *, brand_id: str, issuer: str, sub: str, now: float) -> str:
        """Mint a new conversation owned by `(brand_id, issuer, sub)`; return its id."""
        reject_nul(brand_id=brand_id, issuer=issuer, sub=sub)
        context_id = str(uuid.uuid4())
        with self._write() as conn:
            conn.execute(
                "INSERT INTO pactmw_conversations"
                " (context_id, brand_id, issuer, sub, created_at, last_activity, closed, account)"
                " VALUES (?, ?, ?, ?, ?, ?, 0, NULL)",
                (context_id, brand_id, issuer, sub, now, now),
            )
        return context_id

    def get_conversation(self, context_id: str) -> Conversation | None:
        """Return the conversation, or None if the id is unknown."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT context_id, brand_id, issuer, sub, created_at, last_activity, closed,"
                " account FROM pactmw_conversations WHERE context_id = ?",
                (context_id,),
            ).fetchone()
        if row is None:
            return None
        return Conversation(
            context_id=row[0],
            brand_id=row[1],
            issuer=row[2],
            sub=row[3],
            created_at=float(row[4]),
            last_activity=float(row[5]),
            closed=bool(row[6]),
            account=row[7],
        )

    def close_conversation(self, context_id: str) -> None:
        """Mark the conversation closed; unknown ids are ignored."""
        with self._write() as conn:
            conn.execute(
                "UPDATE pactmw_conversations SET closed = 1 WHERE context_id = ?", (context_id,)
            )

    def bind_account(self, context_id: str, account: str) -> str:
        """Bind `account` if none is bound; return the account bound now."""
        reject_nul(context_id=context_id, account=account)
        with self._write() as conn:
            # Update then read inside one BEGIN IMMEDIATE transaction, rather than
            # UPDATE ... RETURNING, which needs sqlite 3.35 (older distributions lack it).
            conn.execute(
                "UPDATE pactmw_conversations SET account = ?"
                " WHERE context_id = ? AND account IS NULL",
                (account, context_id),
            )
            row = conn.execute(
                "SELECT account FROM pactmw_conversations WHERE context_id = ?", (context_id,)
            ).fetchone()
        if row is None:
            raise NotFound(f"unknown conversation {context_id!r}")
        return str(row[0])

    def claim_message(
        self, *, context_id: str, message_id: str, text: str, now: float, lease_seconds: float
    ) -> Claim:
        """Atomically decide who answers the user message `message_id`; see `Claim`."""
        reject_nul(context_id=context_id, message_id=message_id, text=text)
        with self._write() as conn:
            if (
                conn.execute(
                    "SELECT 1 FROM pactmw_conversations WHERE context_id = ?", (context_id,)
                ).fetchone()
                is None
            ):
                raise NotFound(f"unknown conversation {context_id!r}")
            if (
                conn.execute(
                    "SELECT 1 FROM pactmw_messages WHERE context_id = ? AND reply_message_id = ?",
                    (context_id, message_id),
                ).fetchone()
                is not None
            ):
                return Claim(kind="conflict")
            row = conn.execute(
                "SELECT claimed_at, reply FROM pactmw_messages"
                " WHERE context_id = ? AND message_id = ?",
                (context_id, message_id),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)"
                    " VALUES (?, ?, ?, ?)",
                    (context_id, message_id, text, now),
                )
            elif row[1] is not None:
                return Claim(kind="reply", reply=bytes(row[1]))
            elif now - float(row[0]) < lease_seconds:
                return Claim(kind="pending")
            else:
                # Stale claim: its worker died. Keep the row (and its place in the history).
                conn.execute(
                    "UPDATE pactmw_messages SET text = ?, claimed_at = ?"
                    " WHERE context_id = ? AND message_id = ?",
                    (text, now, context_id, message_id),
                )
            conn.execute(
                "UPDATE pactmw_conversations SET last_activity = ? WHERE context_id = ?",
                (now, context_id),
            )
            return Claim(kind="new")

    def store_reply(
        self,
        *,
        context_id: str,
        message_id: str,
        reply_message_id: str,
        reply_text: str,
        reply: bytes,
        now: float,
    ) -> None:
        """Store the reply to a claimed user message; the first reply stored wins."""
        reject_nul(
            context_id=context_id,
            message_id=message_id,
            reply_message_id=reply_message_id,
            reply_text=reply_text,
        )
        with self._write() as conn:
            row = conn.execute(
                "SELECT reply IS NOT NULL FROM pactmw_messages"
                " WHERE context_id = ? AND message_id = ?",
                (context_id, message_id),
            ).fetchone()
            if row is None:
                raise NotFound(f"message {message_id!r} was not claimed in {context_id!r}")
            if row[0]:
                return
            if (
                conn.execute(
                    "SELECT 1 FROM pactmw_messages WHERE context_id = ? AND reply_message_id = ?",
                    (context_id, reply_message_id),
                ).fetchone()
                is not None
            ):
                raise ValueError(f"reply message id {reply_message_id!r} is already used")
            conn.execute(
                "UPDATE pactmw_messages"
                " SET reply_message_id = ?, reply_text = ?, reply = ?, replied_at = ?"
                " WHERE context_id = ? AND message_id = ?",
                (reply_message_id, reply_text, bytes(reply), now, context_id, message_id),
            )
            conn.execute(
                "UPDATE pactmw_conversations SET last_activity = ? WHERE context_id = ?",
                (now, context_id),
            )

    def release_claim(self, *, context_id: str, message_id: str) -> None:
        """Drop an unanswered claim so a retry runs the bot again."""
        with self._write() as conn:
            conn.execute(
                "DELETE FROM pactmw_messages"
                " WHERE context_id = ? AND message_id = ? AND reply IS NULL",
                (context_id, message_id),
            )

    def history(self, context_id: str, *, limit: int = 50) -> list[Turn]:
        """Return the last `limit` answered turns, oldest first."""
        if limit <= 0:
            return []
        with self._read() as conn:
            rows = conn.execute(
                "SELECT message_id, text, reply_message_id, reply_text FROM ("
                " SELECT id, message_id, text, reply_message_id, reply_text"
                " FROM pactmw_messages WHERE context_id = ? AND reply IS NOT NULL"
                " ORDER BY id DESC LIMIT ?"
                ") ORDER BY id",
                (context_id, limit),
            ).fetchall()
        return [
            Turn(message_id=r[0], text=r[1], reply_message_id=r[2], reply_text=r[3]) for r in rows
        ]

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        """Persist an enable/disable override for `issuer`."""
        reject_nul(issuer=issuer)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO pactmw_agent_overrides (issuer, enabled) VALUES (?, ?)"
                " ON CONFLICT (issuer) DO UPDATE SET enabled = excluded.enabled",
                (issuer, int(enabled)),
            )

    def agent_enabled(self, issuer: str) -> bool | None:
        """Return the override for `issuer`, or None when there is none."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT enabled FROM pactmw_agent_overrides WHERE issuer = ?", (issuer,)
            ).fetchone()
        return None if row is None else bool(row[0])

    def close(self) -> None:
        """Close the connection; later calls raise `StoreUnavailable`."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
