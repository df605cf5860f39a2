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
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from pactmw.store._decisions import (
    ClaimedMessage,
    RefreshTokenState,
    approved_device,
    decide_claim,
    decide_poll,
    decide_rotation,
    decide_upsert,
    denied_device,
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
    reject_nul,
    scope_tuple,
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


def _scopes_json(scopes: Sequence[str]) -> str:
    return json.dumps(list(scopes), ensure_ascii=False)


def _scopes_from_json(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))


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
        scopes=_scopes_from_json(row[5]),
        created_at=float(row[6]),
        expires_at=float(row[7]),
        interval=float(row[8]),
        last_polled_at=_opt_float(row[9]),
        status=cast(DeviceStatus, row[10]),
        account=row[11],
        granted_scopes=_scopes_from_json(row[12]),
        grant_id=row[13],
    )


def _grant(row: Sequence[Any]) -> Grant:
    return Grant(
        grant_id=row[0],
        brand_id=row[1],
        account=row[2],
        client_id=row[3],
        pa_sub=row[4],
        scopes=_scopes_from_json(row[5]),
        created_at=float(row[6]),
        updated_at=float(row[7]),
        expires_at=float(row[8]),
        revoked_at=_opt_float(row[9]),
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
            reply_id = conn.execute(
                "SELECT 1 FROM pactmw_messages WHERE context_id = ? AND reply_message_id = ?",
                (context_id, message_id),
            ).fetchone()
            row = conn.execute(
                "SELECT claimed_at, reply FROM pactmw_messages"
                " WHERE context_id = ? AND message_id = ?",
                (context_id, message_id),
            ).fetchone()
            decision = decide_claim(
                None if row is None else ClaimedMessage(float(row[0]), _opt_bytes(row[1])),
                is_reply_id=reply_id is not None,
                now=now,
                lease_seconds=lease_seconds,
            )
            if decision.write == "insert":
                conn.execute(
                    "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)"
                    " VALUES (?, ?, ?, ?)",
                    (context_id, message_id, text, now),
                )
            elif decision.write == "take_over":
                # Keep the row (and its place in the history).
                conn.execute(
                    "UPDATE pactmw_messages SET text = ?, claimed_at = ?"
                    " WHERE context_id = ? AND message_id = ?",
                    (text, now, context_id, message_id),
                )
            if decision.write is not None:
                conn.execute(
                    "UPDATE pactmw_conversations SET last_activity = ? WHERE context_id = ?",
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

    # --- delegation state ---------------------------------------------------------------------

    def _maybe_purge(self, conn: sqlite3.Connection, now: float) -> None:
        # Inside the caller's write transaction. Only every PURGE_EVERY-th call deletes, so
        # the cost is spread thin; the expires_at indexes keep each delete a range scan.
        if next(self._ops) % PURGE_EVERY:
            return
        horizon = now - EXPIRED_RETENTION
        conn.execute("DELETE FROM pactmw_used_values WHERE expires_at <= ?", (now,))
        conn.execute("DELETE FROM pactmw_device_authorizations WHERE expires_at <= ?", (horizon,))
        conn.execute("DELETE FROM pactmw_refresh_tokens WHERE expires_at <= ?", (horizon,))

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
        requested = scope_tuple("scopes", scopes)
        with self._write() as conn:
            self._maybe_purge(conn, now)
            holder = conn.execute(
                "SELECT device_code_hash, expires_at FROM pactmw_device_authorizations"
                " WHERE user_code = ?",
                (user_code,),
            ).fetchone()
            if holder is not None and now < float(holder[1]):
                raise UserCodeTaken(f"user code {user_code!r} is in use")
            if (
                conn.execute(
                    "SELECT 1 FROM pactmw_device_authorizations WHERE device_code_hash = ?",
                    (device_code_hash,),
                ).fetchone()
                is not None
            ):
                raise ValueError("device code hash is already stored")
            if holder is not None:
                conn.execute(
                    "DELETE FROM pactmw_device_authorizations WHERE device_code_hash = ?",
                    (holder[0],),
                )
            conn.execute(
                "INSERT INTO pactmw_device_authorizations (device_code_hash, user_code, brand_id,"
                " client_id, pa_sub, scopes, created_at, expires_at, interval_seconds,"
                " last_polled_at, status, account, granted_scopes, grant_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 'pending', NULL, '[]', NULL)",
                (
                    device_code_hash,
                    user_code,
                    brand_id,
                    client_id,
                    pa_sub,
                    _scopes_json(requested),
                    now,
                    expires_at,
                    float(interval),
                ),
            )

    def device_authorization_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        """Return the authorization holding `user_code`, or None."""
        with self._read() as conn:
            row = conn.execute(
                _SELECT_DEVICE + " WHERE user_code = ?",
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
        with self._write() as conn:
            device = self._pending_device(conn, user_code, now)
            if device is None:
                return None
            conn.execute(
                "UPDATE pactmw_device_authorizations SET status = 'denied', account = ?"
                " WHERE device_code_hash = ?",
                (account, device.device_code_hash),
            )
            return denied_device(device, account)

    @staticmethod
    def _pending_device(
        conn: sqlite3.Connection, user_code: str, now: float, brand_id: str | None = None
    ) -> DeviceAuthorization | None:
        # Inside a BEGIN IMMEDIATE transaction: the authorization, if still decidable.
        row = conn.execute(_SELECT_DEVICE + " WHERE user_code = ?", (user_code,)).fetchone()
        device = None if row is None else _device(row)
        return device if is_decidable(device, now=now, brand_id=brand_id) else None

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

        One BEGIN IMMEDIATE transaction holds sqlite's write lock from the status check to
        the commit, so a concurrent denial (or approval) either comes first, and this one
        changes nothing, or sees the code already decided.
        """
        granted, wanted = check_approval(account, granted_scopes, new_grant_id)
        with self._write() as conn:
            device = self._pending_device(conn, user_code, now, brand_id)
            if device is None:
                return None
            grant = self._upsert_grant(
                conn,
                grant_id=new_grant_id,
                brand_id=brand_id,
                account=account,
                client_id=device.client_id,
                pa_sub=device.pa_sub,
                wanted=wanted,
                now=now,
                expires_at=grant_expires_at,
            )
            conn.execute(
                "UPDATE pactmw_device_authorizations"
                " SET status = 'approved', account = ?, granted_scopes = ?, grant_id = ?"
                " WHERE device_code_hash = ?",
                (account, _scopes_json(granted), grant.grant_id, device.device_code_hash),
            )
            device = approved_device(
                device, account=account, granted=granted, grant_id=grant.grant_id
            )
            return Approval(authorization=device, grant=grant)

    def poll_device_code(
        self, *, device_code_hash: str, client_id: str, brand_id: str, pa_sub: str, now: float
    ) -> Poll:
        """Answer one device-code token request, atomically; see `Store`."""
        with self._write() as conn:
            row = conn.execute(
                _SELECT_DEVICE + " WHERE device_code_hash = ?",
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
                conn.execute(
                    "UPDATE pactmw_device_authorizations SET last_polled_at = ?"
                    " WHERE device_code_hash = ?",
                    (now, device_code_hash),
                )
            elif decision.update == "consume":
                conn.execute(
                    "UPDATE pactmw_device_authorizations SET status = 'consumed'"
                    " WHERE device_code_hash = ?",
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
        with self._write() as conn:
            return self._upsert_grant(
                conn,
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
        conn: sqlite3.Connection,
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
        # Inside the caller's BEGIN IMMEDIATE transaction; `wanted` is already checked.
        row = conn.execute(
            _SELECT_GRANT + " WHERE brand_id = ? AND account = ? AND client_id = ? AND pa_sub = ?"
            " AND revoked_at IS NULL",
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
            conn.execute(
                "UPDATE pactmw_grants SET scopes = ?, expires_at = ?, updated_at = ?"
                " WHERE grant_id = ?",
                (_scopes_json(grant.scopes), grant.expires_at, now, grant.grant_id),
            )
            return grant
        if (
            conn.execute("SELECT 1 FROM pactmw_grants WHERE grant_id = ?", (grant_id,)).fetchone()
            is not None
        ):
            raise ValueError(f"grant id {grant_id!r} is already used")
        if decision.retire is not None:
            conn.execute(
                "UPDATE pactmw_grants SET revoked_at = ? WHERE grant_id = ?",
                (now, decision.retire),
            )
        conn.execute(
            "INSERT INTO pactmw_grants (grant_id, brand_id, account, client_id, pa_sub, scopes,"
            " created_at, updated_at, expires_at, revoked_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            (
                grant_id,
                brand_id,
                account,
                client_id,
                pa_sub,
                _scopes_json(wanted),
                now,
                now,
                expires_at,
            ),
        )
        return grant

    def get_grant(self, grant_id: str) -> Grant | None:
        """Return the grant in any state, or None."""
        with self._read() as conn:
            row = conn.execute(_SELECT_GRANT + " WHERE grant_id = ?", (grant_id,)).fetchone()
        return None if row is None else _grant(row)

    def live_grant(
        self, *, brand_id: str, account: str, client_id: str, pa_sub: str, now: float
    ) -> Grant | None:
        """Return the live grant of the key at `now`, or None."""
        with self._read() as conn:
            row = conn.execute(
                _SELECT_GRANT
                + " WHERE brand_id = ? AND account = ? AND client_id = ? AND pa_sub = ?"
                " AND revoked_at IS NULL AND expires_at > ?",
                (brand_id, account, client_id, pa_sub, now),
            ).fetchone()
        return None if row is None else _grant(row)

    def revoke_grant(self, grant_id: str, *, now: float) -> bool:
        """Revoke the grant; True if it was live."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE pactmw_grants SET revoked_at = ?"
                " WHERE grant_id = ? AND revoked_at IS NULL AND expires_at > ?",
                (now, grant_id, now),
            )
            return cur.rowcount == 1

    def revoke_account_grants(
        self, account: str, *, now: float, brand_id: str | None = None
    ) -> list[str]:
        """Revoke every live grant of `account` (at one Brand, if given); return their ids."""
        params = (account, now, brand_id, brand_id)
        with self._write() as conn:
            ids = [
                str(r[0])
                for r in conn.execute(
                    "SELECT grant_id FROM pactmw_grants"
                    " WHERE account = ? AND revoked_at IS NULL AND expires_at > ?"
                    " AND (? IS NULL OR brand_id = ?)"
                    " ORDER BY created_at DESC, grant_id DESC",
                    params,
                ).fetchall()
            ]
            conn.execute(
                "UPDATE pactmw_grants SET revoked_at = ?"
                " WHERE account = ? AND revoked_at IS NULL AND expires_at > ?"
                " AND (? IS NULL OR brand_id = ?)",
                (now, *params),
            )
        return ids

    def list_grants(
        self,
        *,
        brand_id: str | None = None,
        account: str | None = None,
        include_inactive: bool = False,
        now: float,
    ) -> list[Grant]:
        """Return the matching grants, newest first; live ones only unless asked."""
        with self._read() as conn:
            rows = conn.execute(
                _SELECT_GRANT + " WHERE (? IS NULL OR brand_id = ?) AND (? IS NULL OR account = ?)"
                " AND (? OR (revoked_at IS NULL AND expires_at > ?))"
                " ORDER BY created_at DESC, grant_id DESC",
                (brand_id, brand_id, account, account, int(include_inactive), now),
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
        with self._write() as conn:
            row = conn.execute(_SELECT_GRANT + " WHERE grant_id = ?", (grant_id,)).fetchone()
            if row is None:
                raise NotFound(f"unknown grant {grant_id!r}")
            check_token_owner(_grant(row), client_id, brand_id)
            self._insert_refresh_token(
                conn, token_hash, grant_id, client_id, brand_id, now, expires_at
            )

    @staticmethod
    def _insert_refresh_token(
        conn: sqlite3.Connection,
        token_hash: str,
        grant_id: str,
        client_id: str,
        brand_id: str,
        now: float,
        expires_at: float,
    ) -> None:
        if (
            conn.execute(
                "SELECT 1 FROM pactmw_refresh_tokens WHERE token_hash = ?", (token_hash,)
            ).fetchone()
            is not None
        ):
            raise ValueError("refresh token hash is already stored")
        conn.execute(
            "INSERT INTO pactmw_refresh_tokens"
            " (token_hash, grant_id, client_id, brand_id, created_at, expires_at, used_at)"
            " VALUES (?, ?, ?, ?, ?, ?, NULL)",
            (token_hash, grant_id, client_id, brand_id, now, expires_at),
        )

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
        with self._write() as conn:
            self._maybe_purge(conn, now)
            # A token's agent user is its grant's (the grant key never changes), so it is
            # read through the join rather than stored twice.
            token = conn.execute(
                "SELECT t.grant_id, t.client_id, t.brand_id, t.expires_at, t.used_at, g.pa_sub"
                " FROM pactmw_refresh_tokens AS t JOIN pactmw_grants AS g USING (grant_id)"
                " WHERE t.token_hash = ?",
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
            row = conn.execute(_SELECT_GRANT + " WHERE grant_id = ?", (state.grant_id,)).fetchone()
            grant = _grant(row)
            decision = decide_rotation(state, grant, now=now)
            if decision.update == "revoke_grant":
                conn.execute(
                    "UPDATE pactmw_grants SET revoked_at = ? WHERE grant_id = ?",
                    (now, grant.grant_id),
                )
            elif decision.update == "spend":
                conn.execute(
                    "UPDATE pactmw_refresh_tokens SET used_at = ? WHERE token_hash = ?",
                    (now, token_hash),
                )
                self._insert_refresh_token(
                    conn, new_token_hash, grant.grant_id, client_id, brand_id, now, expires_at
                )
            return decision.rotation

    def use_once(self, *, namespace: str, value: str, now: float, expires_at: float) -> bool:
        """Record `value` in `namespace` until `expires_at`; True only the first time."""
        reject_nul(namespace=namespace, value=value)
        with self._write() as conn:
            self._maybe_purge(conn, now)
            if is_unexpired(self._used_until(conn, namespace, value), now):
                return False
            conn.execute(
                "INSERT INTO pactmw_used_values (namespace, value, expires_at) VALUES (?, ?, ?)"
                " ON CONFLICT (namespace, value) DO UPDATE SET expires_at = excluded.expires_at",
                (namespace, value, expires_at),
            )
            return True

    def is_marked(self, *, namespace: str, value: str, now: float) -> bool:
        """Tell whether an unexpired `use_once` record holds `value`; records nothing."""
        with self._read() as conn:
            return is_unexpired(self._used_until(conn, namespace, value), now)

    @staticmethod
    def _used_until(conn: sqlite3.Connection, namespace: str, value: str) -> float | None:
        row = conn.execute(
            "SELECT expires_at FROM pactmw_used_values WHERE namespace = ? AND value = ?",
            (namespace, value),
        ).fetchone()
        return None if row is None else float(row[0])

    def close(self) -> None:
        """Close the connection; later calls raise `StoreUnavailable`."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
