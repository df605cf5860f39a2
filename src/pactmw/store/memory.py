"""An in-process Store: dicts behind one lock.

For tests, demos and single-process apps. Nothing survives a restart, and two processes
(gunicorn workers) each see their own state, so idempotent retries are per process.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterable

from attrs import define, evolve, frozen

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
    Grant,
    NotFound,
    Poll,
    Rotation,
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

__all__ = ["MemoryStore"]


@frozen
class _Message:
    """A user message and, once answered, its reply."""

    text: str
    claimed_at: float
    reply_message_id: str | None = None
    reply_text: str | None = None
    reply: bytes | None = None


@define
class _Context:
    """Everything held for one conversation.

    `messages` keeps insertion order, which is the history order.
    """

    conversation: Conversation
    messages: dict[str, _Message]
    agent_message_ids: set[str]


@frozen
class _RefreshToken:
    grant_id: str
    client_id: str
    brand_id: str
    expires_at: float
    used_at: float | None = None


_GrantKey = tuple[str, str, str, str]


class MemoryStore:
    """A thread-safe Store held in this process's memory; see the module docstring."""

    def __init__(self) -> None:
        # One lock for everything: operations are a few dict lookups, so finer locking
        # would buy nothing and make the atomicity of claim_message harder to see.
        self._lock = threading.Lock()
        self._contexts: dict[str, _Context] = {}
        self._agents: dict[str, bool] = {}
        self._devices: dict[str, DeviceAuthorization] = {}  # by device_code_hash
        self._user_codes: dict[str, str] = {}  # user_code -> device_code_hash
        self._grants: dict[str, Grant] = {}  # insertion order = creation order
        self._unrevoked: dict[_GrantKey, str] = {}  # key -> its one unrevoked grant id
        self._refresh: dict[str, _RefreshToken] = {}
        self._used: dict[tuple[str, str], float] = {}  # (namespace, value) -> expires_at
        self._ops = itertools.count()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable("the memory store is closed")

    def _context(self, context_id: str) -> _Context:
        ctx = self._contexts.get(context_id)
        if ctx is None:
            raise NotFound(f"unknown conversation {context_id!r}")
        return ctx

    def create_conversation(self, *, brand_id: str, issuer: str, sub: str, now: float) -> str:
        """Mint a new conversation owned by `(brand_id, issuer, sub)`; return its id."""
        reject_nul(brand_id=brand_id, issuer=issuer, sub=sub)
        context_id = str(uuid.uuid4())
        conversation = Conversation(
            context_id=context_id,
            brand_id=brand_id,
            issuer=issuer,
            sub=sub,
            created_at=now,
            last_activity=now,
            closed=False,
            account=None,
        )
        with self._lock:
            self._check_open()
            self._contexts[context_id] = _Context(conversation, {}, set())
        return context_id

    def get_conversation(self, context_id: str) -> Conversation | None:
        """Return the conversation, or None if the id is unknown."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            return None if ctx is None else ctx.conversation

    def close_conversation(self, context_id: str) -> None:
        """Mark the conversation closed; unknown ids are ignored."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            if ctx is not None:
                ctx.conversation = evolve(ctx.conversation, closed=True)

    def bind_account(self, context_id: str, account: str) -> str:
        """Bind `account` if none is bound; return the account bound now."""
        reject_nul(context_id=context_id, account=account)
        with self._lock:
            self._check_open()
            ctx = self._context(context_id)
            if ctx.conversation.account is None:
                ctx.conversation = evolve(ctx.conversation, account=account)
            assert ctx.conversation.account is not None
            return ctx.conversation.account

    def claim_message(
        self, *, context_id: str, message_id: str, text: str, now: float, lease_seconds: float
    ) -> Claim:
        """Atomically decide who answers the user message `message_id`; see `Claim`."""
        reject_nul(context_id=context_id, message_id=message_id, text=text)
        with self._lock:
            self._check_open()
            ctx = self._context(context_id)
            message = ctx.messages.get(message_id)
            decision = decide_claim(
                None if message is None else ClaimedMessage(message.claimed_at, message.reply),
                is_reply_id=message_id in ctx.agent_message_ids,
                now=now,
                lease_seconds=lease_seconds,
            )
            if decision.write == "insert":
                ctx.messages[message_id] = _Message(text=text, claimed_at=now)
            elif decision.write == "take_over":
                # Keep the message's place in the history.
                assert message is not None
                ctx.messages[message_id] = evolve(message, text=text, claimed_at=now)
            if decision.write is not None:
                ctx.conversation = evolve(ctx.conversation, last_activity=now)
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
        with self._lock:
            self._check_open()
            ctx = self._context(context_id)
            message = ctx.messages.get(message_id)
            if message is None:
                raise NotFound(f"message {message_id!r} was not claimed in {context_id!r}")
            if message.reply is not None:
                return
            if reply_message_id in ctx.agent_message_ids:
                raise ValueError(f"reply message id {reply_message_id!r} is already used")
            ctx.messages[message_id] = evolve(
                message,
                reply_message_id=reply_message_id,
                reply_text=reply_text,
                reply=bytes(reply),
            )
            ctx.agent_message_ids.add(reply_message_id)
            ctx.conversation = evolve(ctx.conversation, last_activity=now)

    def release_claim(self, *, context_id: str, message_id: str) -> None:
        """Drop an unanswered claim so a retry runs the bot again."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            if ctx is None:
                return
            message = ctx.messages.get(message_id)
            if message is not None and message.reply is None:
                del ctx.messages[message_id]

    def history(self, context_id: str, *, limit: int = 50) -> list[Turn]:
        """Return the last `limit` answered turns, oldest first."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            if ctx is None or limit <= 0:
                return []
            turns = [
                Turn(
                    message_id=message_id,
                    text=m.text,
                    reply_message_id=m.reply_message_id,
                    reply_text=m.reply_text,
                )
                for message_id, m in ctx.messages.items()
                if m.reply_message_id is not None and m.reply_text is not None
            ]
            return turns[-limit:]

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        """Persist (in memory) an enable/disable override for `issuer`."""
        reject_nul(issuer=issuer)
        with self._lock:
            self._check_open()
            self._agents[issuer] = enabled

    def agent_enabled(self, issuer: str) -> bool | None:
        """Return the override for `issuer`, or None when there is none."""
        with self._lock:
            self._check_open()
            return self._agents.get(issuer)

    # --- delegation state ---------------------------------------------------------------------

    def _maybe_purge(self, now: float) -> None:
        # Called with the lock held. Only every PURGE_EVERY-th call scans, as the SQL
        # backends do, so the cost is spread thin.
        if next(self._ops) % PURGE_EVERY:
            return
        for key in [k for k, exp in self._used.items() if exp <= now]:
            del self._used[key]
        horizon = now - EXPIRED_RETENTION
        for code_hash in [h for h, d in self._devices.items() if d.expires_at <= horizon]:
            self._drop_device(code_hash)
        for token in [t for t, r in self._refresh.items() if r.expires_at <= horizon]:
            del self._refresh[token]

    def _drop_device(self, code_hash: str) -> None:
        device = self._devices.pop(code_hash)
        if self._user_codes.get(device.user_code) == code_hash:
            del self._user_codes[device.user_code]

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
        device = DeviceAuthorization(
            device_code_hash=device_code_hash,
            user_code=user_code,
            brand_id=brand_id,
            client_id=client_id,
            pa_sub=pa_sub,
            scopes=scope_tuple("scopes", scopes),
            created_at=now,
            expires_at=expires_at,
            interval=float(interval),
            last_polled_at=None,
            status="pending",
            account=None,
            granted_scopes=(),
            grant_id=None,
        )
        with self._lock:
            self._check_open()
            self._maybe_purge(now)
            holder = self._user_codes.get(user_code)
            if holder is not None and now < self._devices[holder].expires_at:
                raise UserCodeTaken(f"user code {user_code!r} is in use")
            if device_code_hash in self._devices:
                raise ValueError("device code hash is already stored")
            if holder is not None:
                self._drop_device(holder)
            self._devices[device_code_hash] = device
            self._user_codes[user_code] = device_code_hash

    def device_authorization_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        """Return the authorization holding `user_code`, or None."""
        with self._lock:
            self._check_open()
            code_hash = self._user_codes.get(user_code)
            return None if code_hash is None else self._devices[code_hash]

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
        with self._lock:
            self._check_open()
            device = self._pending_device(user_code, now)
            if device is None:
                return None
            device = denied_device(device, account)
            self._devices[device.device_code_hash] = device
            return device

    def _pending_device(
        self, user_code: str, now: float, brand_id: str | None = None
    ) -> DeviceAuthorization | None:
        # Called with the lock held: the authorization holding the code, if still decidable.
        code_hash = self._user_codes.get(user_code)
        device = None if code_hash is None else self._devices[code_hash]
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
        """Approve a pending authorization and create or widen its grant, atomically."""
        granted, wanted = check_approval(account, granted_scopes, new_grant_id)
        with self._lock:
            self._check_open()
            device = self._pending_device(user_code, now, brand_id)
            if device is None:
                return None
            # _upsert raises before changing anything, so a refusal leaves the code pending.
            grant = self._upsert(
                new_grant_id,
                (brand_id, account, device.client_id, device.pa_sub),
                wanted,
                now,
                grant_expires_at,
            )
            device = approved_device(
                device, account=account, granted=granted, grant_id=grant.grant_id
            )
            self._devices[device.device_code_hash] = device
            return Approval(authorization=device, grant=grant)

    def poll_device_code(
        self, *, device_code_hash: str, client_id: str, brand_id: str, pa_sub: str, now: float
    ) -> Poll:
        """Answer one device-code token request, atomically; see `Store`."""
        with self._lock:
            self._check_open()
            decision = decide_poll(
                self._devices.get(device_code_hash),
                client_id=client_id,
                brand_id=brand_id,
                pa_sub=pa_sub,
                now=now,
            )
            if decision.update is not None:
                assert decision.poll.authorization is not None
                self._devices[device_code_hash] = decision.poll.authorization
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
        with self._lock:
            self._check_open()
            return self._upsert(
                grant_id, (brand_id, account, client_id, pa_sub), wanted, now, expires_at
            )

    def _upsert(
        self,
        grant_id: str,
        key: _GrantKey,
        wanted: tuple[str, ...],
        now: float,
        expires_at: float,
    ) -> Grant:
        # Called with the lock held; raises (ValueError) before changing anything.
        current_id = self._unrevoked.get(key)
        decision = decide_upsert(
            None if current_id is None else self._grants[current_id],
            grant_id=grant_id,
            key=key,
            wanted=wanted,
            now=now,
            expires_at=expires_at,
        )
        if decision.kind == "widen":
            self._grants[decision.grant.grant_id] = decision.grant
            return decision.grant
        if grant_id in self._grants:
            raise ValueError(f"grant id {grant_id!r} is already used")
        if decision.retire is not None:
            self._grants[decision.retire] = evolve(self._grants[decision.retire], revoked_at=now)
        self._grants[grant_id] = decision.grant
        self._unrevoked[key] = grant_id
        return decision.grant

    def get_grant(self, grant_id: str) -> Grant | None:
        """Return the grant in any state, or None."""
        with self._lock:
            self._check_open()
            return self._grants.get(grant_id)

    def live_grant(
        self, *, brand_id: str, account: str, client_id: str, pa_sub: str, now: float
    ) -> Grant | None:
        """Return the live grant of the key at `now`, or None."""
        with self._lock:
            self._check_open()
            grant_id = self._unrevoked.get((brand_id, account, client_id, pa_sub))
            if grant_id is None:
                return None
            grant = self._grants[grant_id]
            return grant if grant.is_live(now) else None

    def _revoke(self, grant: Grant, now: float) -> None:
        self._grants[grant.grant_id] = evolve(grant, revoked_at=now)
        key = (grant.brand_id, grant.account, grant.client_id, grant.pa_sub)
        if self._unrevoked.get(key) == grant.grant_id:
            del self._unrevoked[key]

    def revoke_grant(self, grant_id: str, *, now: float) -> bool:
        """Revoke the grant; True if it was live."""
        with self._lock:
            self._check_open()
            grant = self._grants.get(grant_id)
            if grant is None or not grant.is_live(now):
                return False
            self._revoke(grant, now)
            return True

    def revoke_account_grants(
        self, account: str, *, now: float, brand_id: str | None = None
    ) -> list[str]:
        """Revoke every live grant of `account` (at one Brand, if given); return their ids."""
        with self._lock:
            self._check_open()
            doomed = [
                g
                for g in self._grants.values()
                if g.account == account
                and (brand_id is None or g.brand_id == brand_id)
                and g.is_live(now)
            ]
            for grant in doomed:
                self._revoke(grant, now)
            return [g.grant_id for g in _newest_first(doomed)]

    def list_grants(
        self,
        *,
        brand_id: str | None = None,
        account: str | None = None,
        include_inactive: bool = False,
        now: float,
    ) -> list[Grant]:
        """Return the matching grants, newest first; live ones only unless asked."""
        with self._lock:
            self._check_open()
            return _newest_first(
                g
                for g in self._grants.values()
                if (brand_id is None or g.brand_id == brand_id)
                and (account is None or g.account == account)
                and (include_inactive or g.is_live(now))
            )

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
        with self._lock:
            self._check_open()
            grant = self._grants.get(grant_id)
            if grant is None:
                raise NotFound(f"unknown grant {grant_id!r}")
            check_token_owner(grant, client_id, brand_id)
            if token_hash in self._refresh:
                raise ValueError("refresh token hash is already stored")
            self._refresh[token_hash] = _RefreshToken(grant_id, client_id, brand_id, expires_at)

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
        with self._lock:
            self._check_open()
            self._maybe_purge(now)
            token = self._refresh.get(token_hash)
            state = None
            if token is not None:
                state = RefreshTokenState(
                    grant_id=token.grant_id,
                    client_id=token.client_id,
                    brand_id=token.brand_id,
                    pa_sub=self._grants[token.grant_id].pa_sub,
                    expires_at=token.expires_at,
                    used_at=token.used_at,
                )
            if (
                token is None
                or state is None
                or not token_belongs(state, client_id=client_id, brand_id=brand_id, pa_sub=pa_sub)
            ):
                return Rotation(kind="unknown")
            grant = self._grants[token.grant_id]
            decision = decide_rotation(state, grant, now=now)
            if decision.update == "revoke_grant":
                self._revoke(grant, now)
            elif decision.update == "spend":
                if new_token_hash in self._refresh:
                    raise ValueError("new refresh token hash is already stored")
                self._refresh[token_hash] = evolve(token, used_at=now)
                self._refresh[new_token_hash] = _RefreshToken(
                    grant.grant_id, client_id, brand_id, expires_at
                )
            return decision.rotation

    def use_once(self, *, namespace: str, value: str, now: float, expires_at: float) -> bool:
        """Record `value` in `namespace` until `expires_at`; True only the first time."""
        reject_nul(namespace=namespace, value=value)
        with self._lock:
            self._check_open()
            self._maybe_purge(now)
            if is_unexpired(self._used.get((namespace, value)), now):
                return False
            self._used[(namespace, value)] = expires_at
            return True

    def is_marked(self, *, namespace: str, value: str, now: float) -> bool:
        """Tell whether an unexpired `use_once` record holds `value`; records nothing."""
        with self._lock:
            self._check_open()
            return is_unexpired(self._used.get((namespace, value)), now)

    def close(self) -> None:
        """Drop all state; later calls raise `StoreUnavailable`."""
        with self._lock:
            self._closed = True
            self._contexts.clear()
            self._agents.clear()
            self._devices.clear()
            self._user_codes.clear()
            self._grants.clear()
            self._unrevoked.clear()
            self._refresh.clear()
            self._used.clear()


def _newest_first(grants: Iterable[Grant]) -> list[Grant]:
    # The SQL backends order the same way: created_at, then id by code point, descending.
    return sorted(grants, key=lambda g: (g.created_at, g.grant_id), reverse=True)
