"""The backend-independent decisions of the Store operations: pure functions, no I/O.

Each backend reads the rows an operation decides on (under its own locks: the memory
store's lock, sqlite's `BEGIN IMMEDIATE`, PostgreSQL's row and advisory locks), hands them
here as frozen values, and applies the returned decision: what to answer and which write,
if any, to make. So the three backends differ only in how they read, lock and write.
"""

from __future__ import annotations

from typing import Literal

from attrs import evolve, frozen

from pactmw.store._protocols.devices import DevicePoll
from pactmw.store._protocols.grants import GrantKey
from pactmw.store.base import (
    MAX_REFRESH_REUSE_INTERVAL,
    Claim,
    DeviceAuthorization,
    Grant,
    Poll,
    Rotation,
    check_binding,
    grant_scopes,
)

__all__ = [
    "ClaimDecision",
    "ClaimWrite",
    "ClaimedMessage",
    "PollDecision",
    "PollUpdate",
    "RefreshTokenState",
    "RotationDecision",
    "RotationUpdate",
    "UpsertDecision",
    "approved_device",
    "binding",
    "decide_claim",
    "decide_poll",
    "decide_rotation",
    "decide_upsert",
    "denied_device",
    "is_decidable",
    "is_unexpired",
    "token_belongs",
]

# --- claim_message -----------------------------------------------------------------------------

ClaimWrite = Literal["insert", "take_over"]


@frozen
class ClaimedMessage:
    """What a claim decision needs of an already claimed user message."""

    claimed_at: float
    reply: bytes | None


@frozen
class ClaimDecision:
    """The answer of `claim_message` and the write it needs.

    `write` is `insert` (a new claim), `take_over` (a stale claim gets the new text and a
    fresh lease, keeping its place) or None (nothing changes). Both writes also record the
    conversation's `last_activity = now`.
    """

    claim: Claim
    write: ClaimWrite | None = None


def decide_claim(
    message: ClaimedMessage | None, *, is_reply_id: bool, now: float, lease_seconds: float
) -> ClaimDecision:
    """Decide a claim of a user message: `message` is its claim so far, if any, and
    `is_reply_id` whether its id is an agent reply's id in the conversation."""
    if is_reply_id:
        return ClaimDecision(Claim(kind="conflict"))
    if message is None:
        return ClaimDecision(Claim(kind="new"), write="insert")
    if message.reply is not None:
        return ClaimDecision(Claim(kind="reply", reply=bytes(message.reply)))
    if now - message.claimed_at < lease_seconds:
        return ClaimDecision(Claim(kind="pending"))
    # Stale claim: its worker died.
    return ClaimDecision(Claim(kind="new"), write="take_over")


# --- device authorizations ---------------------------------------------------------------------

PollUpdate = Literal["touch", "consume", "bind"]


@frozen
class PollDecision:
    """The answer of `poll_device_code` and the write it needs.

    `update` is `touch` (store `last_polled_at = now`), `consume` (`status = 'consumed'`),
    `bind` (an authorization approved without a user: in one transaction write the grant of
    `(brand_id, account, client_id, pa_sub)` as `upsert_grant` does, then store it
    `consumed` with the polling user as `pa_sub` and the grant's id) or None (nothing
    changes). When set, `poll.authorization` is the state to store (for `bind`, all but the
    grant id, which the grant write decides).
    """

    poll: Poll
    update: PollUpdate | None = None


def decide_poll(device: DeviceAuthorization | None, poll: DevicePoll) -> PollDecision:
    """Decide one device-code poll, in the order `Store.poll_device_code` documents.

    An authorization made without a user (`pa_sub` None, Poppy) is polled by any user of
    its client and Brand through a poll that can bind it (it brings `new_grant_id` for the
    grant; any other poll, PACT's, finds nothing), and the poll that collects it binds that
    user; `session_account` is the account the polling Session was ever signed in to, which
    the approval must match (else `account_mismatch`, nothing changes)."""
    client_id, brand_id, pa_sub, now = poll.client_id, poll.brand_id, poll.pa_sub, poll.now
    can_bind = poll.new_grant_id is not None
    session_account = poll.session_account
    if (
        device is None
        or (device.client_id, device.brand_id) != (client_id, brand_id)
        or (device.pa_sub is not None and device.pa_sub != pa_sub)
        or (device.pa_sub is None and not can_bind)
    ):
        return PollDecision(Poll(kind="unknown"))
    if now >= device.expires_at:
        return PollDecision(Poll(kind="expired", authorization=device))
    if device.status == "denied" or device.status == "consumed":
        return PollDecision(Poll(kind=device.status, authorization=device))
    if device.status == "pending":
        previous = device.last_polled_at
        too_soon = previous is not None and now - previous < device.interval
        touched = evolve(device, last_polled_at=now)
        kind: Literal["slow_down", "pending"] = "slow_down" if too_soon else "pending"
        return PollDecision(Poll(kind=kind, authorization=touched), update="touch")
    if device.pa_sub is None:
        if session_account is not None and device.account != session_account:
            return PollDecision(Poll(kind="account_mismatch", authorization=device))
        bound = evolve(device, status="consumed", pa_sub=pa_sub)
        return PollDecision(Poll(kind="approved", authorization=bound), update="bind")
    consumed = evolve(device, status="consumed")
    return PollDecision(Poll(kind="approved", authorization=consumed), update="consume")


def binding(
    bound: DeviceAuthorization, poll: DevicePoll
) -> tuple[str, GrantKey, tuple[str, ...], float, float]:
    """The grant the poll that binds its user (`decide_poll`'s `bind`, with `bound` its
    answer) upserts, as a backend's upsert takes it: the new grant's id, the key, the
    scopes in the grant's form, now and the expiry; ValueError when the poll brought no
    grant id or expiry (`check_binding`)."""
    assert bound.account is not None
    assert bound.pa_sub is not None
    grant_id, expires_at = check_binding(poll.new_grant_id, poll.grant_expires_at)
    key = (bound.brand_id, bound.account, bound.client_id, bound.pa_sub)
    return grant_id, key, grant_scopes(bound.granted_scopes), poll.now, expires_at


def is_decidable(
    device: DeviceAuthorization | None, *, now: float, brand_id: str | None = None
) -> bool:
    """Whether the user may still approve or deny `device`: it is pending, unexpired and
    (when `brand_id` is given) of that Brand."""
    return (
        device is not None
        and device.status == "pending"
        and now < device.expires_at
        and (brand_id is None or device.brand_id == brand_id)
    )


def denied_device(device: DeviceAuthorization, account: str | None) -> DeviceAuthorization:
    """The authorization after the user's denial."""
    return evolve(device, status="denied", account=account)


def approved_device(
    device: DeviceAuthorization, *, account: str, granted: tuple[str, ...], grant_id: str | None
) -> DeviceAuthorization:
    """The authorization after the user's approval, naming its grant (None for one bound to
    its user at the poll, whose grant the poll writes)."""
    return evolve(
        device, status="approved", account=account, granted_scopes=granted, grant_id=grant_id
    )


# --- grants ------------------------------------------------------------------------------------


@frozen
class UpsertDecision:
    """How `upsert_grant` changes the key's grants.

    - `widen`: `grant` is the key's live grant widened (scopes, expiry, `updated_at`): update it.
    - `insert`: `grant` is a new grant to insert (refused if its id is taken); first retire
      the unrevoked but expired grant `retire` (`revoked_at = now`) when there is one.
    """

    kind: Literal["widen", "insert"]
    grant: Grant
    retire: str | None = None


def decide_upsert(
    current: Grant | None,
    *,
    grant_id: str,
    key: tuple[str, str, str, str],
    wanted: tuple[str, ...],
    now: float,
    expires_at: float,
) -> UpsertDecision:
    """Decide an upsert of the grant `key` (brand_id, account, client_id, pa_sub); `current`
    is its unrevoked grant, if any, and `wanted` the checked, normalised scopes."""
    if current is not None and current.is_live(now):
        widened = evolve(
            current,
            scopes=grant_scopes(current.scopes + wanted),
            expires_at=max(current.expires_at, expires_at),
            updated_at=now,
        )
        return UpsertDecision(kind="widen", grant=widened)
    brand_id, account, client_id, pa_sub = key
    grant = Grant(
        grant_id=grant_id,
        brand_id=brand_id,
        account=account,
        client_id=client_id,
        pa_sub=pa_sub,
        scopes=wanted,
        created_at=now,
        updated_at=now,
        expires_at=expires_at,
        revoked_at=None,
    )
    # An expired grant never revoked is retired, so it can never come back.
    retire = None if current is None else current.grant_id
    return UpsertDecision(kind="insert", grant=grant, retire=retire)


# --- refresh tokens ----------------------------------------------------------------------------

RotationUpdate = Literal["revoke_grant", "spend"]


@frozen
class RefreshTokenState:
    """What a rotation decision needs of a stored refresh token (`pa_sub` is its grant's)."""

    grant_id: str
    client_id: str
    brand_id: str
    pa_sub: str
    expires_at: float
    used_at: float | None
    #: The sealed answer of the rotation that spent the token, while it is kept.
    successor: bytes | None = None


@frozen
class RotationDecision:
    """The answer of `rotate_refresh_token` and the write it needs.

    `update` is `revoke_grant` (a reuse: store `revoked_at = now` on the grant), `spend`
    (mark the token used at `now` and store its successor) or None (nothing changes).
    """

    rotation: Rotation
    update: RotationUpdate | None = None


def token_belongs(
    token: RefreshTokenState | None, *, client_id: str, brand_id: str, pa_sub: str
) -> bool:
    """Whether the token exists and was issued to this client, Brand and agent user.

    When not, the rotation is `unknown` and nothing changes (nor is the grant read).
    """
    return token is not None and (token.client_id, token.brand_id, token.pa_sub) == (
        client_id,
        brand_id,
        pa_sub,
    )


def decide_rotation(
    token: RefreshTokenState, grant: Grant, *, now: float, reuse_interval: float = 0.0
) -> RotationDecision:
    """Decide the rotation of a token that `token_belongs` to the caller; `grant` is its.

    A spent token presented again less than `reuse_interval` seconds (at most
    `MAX_REFRESH_REUSE_INTERVAL`) after it was spent, while the grant is live, is a repeat
    (a client retrying a refresh whose answer it lost), not a reuse: nothing changes.
    """
    if token.used_at is not None:
        if now - token.used_at < min(reuse_interval, MAX_REFRESH_REUSE_INTERVAL) and (
            grant.is_live(now)
        ):
            repeat = Rotation(kind="repeated", grant=grant, successor=token.successor)
            return RotationDecision(repeat)
        if grant.revoked_at is None:
            revoked = evolve(grant, revoked_at=now)
            return RotationDecision(Rotation(kind="reused", grant=revoked), "revoke_grant")
        return RotationDecision(Rotation(kind="reused", grant=grant))
    if now >= token.expires_at:
        return RotationDecision(Rotation(kind="expired", grant=grant))
    if not grant.is_live(now):
        return RotationDecision(Rotation(kind="revoked", grant=grant))
    return RotationDecision(Rotation(kind="rotated", grant=grant), update="spend")


# --- single-use values -------------------------------------------------------------------------


def is_unexpired(expires_at: float | None, now: float) -> bool:
    """Whether a single-use record (None: there is none) still holds at `now`."""
    return expires_at is not None and now < expires_at
