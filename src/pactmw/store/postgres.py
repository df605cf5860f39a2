"""The PostgreSQL Store: shared state for Providers running on many machines.

Needs the `postgres` extra (psycopg 3). Each turn decision runs in one transaction that
locks the conversation row (`SELECT ... FOR UPDATE`), so concurrent duplicates anywhere
serialize on that row and exactly one of them owns the turn; unique constraints back the
invariants up. Connection problems surface as `StoreUnavailable`, whose message never
contains the DSN's password.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from pactmw.store.base import (
    Claim,
    Conversation,
    NotFound,
    StoreError,
    StoreUnavailable,
    Turn,
    has_nul,
    reject_nul,
)

__all__ = ["MIGRATIONS", "PostgresStore"]

_Connection = psycopg.Connection[TupleRow]
_Cursor = psycopg.Cursor[TupleRow]

# A fixed key for pg_advisory_xact_lock so that processes starting together migrate one at
# a time (CREATE TABLE IF NOT EXISTS alone races on the catalog). The digits spell "pactmw".
_MIGRATION_LOCK_KEY = 0x70_61_63_74_6D_77

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
)


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
        with self._cond:
            while True:
                if self._closed:
                    raise StoreUnavailable(f"the PostgreSQL store {self._describe} is closed")
                if self._idle:
                    return self._idle.pop()
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


class PostgresStore:
    """A Store in a PostgreSQL database; see the module docstring.

    `dsn` is a libpq URL or key/value string. Nothing connects until the first operation,
    which also creates or migrates the schema, so an app can start before its database.
    At most `max_connections` connections are open; a caller waits up to `acquire_timeout`
    seconds for one, then gets `StoreUnavailable`.
    """

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

    def _scrub(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        message = " ".join(str(exc).split())
        return StoreUnavailable(
            self._scrub(f"PostgreSQL {self._describe} is unavailable: {message}")
        )

    def _open_connection(self) -> _Connection:
        try:
            return psycopg.connect(self._dsn, **self._connect_kwargs)
        except psycopg.Error as exc:
            # `from None`: the driver's exception is summarised, scrubbed, in our message.
            raise self._unavailable(exc) from None

    def _migrate(self, conn: _Connection) -> None:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
            cur.execute("CREATE TABLE IF NOT EXISTS pactmw_schema (version INTEGER NOT NULL)")
            row = cur.execute("SELECT version FROM pactmw_schema").fetchone()
            if row is None:
                cur.execute("INSERT INTO pactmw_schema (version) VALUES (0)")
                version = 0
            else:
                version = int(row[0])
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"PostgreSQL {self._describe} has schema version {version}, newer than "
                    f"this pactmw supports ({len(MIGRATIONS)}); upgrade pactmw"
                )
            for step in MIGRATIONS[version:]:
                for statement in step:
                    cur.execute(statement)
            cur.execute("UPDATE pactmw_schema SET version = %s", (len(MIGRATIONS),))

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[_Cursor]:
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
        finally:
            self._pool.release(conn)

    def create_conversation(self, *, brand_id: str, issuer: str, sub: str, now: float) -> str:
        """Mint a new conversation owned by `(brand_id, issuer, sub)`; return its id."""
        reject_nul(brand_id=brand_id, issuer=issuer, sub=sub)
        context_id = str(uuid.uuid4())
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO pactmw_conversations"
                " (context_id, brand_id, issuer, sub, created_at, last_activity, closed, account)"
                " VALUES (%s, %s, %s, %s, %s, %s, FALSE, NULL)",
                (context_id, brand_id, issuer, sub, now, now),
            )
        return context_id

    def get_conversation(self, context_id: str) -> Conversation | None:
        """Return the conversation, or None if the id is unknown."""
        if has_nul(context_id):
            return None
        with self._transaction() as cur:
            row = cur.execute(
                "SELECT context_id, brand_id, issuer, sub, created_at, last_activity, closed,"
                " account FROM pactmw_conversations WHERE context_id = %s",
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
        if has_nul(context_id):
            return
        with self._transaction() as cur:
            cur.execute(
                "UPDATE pactmw_conversations SET closed = TRUE WHERE context_id = %s",
                (context_id,),
            )

    def bind_account(self, context_id: str, account: str) -> str:
        """Bind `account` if none is bound; return the account bound now."""
        reject_nul(context_id=context_id, account=account)
        with self._transaction() as cur:
            # One statement: a concurrent binder blocks on the row, then re-evaluates
            # COALESCE against the committed winner (READ COMMITTED re-check).
            row = cur.execute(
                "UPDATE pactmw_conversations SET account = COALESCE(account, %s)"
                " WHERE context_id = %s RETURNING account",
                (account, context_id),
            ).fetchone()
        if row is None:
            raise NotFound(f"unknown conversation {context_id!r}")
        return str(row[0])

    def _lock_conversation(self, cur: _Cursor, context_id: str) -> None:
        # Every turn write takes this row lock first, so claims and replies of one
        # conversation serialize, and each later statement (READ COMMITTED) sees the
        # winner's committed rows.
        row = cur.execute(
            "SELECT 1 FROM pactmw_conversations WHERE context_id = %s FOR UPDATE", (context_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"unknown conversation {context_id!r}")

    def claim_message(
        self, *, context_id: str, message_id: str, text: str, now: float, lease_seconds: float
    ) -> Claim:
        """Atomically decide who answers the user message `message_id`; see `Claim`."""
        reject_nul(context_id=context_id, message_id=message_id, text=text)
        with self._transaction() as cur:
            self._lock_conversation(cur, context_id)
            if (
                cur.execute(
                    "SELECT 1 FROM pactmw_messages WHERE context_id = %s AND reply_message_id = %s",
                    (context_id, message_id),
                ).fetchone()
                is not None
            ):
                return Claim(kind="conflict")
            row = cur.execute(
                "SELECT claimed_at, reply FROM pactmw_messages"
                " WHERE context_id = %s AND message_id = %s",
                (context_id, message_id),
            ).fetchone()
            if row is None:
                inserted = cur.execute(
                    "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)"
                    " VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (context_id, message_id) DO NOTHING RETURNING id",
                    (context_id, message_id, text, now),
                ).fetchone()
                if inserted is None:
                    # Unreachable while the row lock holds; the constraint is the backstop.
                    return Claim(kind="pending")
            elif row[1] is not None:
                return Claim(kind="reply", reply=bytes(row[1]))
            elif now - float(row[0]) < lease_seconds:
                return Claim(kind="pending")
            else:
                # Stale claim: its worker died. Keep the row (and its place in the history).
                cur.execute(
                    "UPDATE pactmw_messages SET text = %s, claimed_at = %s"
                    " WHERE context_id = %s AND message_id = %s",
                    (text, now, context_id, message_id),
                )
            cur.execute(
                "UPDATE pactmw_conversations SET last_activity = %s WHERE context_id = %s",
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
        with self._transaction() as cur:
            self._lock_conversation(cur, context_id)
            row = cur.execute(
                "SELECT reply IS NOT NULL FROM pactmw_messages"
                " WHERE context_id = %s AND message_id = %s",
                (context_id, message_id),
            ).fetchone()
            if row is None:
                raise NotFound(f"message {message_id!r} was not claimed in {context_id!r}")
            if row[0]:
                return
            if (
                cur.execute(
                    "SELECT 1 FROM pactmw_messages WHERE context_id = %s AND reply_message_id = %s",
                    (context_id, reply_message_id),
                ).fetchone()
                is not None
            ):
                raise ValueError(f"reply message id {reply_message_id!r} is already used")
            cur.execute(
                "UPDATE pactmw_messages"
                " SET reply_message_id = %s, reply_text = %s, reply = %s, replied_at = %s"
                " WHERE context_id = %s AND message_id = %s",
                (reply_message_id, reply_text, bytes(reply), now, context_id, message_id),
            )
            cur.execute(
                "UPDATE pactmw_conversations SET last_activity = %s WHERE context_id = %s",
                (now, context_id),
            )

    def release_claim(self, *, context_id: str, message_id: str) -> None:
        """Drop an unanswered claim so a retry runs the bot again."""
        if has_nul(context_id, message_id):
            return
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM pactmw_messages"
                " WHERE context_id = %s AND message_id = %s AND reply IS NULL",
                (context_id, message_id),
            )

    def history(self, context_id: str, *, limit: int = 50) -> list[Turn]:
        """Return the last `limit` answered turns, oldest first."""
        if limit <= 0 or has_nul(context_id):
            return []
        with self._transaction() as cur:
            rows = cur.execute(
                "SELECT message_id, text, reply_message_id, reply_text FROM ("
                " SELECT id, message_id, text, reply_message_id, reply_text"
                " FROM pactmw_messages WHERE context_id = %s AND reply IS NOT NULL"
                " ORDER BY id DESC LIMIT %s"
                ") AS recent ORDER BY id",
                (context_id, limit),
            ).fetchall()
        return [
            Turn(message_id=r[0], text=r[1], reply_message_id=r[2], reply_text=r[3]) for r in rows
        ]

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        """Persist an enable/disable override for `issuer`."""
        reject_nul(issuer=issuer)
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO pactmw_agent_overrides (issuer, enabled) VALUES (%s, %s)"
                " ON CONFLICT (issuer) DO UPDATE SET enabled = EXCLUDED.enabled",
                (issuer, enabled),
            )

    def agent_enabled(self, issuer: str) -> bool | None:
        """Return the override for `issuer`, or None when there is none."""
        if has_nul(issuer):
            return None
        with self._transaction() as cur:
            row = cur.execute(
                "SELECT enabled FROM pactmw_agent_overrides WHERE issuer = %s", (issuer,)
            ).fetchone()
        return None if row is None else bool(row[0])

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
