"""What every memory store operation stands on: the state, its one lock and the purge.

The operations live in per-concern mixins over `MemoryCore` (as the SQL stores' do over
`SqlCore`); each runs under `with self._open:` (the lock, held only while the store is
open), then reads and writes the dicts below.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from attrs import define, evolve, frozen

from pactmw.core import _fork
from pactmw.store._decisions import RefreshTokenState
from pactmw.store._protocols.account_tokens import AccountToken
from pactmw.store._protocols.grants import GrantKey
from pactmw.store._protocols.operations import RememberedAnswer, StoredOperation
from pactmw.store._protocols.sessions import PoppySession
from pactmw.store.base import (
    EXPIRED_RETENTION,
    MAX_REFRESH_REUSE_INTERVAL,
    PURGE_EVERY,
    Conversation,
    DeviceAuthorization,
    Grant,
    StoredAgent,
    StoreUnavailable,
)

__all__ = ["Context", "MemoryCore", "SpendableToken", "StoredMessage", "drop_where"]

K = TypeVar("K")
V = TypeVar("V")


def drop_where(entries: dict[K, V], gone: Callable[[V], bool]) -> int:
    """Delete the entries whose value is `gone`; how many went."""
    keys = [key for key, value in entries.items() if gone(value)]
    for key in keys:
        del entries[key]
    return len(keys)


class SpendableToken(Protocol):
    """A token of a grant that is spent once (a refresh token, an Account Token)."""

    @property
    def grant_id(self) -> str: ...

    @property
    def expires_at(self) -> float: ...

    @property
    def used_at(self) -> float | None: ...


@frozen
class StoredMessage:
    """A user message and, once answered, its reply."""

    text: str
    claimed_at: float
    reply_message_id: str | None = None
    reply_text: str | None = None
    reply: bytes | None = None


@define
class Context:
    """Everything held for one conversation.

    `messages` keeps insertion order, which is the history order.
    """

    conversation: Conversation
    messages: dict[str, StoredMessage]
    agent_message_ids: set[str]


class _OpenLock:
    """`with core._open:`: hold the store's lock for one operation, or raise
    `StoreUnavailable` (the lock released) once the store is closed.

    Every operation runs under it, on the hot path: one is built per store and reused, as it
    keeps no per-call state (the lock is that state), and it costs about one function call
    more than a bare `with lock:`. A `contextlib.contextmanager` would cost ~0.9 µs a call.
    """

    __slots__ = ("_core",)

    def __init__(self, core: MemoryCore) -> None:
        self._core = core

    def __enter__(self) -> None:
        core = self._core
        core._lock.acquire()
        if core._closed:
            core._lock.release()
            raise StoreUnavailable("the memory store is closed")

    def __exit__(self, *exc_info: object) -> None:
        self._core._lock.release()


class MemoryCore:
    """The state, lock and shared helpers of the memory store's operation mixins."""

    def __init__(self) -> None:
        # One lock for everything: operations are a few dict lookups, so finer locking
        # would buy nothing and make the atomicity of claim_message harder to see. It is not
        # reentrant: under it an operation calls lock-free helpers only, never another one.
        self._lock = threading.Lock()
        self._open = _OpenLock(self)
        self._contexts: dict[str, Context] = {}
        # (brand_id, issuer, sub, message id) -> the conversation holding it (Poppy's
        # message ids are the owner's across conversations: `claim_message_id`).
        self._message_ids: dict[tuple[str, str, str, str], str] = {}
        self._overrides: dict[str, bool] = {}  # issuer -> enabled
        self._runtime_agents: dict[str, StoredAgent] = {}  # by issuer
        self._devices: dict[str, DeviceAuthorization] = {}  # by device_code_hash
        self._user_codes: dict[str, str] = {}  # user_code -> device_code_hash
        self._grants: dict[str, Grant] = {}  # insertion order = creation order
        self._unrevoked: dict[GrantKey, str] = {}  # key -> its one unrevoked grant id
        self._refresh: dict[str, RefreshTokenState] = {}  # by token hash
        self._used: dict[tuple[str, str], float] = {}  # (namespace, value) -> expires_at
        # key -> (window_start, window_end, count) of its current window
        self._rate_counts: dict[str, tuple[float, float, int]] = {}
        # Poppy: Sessions by id, token hash -> session id, session id -> its live token hash,
        # and Account Tokens by hash.
        self._sessions: dict[str, PoppySession] = {}
        self._session_tokens: dict[str, str] = {}
        self._live_token: dict[str, str] = {}
        self._account_tokens: dict[str, AccountToken] = {}
        # Poppy operations by id, open_key -> the open one's id, and Idempotency-Key answers
        # by record key.
        self._operations: dict[str, StoredOperation] = {}
        self._open_operations: dict[str, str] = {}
        self._answers: dict[str, RememberedAnswer] = {}
        self._ops = itertools.count()
        self._closed = False
        _fork.hold_across_fork(self)

    def _forking(self) -> None:
        """Just before a fork: wait for the operation in progress, so that the child gets
        whole state and a lock no thread of its holds (the lock is held until `_forked`)."""
        self._lock.acquire()

    def _forked(self) -> None:
        self._lock.release()

    def _maybe_purge(self, now: float) -> None:
        # Called with the lock held. Only every PURGE_EVERY-th call scans, as the SQL
        # backends do, so the cost is spread thin.
        if next(self._ops) % PURGE_EVERY:
            return
        drop_where(self._used, lambda expires_at: expires_at <= now)
        horizon = now - EXPIRED_RETENTION
        self._drop_expired_devices(horizon)
        drop_where(self._refresh, lambda token: token.expires_at <= horizon)
        self._clear_successors(now - MAX_REFRESH_REUSE_INTERVAL)

    def _clear_successors(self, spent_before: float, grant_id: str | None = None) -> None:
        # Sealed answers are kept for the reuse interval only.
        for token_hash, token in list(self._refresh.items()):
            if (
                token.successor is not None
                and token.used_at is not None
                and token.used_at <= spent_before
                and (grant_id is None or token.grant_id == grant_id)
            ):
                self._refresh[token_hash] = evolve(token, successor=None)

    def _is_dead(self, token: SpendableToken, now: float) -> bool:
        # The refresh-token rule, for refresh and Account Tokens alike: a token goes with its
        # grant (revoked or expired), and an unspent one once expired; a spent token of a
        # live grant stays, since replaying it is how a theft is detected.
        grant_live = self._grants[token.grant_id].is_live(now)
        return not grant_live or (token.used_at is None and token.expires_at <= now)

    def _drop_expired_devices(self, expired_by: float) -> int:
        # Called with the lock held: the device authorizations expired by `expired_by`, how
        # many (the opportunistic purge's horizon, or the operator's cleanup's now).
        expired = [h for h, d in self._devices.items() if d.expires_at <= expired_by]
        for code_hash in expired:
            self._drop_device(code_hash)
        return len(expired)

    def _drop_device(self, code_hash: str) -> None:
        device = self._devices.pop(code_hash)
        if self._user_codes.get(device.user_code) == code_hash:
            del self._user_codes[device.user_code]

    def _revoke(self, grant: Grant, now: float) -> None:
        # Called with the lock held (by grant revocations and by refresh-token reuse).
        self._grants[grant.grant_id] = evolve(grant, revoked_at=now)
        key = (grant.brand_id, grant.account, grant.client_id, grant.pa_sub)
        if self._unrevoked.get(key) == grant.grant_id:
            del self._unrevoked[key]

    def close(self) -> None:
        """Drop all state; later calls raise `StoreUnavailable`."""
        # The bare lock, not `_open`: closing a closed store is allowed (and does nothing new).
        with self._lock:
            self._closed = True
            self._contexts.clear()
            self._message_ids.clear()
            self._overrides.clear()
            self._runtime_agents.clear()
            self._devices.clear()
            self._user_codes.clear()
            self._grants.clear()
            self._unrevoked.clear()
            self._refresh.clear()
            self._used.clear()
            self._rate_counts.clear()
            self._sessions.clear()
            self._session_tokens.clear()
            self._live_token.clear()
            self._account_tokens.clear()
            self._operations.clear()
            self._open_operations.clear()
            self._answers.clear()
