"""The Store contract: what every backend guarantees, and the values it returns.

Every operation is atomic on its own and safe to call from many threads; the sqlite and
PostgreSQL backends are also safe across processes and (PostgreSQL) machines. Times are
float epoch seconds passed in by the caller, so tests drive the clock.

`Store` is the union of the per-concern protocols in store/_protocols/ (conversations,
device authorizations, grants, refresh tokens and single-use values, the runtime agent
registry, retention, Poppy Sessions and Account Tokens). Each operation is written there
once: its keyword-only signature, what it guarantees, and its input checks, which then call
a short backend method of the same name with a leading underscore (`create_conversation` ->
`_create_conversation`). A backend subclasses `Store` and implements those; see the
store package docstring.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, Protocol, runtime_checkable

from attrs import frozen

from pactmw.core.errors import PactmwError

# The input checks live apart so that modules below this one can use them too.
from pactmw.store._inputs import has_nul as has_nul
from pactmw.store._inputs import reject_nul as reject_nul
from pactmw.store._inputs import scope_tuple as scope_tuple

__all__ = [
    "MAX_REFRESH_REUSE_INTERVAL",
    "AgentExists",
    "Approval",
    "Claim",
    "ClaimKind",
    "Cleanup",
    "Conversation",
    "DeviceAuthorization",
    "DeviceStatus",
    "Grant",
    "NotFound",
    "Owner",
    "Poll",
    "PollKind",
    "Rotation",
    "RotationKind",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "StoredAgent",
    "StoredTurn",
    "UserCodeTaken",
]

ClaimKind = Literal["new", "reply", "pending", "conflict"]
DeviceStatus = Literal["pending", "approved", "denied", "consumed"]
PollKind = Literal[
    "unknown",
    "expired",
    "denied",
    "consumed",
    "slow_down",
    "pending",
    "approved",
    "account_mismatch",
]
RotationKind = Literal["rotated", "repeated", "unknown", "expired", "reused", "revoked"]

#: The longest reuse interval `rotate_refresh_token` honours (Okta allows up to 60 s too):
#: the sealed answers it keeps for repeats are cleared after it.
MAX_REFRESH_REUSE_INTERVAL = 60.0

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


class AgentExists(StoreError):
    """`add_agent` was given an issuer that is already stored; nothing was written."""


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


def check_binding(new_grant_id: str | None, grant_expires_at: float | None) -> tuple[str, float]:
    """Check what a poll binding its user needs to write the grant (ValueError when
    missing); see `Store.poll_device_code`."""
    if not new_grant_id or grant_expires_at is None:
        raise ValueError(
            "a poll that binds its user to an approved authorization needs new_grant_id "
            "and grant_expires_at"
        )
    reject_nul(new_grant_id=new_grant_id)
    return new_grant_id, float(grant_expires_at)


def check_grant_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    """Check and normalise a grant's scopes: sorted, unique, at least one (else ValueError)."""
    result = grant_scopes(scope_tuple("scopes", scopes))
    if not result:
        raise ValueError("a grant needs at least one scope")
    return result


def check_counters(
    counters: Sequence[tuple[str, int]], window_start: float, window_end: float
) -> tuple[tuple[str, int], ...]:
    """Check `RateLimitStore.count_request`'s arguments; return the counters as a tuple.

    Shared by every backend so that they refuse the same inputs (ValueError, TypeError).
    """
    result = tuple(counters)
    for key, limit in result:
        if not isinstance(key, str):
            raise TypeError(f"a rate counter key must be a string, got {type(key).__name__}")
        reject_nul(key=key)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"a rate limit must be a positive whole number, got {limit!r}")
    if len({key for key, _ in result}) != len(result):
        raise ValueError("each rate counter key may be counted once per request")
    if not window_end > window_start:
        raise ValueError("a rate window must end after it starts")
    return result


def check_token_owner(grant: Grant, client_id: str, brand_id: str) -> None:
    """Refuse (ValueError) a refresh or Account Token for another client or Brand than its
    grant's."""
    if (grant.client_id, grant.brand_id) != (client_id, brand_id):
        raise ValueError("a token must belong to its grant's client and Brand")


@frozen
class Owner:
    """Whose a conversation is: the Brand it runs at, the agent (`issuer`: a PACT issuer,
    or what a Poppy agent's `client_id` is stored as) and the agent's user (`sub`). The
    three are one owner: the same user of another agent, or at another Brand, is another.
    Compared exactly, so a lookalike `sub` or issuer is another owner too."""

    brand_id: str
    issuer: str
    sub: str


@frozen
class Conversation:
    """One conversation (`contextId`) and who owns it.

    A conversation continues only for its `owner`: the same `brand_id` and the same
    `(issuer, sub)`; the store records the owner, the caller checks it (`owned_by`).
    """

    context_id: str
    brand_id: str
    issuer: str
    sub: str
    created_at: float
    last_activity: float
    closed: bool
    account: str | None

    @property
    def owner(self) -> Owner:
        return Owner(self.brand_id, self.issuer, self.sub)

    def owned_by(self, owner: Owner) -> bool:
        """Whether `owner` may use this conversation. Both protocols ask this alone, so
        an unknown conversation and another owner's look the same to the caller (PACT
        §4.2, PAP-7.2-01)."""
        return self.owner == owner


@frozen
class StoredTurn:
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

    `history` is filled by `Store.claim_turn` only, for a `new` claim: the last answered
    turns of the conversation, oldest first (the bot's context, read in the same transaction).
    """

    kind: ClaimKind
    reply: bytes | None = None
    history: tuple[StoredTurn, ...] = ()


@frozen
class DeviceAuthorization:
    """One RFC 8628 device authorization request, as the store keeps it.

    Only a hash of the `device_code` is stored (the caller hashes); the `user_code` is kept
    as given (the caller normalizes it). `scopes` are the requested scopes in request order;
    `account`, `granted_scopes` and `grant_id` are set by the user's decision. `pa_sub` is
    the agent user who asked: only that user's token requests can poll the code. Expired
    when `now >= expires_at`.

    A Poppy device authorization names no user when it is made (§4.6: the agent asks with
    its client assertion only): its `pa_sub` is None until the poll that collects it binds
    the User ID of the polling Session, and its grant is written then (`grant_id` stays
    None while it is `approved`).
    """

    device_code_hash: str
    user_code: str
    brand_id: str
    client_id: str
    pa_sub: str | None
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
      `consumed` and carries the account, granted scopes and grant id (and, for one bound
      at the poll, the polling user as its `pa_sub`).
    - `account_mismatch`: approved by another account than the one the polling Poppy
      Session was ever signed in to (PAP-4.8-04); nothing changed.

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
    #: When a request last used it, to the minute (stores that record it; None: unknown).
    last_used_at: float | None = None

    def is_live(self, now: float) -> bool:
        """Tell whether the grant may be used at `now` (not revoked, not expired)."""
        return self.revoked_at is None and now < self.expires_at


@frozen
class Approval:
    """The outcome of a successful `Store.approve_device_authorization`.

    `authorization` is now `approved` and names `grant`: the live grant of the key after the
    approval (a new one, or the existing live one widened by the granted scopes). An
    authorization bound to its user at the poll (`pa_sub` None) has no grant yet: `grant`
    is None, and the poll writes it.
    """

    authorization: DeviceAuthorization
    grant: Grant | None


@frozen
class Rotation:
    """The outcome of `Store.rotate_refresh_token`.

    - `rotated`: the old token is spent, the new one is stored; issue tokens for `grant`.
    - `unknown`: no such token for this client, Brand and agent user (nothing changed,
      nothing leaks: `grant` is None).
    - `repeated`: the token was spent less than the reuse interval ago and its grant is
      live: nothing changed; `successor` is the sealed answer the rotation that spent it
      stored with `seal_rotation` (None until it did), to be sent again.
    - `reused`: the token was spent before, so the whole grant is now revoked.
    - `expired`: the token itself expired. `revoked`: its grant is revoked or expired.

    Every kind but `rotated` and `repeated` maps to `invalid_grant`. `grant` is the state
    after the call.
    """

    kind: RotationKind
    grant: Grant | None = None
    successor: bytes | None = None


@frozen
class StoredAgent:
    """A personal agent added at runtime (an operator command, the Django admin), on top of
    the configured ones.

    Verified exactly like a configured agent with a `jwks_uri` and no per-agent audience.
    `name` is `""` when none was given; `added_at` is epoch seconds. Whether it may call is
    the issuer's override (`agent_enabled`), as for configured agents: enabled when none.
    """

    issuer: str
    name: str
    jwks_uri: str
    added_at: float


@frozen
class Cleanup:
    """What `Store.cleanup` deleted: how many rows of each kind."""

    device_authorizations: int = 0
    refresh_tokens: int = 0
    used_values: int = 0
    conversations: int = 0
    messages: int = 0
    authorization_details: int = 0
    #: Rate-limit counters of windows that had ended (`RateLimitStore`).
    rate_counters: int = 0
    #: Poppy Sessions and Account Tokens past use (see `RetentionStore.cleanup`).
    poppy_sessions: int = 0
    account_tokens: int = 0
    #: Poppy operations past retention, and expired Idempotency-Key answers
    #: (`OperationStore`).
    operations: int = 0
    idempotency_answers: int = 0


# The per-concern contracts use the values, errors and checks above, so they are imported
# after them (store/_protocols/__init__.py imports this module first for the same reason).
from pactmw.store._protocols.account_tokens import AccountTokenStore  # noqa: E402
from pactmw.store._protocols.agents import AgentStore  # noqa: E402
from pactmw.store._protocols.conversations import ConversationStore  # noqa: E402
from pactmw.store._protocols.devices import DeviceStore  # noqa: E402
from pactmw.store._protocols.grants import GrantStore  # noqa: E402
from pactmw.store._protocols.operations import OperationStore  # noqa: E402
from pactmw.store._protocols.retention import RetentionStore  # noqa: E402
from pactmw.store._protocols.sessions import SessionStore  # noqa: E402
from pactmw.store._protocols.tokens import TokenStore  # noqa: E402


@runtime_checkable
class Store(
    ConversationStore,
    DeviceStore,
    TokenStore,
    AgentStore,
    RetentionStore,
    SessionStore,
    AccountTokenStore,
    OperationStore,
    GrantStore,  # after the two token concerns, which stand on it
    Protocol,
):
    """Persistent state of a Provider, with atomic operations named for their guarantee.

    Implementations: `MemoryStore` (one process), `SqliteStore` (one machine, many
    processes), `PostgresStore` (many machines), `DjangoStore` (the site's database). All
    share one behaviour, proven by the same contract tests. Operations that write refuse any
    string holding NUL with `ValueError`; lookups by an id holding NUL find nothing.

    A backend subclasses it (explicitly: the public operations are inherited, with their
    input checks) and implements the `_` methods each per-concern protocol lists, and
    `close`.
    """

    def close(self) -> None:
        """Release connections; later calls raise `StoreUnavailable`. Idempotent."""
        ...
