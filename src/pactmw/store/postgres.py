"""The PostgreSQL Store: shared state for Providers running on many machines.

Needs the `postgres` extra (psycopg 3). Each turn decision runs in one transaction that
locks the conversation row (`SELECT ... FOR UPDATE`), so concurrent duplicates anywhere
serialize on that row and exactly one of them owns the turn; unique constraints back the
invariants up. The delegation operations work the same way: each locks the row it decides
on (device code, refresh token, grant) or is one conditional statement, and upserts of a
grant key also take a per-key advisory lock, since the first grant has no row yet to lock.
Connection problems surface as `StoreUnavailable`, whose message never contains the DSN's
password.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import select
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from pactmw.store._decisions import (
    ClaimedMessage,
    RefreshTokenState,
    approved_device,
    decide_claim,
    decide_poll,
    decide_rotation,
    decide_upsert,
    is_decidable,
    is_unexpired,
    token_belongs,
)
from pactmw.store.base import (
    EXPIRED_RETENTION,
    PURGE_EVERY,
    Approval,
    Claim,
    Conversation,
    DeviceAuthorization,
    DeviceStatus,
    Grant,
    NotFound,
    Poll,
    Rotation,
    StoreError,
    StoreUnavailable,
    Turn,
    UserCodeTaken,
    check_approval,
    check_denial,
    check_grant_scopes,
    check_token_owner,
    has_nul,
    reject_nul,
    scope_tuple,
)

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
)

# Statement heads shared by the lookups; the column order is what _device and _grant read.
_SELECT_DEVICE = (
    "SELECT device_code_hash, user_code, brand_id, client_id, pa_sub, scopes, created_at,"
    " expires_at, interval_seconds, last_polled_at, status, account, granted_scopes, grant_id"
    " FROM pactmw_device_authorizations"
)
_SELECT_GRANT = (
    "SELECT grant_id, brand_id, account, client_id, pa_sub, scopes, created_at, updated_at,"
    " expires_at, revoked_at FROM pactmw_grants"
)
# Newest first; ids compare by code point (COLLATE "C") as in the other backends.
_GRANT_ORDER = ' ORDER BY created_at DESC, grant_id COLLATE "C" DESC'


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _device(row: Sequence[Any]) -> DeviceAuthorization:
    return DeviceAuthorization(
        device_code_hash=row[0],
        user_code=row[1],
        brand_id=row[2],
        client_id=row[3],
        pa_sub=row[4],
        scopes=tuple(row[5]),
        created_at=float(row[6]),
        expires_at=float(row[7]),
        interval=float(row[8]),
        last_polled_at=_opt_float(row[9]),
        status=cast(DeviceStatus, row[10]),
        account=row[11],
        granted_scopes=tuple(row[12]),
        grant_id=row[13],
    )


def _grant(row: Sequence[Any]) -> Grant:
    return Grant(
        grant_id=row[0],
        brand_id=row[1],
        account=row[2],
        client_id=row[3],
        pa_sub=row[4],
        scopes=tuple(row[5]),
        created_at=float(row[6]),
        updated_at=float(row[7]),
        expires_at=float(row[8]),
        revoked_at=_opt_float(row[9]),
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
        self._ops = itertools.count()  # paces the opportunistic purge; see _maybe_purge

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
            reply_id = cur.execute(
                "SELECT 1 FROM pactmw_messages WHERE context_id = %s AND reply_message_id = %s",
                (context_id, message_id),
            ).fetchone()
            row = cur.execute(
                "SELECT claimed_at, reply FROM pactmw_messages"
                " WHERE context_id = %s AND message_id = %s",
                (context_id, message_id),
            ).fetchone()
            decision = decide_claim(
                None if row is None else ClaimedMessage(float(row[0]), _opt_bytes(row[1])),
                is_reply_id=reply_id is not None,
                now=now,
                lease_seconds=lease_seconds,
            )
            if decision.write == "insert":
                inserted = cur.execute(
                    "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)"
                    " VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (context_id, message_id) DO NOTHING RETURNING id",
                    (context_id, message_id, text, now),
                ).fetchone()
                if inserted is None:
                    # Unreachable while the row lock holds; the constraint is the backstop.
                    return Claim(kind="pending")
            elif decision.write == "take_over":
                # Keep the row (and its place in the history).
                cur.execute(
                    "UPDATE pactmw_messages SET text = %s, claimed_at = %s"
                    " WHERE context_id = %s AND message_id = %s",
                    (text, now, context_id, message_id),
                )
            if decision.write is not None:
                cur.execute(
                    "UPDATE pactmw_conversations SET last_activity = %s WHERE context_id = %s",
                    (now, context_id),
                )
            return decision.claim

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

    # --- delegation state ---------------------------------------------------------------------

    def _maybe_purge(self, cur: _Cursor, now: float) -> None:
        # Inside the caller's transaction. Only every PURGE_EVERY-th call deletes, so callers
        # rarely queue behind each other's deletes; the expires_at indexes keep them cheap.
        if next(self._ops) % PURGE_EVERY:
            return
        horizon = now - EXPIRED_RETENTION
        cur.execute("DELETE FROM pactmw_used_values WHERE expires_at <= %s", (now,))
        cur.execute("DELETE FROM pactmw_device_authorizations WHERE expires_at <= %s", (horizon,))
        cur.execute("DELETE FROM pactmw_refresh_tokens WHERE expires_at <= %s", (horizon,))

    def create_device_authorization(
        self,
        *,
        device_code_hash: str,
        user_code: str,
        brand_id: str,
        client_id: str,
        pa_sub: str,
        scopes: tuple[str, ...],
        now: float,
        expires_at: float,
        interval: float,
    ) -> None:
        """Store a new `pending` device authorization; see `Store`."""
        reject_nul(
            device_code_hash=device_code_hash,
            user_code=user_code,
            brand_id=brand_id,
            client_id=client_id,
            pa_sub=pa_sub,
        )
        requested = list(scope_tuple("scopes", scopes))
        with self._transaction() as cur:
            self._maybe_purge(cur, now)
            holder = cur.execute(
                "SELECT device_code_hash, expires_at FROM pactmw_device_authorizations"
                " WHERE user_code = %s FOR UPDATE",
                (user_code,),
            ).fetchone()
            if holder is not None:
                if now < float(holder[1]):
                    raise UserCodeTaken(f"user code {user_code!r} is in use")
                cur.execute(
                    "DELETE FROM pactmw_device_authorizations WHERE device_code_hash = %s",
                    (holder[0],),
                )
            # ON CONFLICT waits for a concurrent insert of the same code or hash to settle, so
            # a racing creator cannot slip past the check above.
            inserted = cur.execute(
                "INSERT INTO pactmw_device_authorizations (device_code_hash, user_code, brand_id,"
                " client_id, pa_sub, scopes, created_at, expires_at, interval_seconds,"
                " last_polled_at, status, account, granted_scopes, grant_id)"
                " VALUES (%s, %s, %s, %s, %s, %s::text[], %s, %s, %s, NULL, 'pending', NULL,"
                " '{}', NULL) ON CONFLICT DO NOTHING RETURNING 1",
                (
                    device_code_hash,
                    user_code,
                    brand_id,
                    client_id,
                    pa_sub,
                    requested,
                    now,
                    expires_at,
                    float(interval),
                ),
            ).fetchone()
            if inserted is None:
                if (
                    cur.execute(
                        "SELECT 1 FROM pactmw_device_authorizations WHERE device_code_hash = %s",
                        (device_code_hash,),
                    ).fetchone()
                    is not None
                ):
                    raise ValueError("device code hash is already stored")
                raise UserCodeTaken(f"user code {user_code!r} is in use")

    def device_authorization_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        """Return the authorization holding `user_code`, or None."""
        if has_nul(user_code):
            return None
        with self._transaction() as cur:
            row = cur.execute(
                _SELECT_DEVICE + " WHERE user_code = %s",
                (user_code,),
            ).fetchone()
        return None if row is None else _device(row)

    def decide_device_authorization(
        self,
        *,
        user_code: str,
        approved: bool,
        account: str | None,
        granted_scopes: tuple[str, ...],
        grant_id: str | None,
        now: float,
    ) -> DeviceAuthorization | None:
        """Record the user's denial of a pending, unexpired authorization; see `Store`."""
        account = check_denial(approved, account)
        if has_nul(user_code):
            return None
        with self._transaction() as cur:
            # One conditional UPDATE: a concurrent decider blocks on the row, then re-checks
            # `status = 'pending'` against the winner's commit and changes nothing.
            row = cur.execute(
                "UPDATE pactmw_device_authorizations SET status = 'denied', account = %s"
                " WHERE user_code = %s AND status = 'pending' AND expires_at > %s"
                " RETURNING device_code_hash, user_code, brand_id, client_id, pa_sub, scopes,"
                " created_at, expires_at, interval_seconds, last_polled_at, status, account,"
                " granted_scopes, grant_id",
                (account, user_code, now),
            ).fetchone()
        return None if row is None else _device(row)

    def approve_device_authorization(
        self,
        *,
        user_code: str,
        brand_id: str,
        account: str,
        granted_scopes: tuple[str, ...],
        new_grant_id: str,
        now: float,
        grant_expires_at: float,
    ) -> Approval | None:
        """Approve a pending authorization and create or widen its grant, atomically.

        Locks the authorization row first (`FOR UPDATE`): a concurrent denial or approval of
        the code waits for this commit and then finds it decided, or this one waits for
        theirs and returns None before touching any grant. Then the grant key's advisory
        lock and grant row, as in `upsert_grant`.
        """
        granted, wanted = check_approval(account, granted_scopes, new_grant_id)
        if has_nul(user_code, brand_id):
            return None
        with self._transaction() as cur:
            row = cur.execute(
                _SELECT_DEVICE + " WHERE user_code = %s FOR UPDATE", (user_code,)
            ).fetchone()
            device = None if row is None else _device(row)
            if device is None or not is_decidable(device, now=now, brand_id=brand_id):
                return None
            grant = self._upsert_grant(
                cur,
                grant_id=new_grant_id,
                brand_id=brand_id,
                account=account,
                client_id=device.client_id,
                pa_sub=device.pa_sub,
                wanted=wanted,
                now=now,
                expires_at=grant_expires_at,
            )
            cur.execute(
                "UPDATE pactmw_device_authorizations"
                " SET status = 'approved', account = %s, granted_scopes = %s::text[],"
                " grant_id = %s WHERE device_code_hash = %s",
                (account, list(granted), grant.grant_id, device.device_code_hash),
            )
            device = approved_device(
                device, account=account, granted=granted, grant_id=grant.grant_id
            )
            return Approval(authorization=device, grant=grant)

    def poll_device_code(
        self, *, device_code_hash: str, client_id: str, brand_id: str, pa_sub: str, now: float
    ) -> Poll:
        """Answer one device-code token request, atomically; see `Store`."""
        if has_nul(device_code_hash, client_id, brand_id, pa_sub):
            return Poll(kind="unknown")
        with self._transaction() as cur:
            # The row lock serializes polls of one code; each sees the previous one's commit.
            row = cur.execute(
                _SELECT_DEVICE + " WHERE device_code_hash = %s FOR UPDATE",
                (device_code_hash,),
            ).fetchone()
            decision = decide_poll(
                None if row is None else _device(row),
                client_id=client_id,
                brand_id=brand_id,
                pa_sub=pa_sub,
                now=now,
            )
            if decision.update == "touch":
                cur.execute(
                    "UPDATE pactmw_device_authorizations SET last_polled_at = %s"
                    " WHERE device_code_hash = %s",
                    (now, device_code_hash),
                )
            elif decision.update == "consume":
                cur.execute(
                    "UPDATE pactmw_device_authorizations SET status = 'consumed'"
                    " WHERE device_code_hash = %s",
                    (device_code_hash,),
                )
            return decision.poll

    def upsert_grant(
        self,
        *,
        grant_id: str,
        brand_id: str,
        account: str,
        client_id: str,
        pa_sub: str,
        scopes: tuple[str, ...],
        now: float,
        expires_at: float,
    ) -> Grant:
        """Create the live grant of the key or widen it; see `Store`."""
        reject_nul(
            grant_id=grant_id,
            brand_id=brand_id,
            account=account,
            client_id=client_id,
            pa_sub=pa_sub,
        )
        wanted = check_grant_scopes(scopes)
        with self._transaction() as cur:
            return self._upsert_grant(
                cur,
                grant_id=grant_id,
                brand_id=brand_id,
                account=account,
                client_id=client_id,
                pa_sub=pa_sub,
                wanted=wanted,
                now=now,
                expires_at=expires_at,
            )

    @staticmethod
    def _upsert_grant(
        cur: _Cursor,
        *,
        grant_id: str,
        brand_id: str,
        account: str,
        client_id: str,
        pa_sub: str,
        wanted: tuple[str, ...],
        now: float,
        expires_at: float,
    ) -> Grant:
        # Inside the caller's transaction; `wanted` is already checked.
        # The advisory lock serializes upserts of one key even while it has no row to lock
        # (two first approvals); the row lock then holds revocations off until we commit.
        # NO KEY UPDATE: the key never changes, so foreign-key checks need not wait.
        cur.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)",
            (_GRANT_LOCK_CLASS, _grant_lock_key(brand_id, account, client_id, pa_sub)),
        )
        row = cur.execute(
            _SELECT_GRANT
            + " WHERE brand_id = %s AND account = %s AND client_id = %s AND pa_sub = %s"
            " AND revoked_at IS NULL FOR NO KEY UPDATE",
            (brand_id, account, client_id, pa_sub),
        ).fetchone()
        decision = decide_upsert(
            None if row is None else _grant(row),
            grant_id=grant_id,
            key=(brand_id, account, client_id, pa_sub),
            wanted=wanted,
            now=now,
            expires_at=expires_at,
        )
        grant = decision.grant
        if decision.kind == "widen":
            cur.execute(
                "UPDATE pactmw_grants SET scopes = %s::text[], expires_at = %s, updated_at = %s"
                " WHERE grant_id = %s",
                (list(grant.scopes), grant.expires_at, now, grant.grant_id),
            )
            return grant
        if (
            cur.execute("SELECT 1 FROM pactmw_grants WHERE grant_id = %s", (grant_id,)).fetchone()
            is not None
        ):
            raise ValueError(f"grant id {grant_id!r} is already used")
        if decision.retire is not None:
            cur.execute(
                "UPDATE pactmw_grants SET revoked_at = %s WHERE grant_id = %s",
                (now, decision.retire),
            )
        cur.execute(
            "INSERT INTO pactmw_grants (grant_id, brand_id, account, client_id, pa_sub, scopes,"
            " created_at, updated_at, expires_at, revoked_at)"
            " VALUES (%s, %s, %s, %s, %s, %s::text[], %s, %s, %s, NULL)",
            (grant_id, brand_id, account, client_id, pa_sub, list(wanted), now, now, expires_at),
        )
        return grant

    def get_grant(self, grant_id: str) -> Grant | None:
        """Return the grant in any state, or None."""
        if has_nul(grant_id):
            return None
        with self._transaction() as cur:
            row = cur.execute(_SELECT_GRANT + " WHERE grant_id = %s", (grant_id,)).fetchone()
        return None if row is None else _grant(row)

    def live_grant(
        self, *, brand_id: str, account: str, client_id: str, pa_sub: str, now: float
    ) -> Grant | None:
        """Return the live grant of the key at `now`, or None."""
        if has_nul(brand_id, account, client_id, pa_sub):
            return None
        with self._transaction() as cur:
            row = cur.execute(
                _SELECT_GRANT
                + " WHERE brand_id = %s AND account = %s AND client_id = %s AND pa_sub = %s"
                " AND revoked_at IS NULL AND expires_at > %s",
                (brand_id, account, client_id, pa_sub, now),
            ).fetchone()
        return None if row is None else _grant(row)

    def revoke_grant(self, grant_id: str, *, now: float) -> bool:
        """Revoke the grant; True if it was live."""
        if has_nul(grant_id):
            return False
        with self._transaction() as cur:
            row = cur.execute(
                "UPDATE pactmw_grants SET revoked_at = %s"
                " WHERE grant_id = %s AND revoked_at IS NULL AND expires_at > %s"
                " RETURNING 1",
                (now, grant_id, now),
            ).fetchone()
        return row is not None

    def revoke_account_grants(
        self, account: str, *, now: float, brand_id: str | None = None
    ) -> list[str]:
        """Revoke every live grant of `account` (at one Brand, if given); return their ids."""
        if has_nul(account, brand_id or ""):
            return []
        with self._transaction() as cur:
            rows = cur.execute(
                "WITH revoked AS ("
                " UPDATE pactmw_grants SET revoked_at = %s"
                " WHERE account = %s AND revoked_at IS NULL AND expires_at > %s"
                " AND (%s::text IS NULL OR brand_id = %s)"
                " RETURNING grant_id, created_at"
                ") SELECT grant_id FROM revoked"
                ' ORDER BY created_at DESC, grant_id COLLATE "C" DESC',
                (now, account, now, brand_id, brand_id),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def list_grants(
        self,
        *,
        brand_id: str | None = None,
        account: str | None = None,
        include_inactive: bool = False,
        now: float,
    ) -> list[Grant]:
        """Return the matching grants, newest first; live ones only unless asked."""
        if has_nul(brand_id or "", account or ""):
            return []
        with self._transaction() as cur:
            rows = cur.execute(
                _SELECT_GRANT + " WHERE (%s::text IS NULL OR brand_id = %s)"
                " AND (%s::text IS NULL OR account = %s)"
                " AND (%s OR (revoked_at IS NULL AND expires_at > %s))" + _GRANT_ORDER,
                (brand_id, brand_id, account, account, include_inactive, now),
            ).fetchall()
        return [_grant(r) for r in rows]

    def issue_refresh_token(
        self,
        *,
        token_hash: str,
        grant_id: str,
        client_id: str,
        brand_id: str,
        now: float,
        expires_at: float,
    ) -> None:
        """Store a new, unused refresh token for the grant; see `Store`."""
        reject_nul(token_hash=token_hash, grant_id=grant_id, client_id=client_id, brand_id=brand_id)
        with self._transaction() as cur:
            row = cur.execute(_SELECT_GRANT + " WHERE grant_id = %s", (grant_id,)).fetchone()
            if row is None:
                raise NotFound(f"unknown grant {grant_id!r}")
            check_token_owner(_grant(row), client_id, brand_id)
            self._insert_refresh_token(
                cur, token_hash, grant_id, client_id, brand_id, now, expires_at
            )

    @staticmethod
    def _insert_refresh_token(
        cur: _Cursor,
        token_hash: str,
        grant_id: str,
        client_id: str,
        brand_id: str,
        now: float,
        expires_at: float,
    ) -> None:
        inserted = cur.execute(
            "INSERT INTO pactmw_refresh_tokens"
            " (token_hash, grant_id, client_id, brand_id, created_at, expires_at, used_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, NULL) ON CONFLICT DO NOTHING RETURNING 1",
            (token_hash, grant_id, client_id, brand_id, now, expires_at),
        ).fetchone()
        if inserted is None:
            raise ValueError("refresh token hash is already stored")

    def rotate_refresh_token(
        self,
        *,
        token_hash: str,
        new_token_hash: str,
        client_id: str,
        brand_id: str,
        pa_sub: str,
        now: float,
        expires_at: float,
    ) -> Rotation:
        """Spend a refresh token and store its successor, atomically; see `Store`.

        Concurrent rotations of one token: one `rotated`, the rest `reused`, which revokes
        the grant (a replay cannot be told from theft; RFC 9700 §4.14).
        """
        reject_nul(new_token_hash=new_token_hash)
        if has_nul(token_hash, client_id, brand_id, pa_sub):
            return Rotation(kind="unknown")
        with self._transaction() as cur:
            self._maybe_purge(cur, now)
            # Lock order everywhere: the token row, then its grant row. The token's agent
            # user is its grant's (the grant key never changes): read through the join, not
            # stored twice; `FOR UPDATE OF t` locks only the token row here.
            token = cur.execute(
                "SELECT t.grant_id, t.client_id, t.brand_id, t.expires_at, t.used_at, g.pa_sub"
                " FROM pactmw_refresh_tokens AS t JOIN pactmw_grants AS g USING (grant_id)"
                " WHERE t.token_hash = %s FOR UPDATE OF t",
                (token_hash,),
            ).fetchone()
            state = None
            if token is not None:
                state = RefreshTokenState(
                    grant_id=token[0],
                    client_id=token[1],
                    brand_id=token[2],
                    pa_sub=token[5],
                    expires_at=float(token[3]),
                    used_at=_opt_float(token[4]),
                )
            if state is None or not token_belongs(
                state, client_id=client_id, brand_id=brand_id, pa_sub=pa_sub
            ):
                return Rotation(kind="unknown")
            row = cur.execute(
                _SELECT_GRANT + " WHERE grant_id = %s FOR NO KEY UPDATE",
                (state.grant_id,),
            ).fetchone()
            assert row is not None  # the foreign key keeps it
            grant = _grant(row)
            decision = decide_rotation(state, grant, now=now)
            if decision.update == "revoke_grant":
                cur.execute(
                    "UPDATE pactmw_grants SET revoked_at = %s WHERE grant_id = %s",
                    (now, grant.grant_id),
                )
            elif decision.update == "spend":
                cur.execute(
                    "UPDATE pactmw_refresh_tokens SET used_at = %s WHERE token_hash = %s",
                    (now, token_hash),
                )
                self._insert_refresh_token(
                    cur, new_token_hash, grant.grant_id, client_id, brand_id, now, expires_at
                )
            return decision.rotation

    def use_once(self, *, namespace: str, value: str, now: float, expires_at: float) -> bool:
        """Record `value` in `namespace` until `expires_at`; True only the first time."""
        reject_nul(namespace=namespace, value=value)
        with self._transaction() as cur:
            self._maybe_purge(cur, now)
            # One statement: a row comes back when inserted, or when an expired record was
            # renewed; a concurrent duplicate waits for the winner and then gets no row.
            row = cur.execute(
                "INSERT INTO pactmw_used_values (namespace, value, expires_at)"
                " VALUES (%s, %s, %s)"
                " ON CONFLICT (namespace, value) DO UPDATE SET expires_at = EXCLUDED.expires_at"
                " WHERE pactmw_used_values.expires_at <= %s RETURNING 1",
                (namespace, value, expires_at, now),
            ).fetchone()
        return row is not None

    def is_marked(self, *, namespace: str, value: str, now: float) -> bool:
        """Tell whether an unexpired `use_once` record holds `value`; records nothing."""
        if has_nul(namespace, value):
            return False
        with self._transaction() as cur:
            row = cur.execute(
                "SELECT expires_at FROM pactmw_used_values WHERE namespace = %s AND value = %s",
                (namespace, value),
            ).fetchone()
        return is_unexpired(None if row is None else float(row[0]), now)

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
