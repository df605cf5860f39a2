"""The Store contract: what every backend guarantees, and the values it returns.

Every operation is atomic on its own and safe to call from many threads; the sqlite and
PostgreSQL backends are also safe across processes and (PostgreSQL) machines. Times are
float epoch seconds passed in by the caller, so tests drive the clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol, runtime_checkable

from attrs import frozen

from pactmw.core.errors import PactmwError

__all__ = [
    "Approval",
    "Claim",
    "ClaimKind",
    "Conversation",
    "DeviceAuthorization",
    "DeviceStatus",
    "Grant",
    "NotFound",
    "Poll",
    "PollKind",
    "Rotation",
    "RotationKind",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "Turn",
    "UserCodeTaken",
]

ClaimKind = Literal["new", "reply", "pending", "conflict"]
DeviceStatus = Literal["pending", "approved", "denied", "consumed"]
PollKind = Literal["unknown", "expired", "denied", "consumed", "slow_down", "pending", "approved"]
RotationKind = Literal["rotated", "unknown", "expired", "reused", "revoked"]

# How long (seconds) expired device authorizations and refresh tokens are kept after they
# expire before an opportunistic purge deletes them: long enough that a late poll still reads
# "expired" and a late replay of a spent refresh token still counts as reuse.
EXPIRED_RETENTION = 86_400.0

# Every this many purging operations (per store object) one also deletes expired rows, so the
# single-use, device-code and refresh-token tables stay bounded without a background job.
PURGE_EVERY = 64


class StoreError(PactmwError):
    """A store operation could not be carried out.

    The base of the store's own exceptions, so a caller can map all of them at once. The
    SQL backends let no driver exception (sqlite3, psycopg) out: a database that cannot be
    reached or used is `StoreUnavailable`, any other database failure a plain `StoreError`.
    """


class StoreUnavailable(StoreError):
    """The backend cannot be reached or used right now (down, locked, closed).

    Callers should answer "try again later" (HTTP 503). If the connection died during a
    commit the write may or may not have happened; the keyed operations make the client's
    retry safe either way. The message never contains a password.
    """


class NotFound(StoreError, LookupError):
    """The conversation (or the claimed message, or the grant) an operation names does not exist."""


class UserCodeTaken(StoreError):
    """The `user_code` belongs to another device authorization that has not expired.

    Draw another code and try again; nothing was stored.
    """


def reject_nul(**values: str) -> None:
    """Raise ValueError if a string to be stored holds a NUL character.

    PostgreSQL text cannot hold NUL, and ids come from clients (JSON allows "\\u0000"), so
    every backend refuses them the same way instead of failing deep in a driver.
    """
    for name, value in values.items():
        if "\x00" in value:
            raise ValueError(f"{name} must not contain NUL characters")


def has_nul(*values: str) -> bool:
    """Tell whether any of the strings holds NUL (so a lookup by it can find nothing)."""
    # One join, not a generator: every lookup calls this, and a generator costs twice as much.
    return "\x00" in "".join(values)


def scope_tuple(name: str, scopes: Iterable[str]) -> tuple[str, ...]:
    """Return `scopes` as a tuple of strings, kept in order; refuse a bare string and NUL.

    A bare string is refused (TypeError) because `tuple("read")` would store four scopes.
    """
    if isinstance(scopes, str):
        raise TypeError(f"{name} must be a sequence of scope strings, not a string")
    result = tuple(scopes)
    for scope in result:
        if not isinstance(scope, str):
            raise TypeError(f"{name} must hold strings, got {type(scope).__name__}")
        if "\x00" in scope:
            raise ValueError(f"{name} must not contain NUL characters")
    return result


def grant_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    """Return the grant form of `scopes`: sorted (by code point) and without duplicates."""
    return tuple(sorted(set(scopes)))


def check_denial(approved: bool, account: str | None) -> str | None:
    """Check a denial's arguments; return the account to store (may be None).

    Shared by every backend so that they refuse the same inputs; see
    `Store.decide_device_authorization`. Approvals are refused: they must go through
    `Store.approve_device_authorization`, which writes the grant in the same transaction.
    """
    if approved:
        raise ValueError(
            "decide_device_authorization records denials only; approve with "
            "approve_device_authorization, which writes the grant atomically"
        )
    if account is not None:
        reject_nul(account=account)
    return account


def check_approval(
    account: str, granted_scopes: Iterable[str], new_grant_id: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Check an approval's arguments; return (granted scopes as given, the grant's form).

    Shared by every backend so that they refuse the same inputs (ValueError, TypeError);
    see `Store.approve_device_authorization`.
    """
    reject_nul(account=account, new_grant_id=new_grant_id)
    granted = scope_tuple("granted_scopes", granted_scopes)
    if not granted:
        raise ValueError("an approval needs at least one scope")
    return granted, grant_scopes(granted)


def check_grant_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    """Check and normalise a grant's scopes: sorted, unique, at least one (else ValueError)."""
    result = grant_scopes(scope_tuple("scopes", scopes))
    if not result:
        raise ValueError("a grant needs at least one scope")
    return result


def check_token_owner(grant: Grant, client_id: str, brand_id: str) -> None:
    """Refuse (ValueError) a refresh token for another client or Brand than its grant's."""
    if (grant.client_id, grant.brand_id) != (client_id, brand_id):
        raise ValueError("a refresh token must belong to its grant's client and Brand")


@frozen
class Conversation:
    """One conversation (`contextId`) and who owns it.

    A conversation continues only for the same `brand_id` and the same `(issuer, sub)`;
    the store records the owner, the caller checks it.
    """

    context_id: str
    brand_id: str
    issuer: str
    sub: str
    created_at: float
    last_activity: float
    closed: bool
    account: str | None


@frozen
class Turn:
    """One answered exchange: the user's message and the agent's reply."""

    message_id: str
    text: str
    reply_message_id: str
    reply_text: str


@frozen
class Claim:
    """The outcome of `Store.claim_message`.

    - `new`: the caller owns the turn; run the bot, then `store_reply` (or `release_claim`).
    - `reply`: answered before; `reply` holds the stored bytes, to be sent back unchanged.
    - `pending`: another worker holds a live claim on this message and has not answered.
    - `conflict`: the message id is the id of an agent reply in this conversation.
    """

    kind: ClaimKind
    reply: bytes | None = None


@frozen
class DeviceAuthorization:
    """One RFC 8628 device authorization request, as the store keeps it.

    Only a hash of the `device_code` is stored (the caller hashes); the `user_code` is kept
    as given (the caller normalizes it). `scopes` are the requested scopes in request order;
    `account`, `granted_scopes` and `grant_id` are set by the user's decision. `pa_sub` is
    the agent user who asked: only that user's token requests can poll the code. Expired
    when `now >= expires_at`.
    """

    device_code_hash: str
    user_code: str
    brand_id: str
    client_id: str
    pa_sub: str
    scopes: tuple[str, ...]
    created_at: float
    expires_at: float
    interval: float
    last_polled_at: float | None
    status: DeviceStatus
    account: str | None
    granted_scopes: tuple[str, ...]
    grant_id: str | None


@frozen
class Poll:
    """The outcome of `Store.poll_device_code` (the device-code grant of the token endpoint).

    - `unknown`: no such code for this client, Brand and agent user (`invalid_grant`);
      `authorization` is None, so nothing about another client's request leaks.
    - `expired` (`expired_token`), `denied` (`access_denied`), `consumed` (`invalid_grant`).
    - `slow_down` / `pending` (`authorization_pending`): the user has not decided yet.
    - `approved`: this caller, and no other, issues the tokens; the authorization is now
      `consumed` and carries the account, granted scopes and grant id.

    `authorization` is the state after the poll (None only for `unknown`).
    """

    kind: PollKind
    authorization: DeviceAuthorization | None = None


@frozen
class Grant:
    """What a user let one personal agent do at one Brand: the delegation behind tokens.

    One live grant per `(brand_id, account, client_id, pa_sub)`. `scopes` are sorted and
    unique. Live while `revoked_at is None and now < expires_at` (see `is_live`).
    """

    grant_id: str
    brand_id: str
    account: str
    client_id: str
    pa_sub: str
    scopes: tuple[str, ...]
    created_at: float
    updated_at: float
    expires_at: float
    revoked_at: float | None

    def is_live(self, now: float) -> bool:
        """Tell whether the grant may be used at `now` (not revoked, not expired)."""
        return self.revoked_at is None and now < self.expires_at


@frozen
class Approval:
    """The outcome of a successful `Store.approve_device_authorization`.

    `authorization` is now `approved` and names `grant`: the live grant of the key after the
    approval (a new one, or the existing live one widened by the granted scopes).
    """

    authorization: DeviceAuthorization
    grant: Grant


@frozen
class Rotation:
    """The outcome of `Store.rotate_refresh_token`.

    - `rotated`: the old token is spent, the new one is stored; issue tokens for `grant`.
    - `unknown`: no such token for this client, Brand and agent user (nothing changed,
      nothing leaks: `grant` is None).
    - `reused`: the token was spent before, so the whole grant is now revoked.
    - `expired`: the token itself expired. `revoked`: its grant is revoked or expired.

    Every kind but `rotated` maps to `invalid_grant`. `grant` is the state after the call.
    """

    kind: RotationKind
    grant: Grant | None = None


@runtime_checkable
class Store(Protocol):
    """Persistent state of a Provider, with atomic operations named for their guarantee.

    Implementations: `MemoryStore` (one process), `SqliteStore` (one machine, many
    processes), `PostgresStore` (many machines). All share one behaviour, proven by the
    same contract tests. Operations that write refuse any string holding NUL with
    `ValueError`; lookups by an id holding NUL find nothing.
    """

    def create_conversation(self, *, brand_id: str, issuer: str, sub: str, now: float) -> str:
        """Mint a new conversation owned by `(brand_id, issuer, sub)`; return its id.

        The id is a random UUID4 string; the conversation starts open and unbound.
        """
        ...

    def get_conversation(self, context_id: str) -> Conversation | None:
        """Return the conversation, or None if the id is unknown (any string is accepted)."""
        ...

    def close_conversation(self, context_id: str) -> None:
        """Mark the conversation closed; unknown ids are ignored (closing is idempotent)."""
        ...

    def bind_account(self, context_id: str, account: str) -> str:
        """Bind `account` to the conversation if none is bound; return the account bound now.

        The result may be another account bound earlier: the caller compares. Exactly one
        of several concurrent callers wins. Raises `NotFound` for an unknown conversation.
        """
        ...

    def claim_message(
        self, *, context_id: str, message_id: str, text: str, now: float, lease_seconds: float
    ) -> Claim:
        """Atomically decide who answers the user message `message_id`; see `Claim`.

        A claim without a reply older than `lease_seconds` (its worker died) is taken over:
        the taker gets `new` and a fresh lease. Exactly one of several concurrent callers
        gets `new`. Raises `NotFound` for an unknown conversation.
        """
        ...

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
        """Store the reply to a claimed user message, in one transaction.

        The first reply stored wins: a second `store_reply` for the same message (a worker
        whose lease was taken over) is ignored, so retries stay byte-identical. Raises
        `NotFound` when the message was never claimed (or was released), `ValueError` when
        `reply_message_id` is already an agent message id in the conversation.
        """
        ...

    def release_claim(self, *, context_id: str, message_id: str) -> None:
        """Drop an unanswered claim (the bot failed) so a retry runs the bot again.

        Answered messages and unknown ids are left alone.
        """
        ...

    def history(self, context_id: str, *, limit: int = 50) -> list[Turn]:
        """Return the last `limit` answered turns, oldest first.

        Turns are in the order their user messages were claimed (a takeover keeps the
        message's place; a released and re-claimed one moves to the end). Unanswered claims
        are left out. An unknown conversation has an empty history.
        """
        ...

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        """Persist an enable/disable override for the personal agent `issuer`."""
        ...

    def agent_enabled(self, issuer: str) -> bool | None:
        """Return the override for `issuer`, or None when there is none (use the config)."""
        ...

    # --- device authorizations (RFC 8628) --------------------------------------------------

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
        """Store a new `pending` device authorization.

        `user_code` is unique among unexpired authorizations: when another one holds it,
        raise `UserCodeTaken` so the caller draws another code. An expired holder of the code
        is deleted to free it (a poll of its device code then reads `unknown`). A
        `device_code_hash` already stored raises ValueError. Authorizations expired longer
        than a day are purged now and then.
        """
        ...

    def device_authorization_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        """Return the authorization holding `user_code` in any state, expired or not, or None.

        The caller checks status and expiry; the code is matched exactly as stored.
        """
        ...

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
        """Record the user's denial of a `pending`, unexpired authorization; return it.

        Denials only: `approved=True` raises ValueError, since an approval must write its
        grant in the same transaction (`approve_device_authorization`). Records `account`
        (may be None) and ignores `granted_scopes` and `grant_id`. Returns None, changing
        nothing, when the code is unknown, expired or already decided: of several concurrent
        deciders (denials and approvals) exactly one wins.
        """
        ...

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
        """Approve a `pending`, unexpired authorization of `brand_id` and grant it, atomically.

        In one transaction: the grant of `(brand_id, account, client_id, pa_sub)` (the last
        two from the authorization) is created under `new_grant_id` or widened exactly as
        `upsert_grant` does (scope union, later expiry, never reviving a revoked or expired
        grant), and the authorization turns `approved` with `account`, `granted_scopes` (kept
        as given) and the grant's id. Returns both.

        Returns None and changes NOTHING (no grant written or widened) when the code is
        unknown, belongs to another Brand, is expired or was already decided: of concurrent
        approvals and denials of one code exactly one wins, and a losing approval leaves the
        grants as they were. Empty `granted_scopes` raise ValueError, and so does a
        `new_grant_id` already used when a new grant is needed (nothing changes then either).
        """
        ...

    def poll_device_code(
        self, *, device_code_hash: str, client_id: str, brand_id: str, pa_sub: str, now: float
    ) -> Poll:
        """Answer one device-code token request, atomically; see `Poll`.

        Checked in order: unknown (or issued to another client, Brand or agent user
        `pa_sub`: then nothing changes, not even `last_polled_at`), expired, denied,
        consumed; pending records `last_polled_at = now` and reads `slow_down` when the
        previous poll was less than `interval` seconds before, else `pending`; approved
        turns `consumed`. Of concurrent polls of an approved code exactly one reads
        `approved`, the others `consumed`.
        """
        ...

    # --- grants ------------------------------------------------------------------------------

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
        """Create the live grant of `(brand_id, account, client_id, pa_sub)` or widen it.

        If the key has a live grant, its scopes become the union with `scopes`, its expiry
        the later of the two, `updated_at` becomes `now`, and it keeps its id (`grant_id` is
        unused). Otherwise a new grant is inserted under `grant_id`: a revoked or expired
        grant is never revived (an expired one still unrevoked is retired with
        `revoked_at = now`). Concurrent upserts of one key end in one live grant holding the
        union of their scopes. Empty `scopes` raise ValueError; a `grant_id` already used
        raises ValueError.
        """
        ...

    def get_grant(self, grant_id: str) -> Grant | None:
        """Return the grant in any state, or None if the id is unknown."""
        ...

    def live_grant(
        self, *, brand_id: str, account: str, client_id: str, pa_sub: str, now: float
    ) -> Grant | None:
        """Return the live grant of the key at `now`, or None."""
        ...

    def revoke_grant(self, grant_id: str, *, now: float) -> bool:
        """Revoke the grant (`revoked_at = now`); True if it was live, else False (no change)."""
        ...

    def revoke_account_grants(
        self, account: str, *, now: float, brand_id: str | None = None
    ) -> list[str]:
        """Revoke every live grant of `account` (at one Brand only, if given).

        For "sign out everywhere", password resets and account deletion. Returns the ids
        revoked, newest grant first.
        """
        ...

    def list_grants(
        self,
        *,
        brand_id: str | None = None,
        account: str | None = None,
        include_inactive: bool = False,
        now: float,
    ) -> list[Grant]:
        """Return the grants matching the filters, newest (`created_at`) first.

        Live ones only unless `include_inactive` (then revoked and expired ones too).
        """
        ...

    # --- refresh tokens ----------------------------------------------------------------------

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
        """Store a new, unused refresh token (only its hash) for the grant.

        Raises `NotFound` for an unknown grant, ValueError when `client_id` or `brand_id`
        differ from the grant's or the hash is already stored.
        """
        ...

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
        """Spend a refresh token and store its successor, atomically; see `Rotation`.

        Checked in order: unknown hash, or issued to another client, Brand or agent user
        (`pa_sub`, the grant's: a token belongs to its grant's agent user) gives `unknown`;
        the token is not spent, nothing is revoked, so nobody can burn another's token and a
        mismatch never counts as reuse; already spent
        (`reused`: the whole grant is revoked, RFC 9700 §4.14, which kills the successor
        tokens too); token expired (`expired`); grant not live (`revoked`). Otherwise the
        token is marked used at `now`, `new_token_hash` is stored for the same grant with
        `expires_at`, and the result is `rotated`.

        Of concurrent rotations of one token exactly one is `rotated`; every other one is
        `reused` and therefore revokes the grant, the winner's new token included. That is
        deliberate: a second presentation of a refresh token cannot be told apart from a
        thief's replay, so a client must never send one refresh token twice at once (retry
        a failed refresh only after its first attempt has surely failed).
        """
        ...

    # --- single-use values -------------------------------------------------------------------

    def use_once(self, *, namespace: str, value: str, now: float, expires_at: float) -> bool:
        """Record `value` in `namespace` until `expires_at`; True only the first time.

        For single-use ids (a Brand login assertion's `jti`, a proof's `jti`): True when
        `(namespace, value)` was not seen, or its record expired (`now >= expires_at` of the
        record); False while an earlier record is unexpired. Of concurrent callers exactly one
        gets True. Expired records are purged now and then, so the table stays bounded.
        """
        ...

    def is_marked(self, *, namespace: str, value: str, now: float) -> bool:
        """Tell whether `use_once` recorded `value` in `namespace` and the record is unexpired.

        A pure read: nothing is recorded or renewed. True exactly when `use_once` would now
        return False. A value holding NUL was never recorded (False).
        """
        ...

    def close(self) -> None:
        """Release connections; later calls raise `StoreUnavailable`. Idempotent."""
        ...
