"""Poppy Sessions (§4.2-§4.9): the Store contract, its values and its rules.

A Session belongs to one personal agent (`client_id`) and one of its users (`user_id`, the
pairwise User ID) at one Brand. It starts signed out; signing in sets its account, grant and
scopes; renewing with a fresh Session assertion keeps the Session but signs it out; a
revoked sign-in signs its Sessions out, and they go on signed out (§4.9). A Session holds
exactly one live Session Token at a time (stored as its hash): a new token ends the old one.

Two rules no backend may bend: a Session is only ever changed by its own agent and user
(else `invalid_session`, PAP-4.8-03), and a Session once signed in to an account never
signs in to another, even after signing out (`account_mismatch`, PAP-4.8-04).

`SessionStore` checks the inputs and builds the new and changed Sessions; a backend
implements only how a Session is stored, read and changed atomically (its `_` methods).

`Store` includes `SessionStore`; every backend implements it (schema version 6 in the SQL
backends).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from attrs import evolve, field, frozen

from pactmw.store._inputs import has_nul, reject_nul, scope_tuple

__all__ = [
    "PoppySession",
    "SessionChange",
    "SessionChangeKind",
    "SessionStore",
    "SessionUpdate",
    "change_session",
    "check_new_session",
    "decide_session_change",
    "updated_session",
]

SessionChangeKind = Literal["changed", "invalid_session", "account_mismatch"]


@frozen
class PoppySession:
    """One Session as stored. `account` is None while signed out; `ever_account` is the
    account it was first signed in to (kept after sign-out, for PAP-4.8-04)."""

    session_id: str
    brand_id: str
    client_id: str
    user_id: str
    jkt: str  # RFC 7638 thumbprint of the key its current token is bound to
    created_at: float
    token_expires_at: float
    account: str | None = None
    grant_id: str | None = None
    scopes: tuple[str, ...] = ()
    ever_account: str | None = None
    signed_in_at: float | None = None

    @property
    def signed_in(self) -> bool:
        return self.account is not None


@frozen
class SessionChange:
    """What a renewal or sign-in did: `changed` (with the Session as it now is), or why not."""

    kind: SessionChangeKind
    session: PoppySession | None = field(default=None)


def check_new_session(**values: str) -> None:
    """Input check shared by the backends: ids and hashes are non-empty text without NUL."""
    reject_nul(**values)
    empty = [name for name, value in values.items() if not value]
    if empty:
        raise ValueError(f"{', '.join(sorted(empty))} must not be empty")


@frozen
class SessionUpdate:
    """What a renewal or a sign-in asks of one Session: whose it must be (`session_id` at
    `brand_id`, of the agent `client_id` and its user `user_id`), its new token (bound to
    `jkt`, valid until `expires_at`) and, for a sign-in, its account, grant and scopes;
    `account` None is a renewal, which signs the Session out."""

    session_id: str
    brand_id: str
    client_id: str
    user_id: str
    jkt: str
    token_hash: str = field(repr=False)
    now: float
    expires_at: float
    account: str | None = None
    grant_id: str | None = None
    scopes: tuple[str, ...] = ()


def updated_session(session: PoppySession, update: SessionUpdate) -> PoppySession:
    """`session` after `update` (which `decide_session_change` allowed)."""
    return evolve(
        session,
        jkt=update.jkt,
        token_expires_at=update.expires_at,
        account=update.account,
        grant_id=update.grant_id,
        scopes=update.scopes,
        ever_account=session.ever_account or update.account,
        signed_in_at=update.now if update.account is not None else None,
    )


def decide_session_change(
    session: PoppySession | None,
    *,
    brand_id: str,
    client_id: str,
    user_id: str,
    account: str | None,
) -> SessionChangeKind:
    """Whether a renewal (`account` None) or a sign-in (`account` given) may change `session`.

    Unknown, another Brand's, another agent's or another user's Session: `invalid_session`
    (all alike, so a guessed id tells nothing). A sign-in to an account other than the one
    the Session was ever signed in to: `account_mismatch`.
    """
    if (
        session is None
        or session.brand_id != brand_id
        or session.client_id != client_id
        or session.user_id != user_id
    ):
        return "invalid_session"
    if account is not None and session.ever_account not in (None, account):
        return "account_mismatch"
    return "changed"


def change_session(session: PoppySession | None, update: SessionUpdate) -> SessionChange:
    """`session` after `update` (`changed`), or why it may not change; see
    `decide_session_change`. A backend stores the changed Session with the new token."""
    kind = decide_session_change(
        session,
        brand_id=update.brand_id,
        client_id=update.client_id,
        user_id=update.user_id,
        account=update.account,
    )
    if kind != "changed" or session is None:
        return SessionChange(kind)
    return SessionChange("changed", updated_session(session, update))


class SessionStore(Protocol):
    """Poppy Sessions and their Session Tokens (only hashes are stored)."""

    def create_session(
        self,
        *,
        session_id: str,
        brand_id: str,
        client_id: str,
        user_id: str,
        jkt: str,
        token_hash: str,
        now: float,
        expires_at: float,
    ) -> PoppySession:
        """Store a new, signed-out Session with its first token (valid until `expires_at`).

        Raises ValueError when `session_id` or `token_hash` is already stored, or an input is
        empty or holds NUL.
        """
        check_new_session(
            session_id=session_id,
            brand_id=brand_id,
            client_id=client_id,
            user_id=user_id,
            jkt=jkt,
            token_hash=token_hash,
        )
        session = PoppySession(
            session_id=session_id,
            brand_id=brand_id,
            client_id=client_id,
            user_id=user_id,
            jkt=jkt,
            created_at=now,
            token_expires_at=expires_at,
        )
        self._insert_session(session, token_hash)
        return session

    def renew_session(
        self,
        *,
        session_id: str,
        brand_id: str,
        client_id: str,
        user_id: str,
        jkt: str,
        token_hash: str,
        now: float,
        expires_at: float,
    ) -> SessionChange:
        """Give the Session a new token bound to `jkt`, signed out (§4.2 renewal); its old
        token stops working. `invalid_session` unless it is this agent's and user's Session at
        this Brand; `ever_account` is kept."""
        check_new_session(jkt=jkt, token_hash=token_hash)
        renewal = SessionUpdate(
            session_id, brand_id, client_id, user_id, jkt, token_hash, now, expires_at
        )
        return self._update(renewal)

    def sign_in_session(
        self,
        *,
        session_id: str,
        brand_id: str,
        client_id: str,
        user_id: str,
        account: str,
        grant_id: str,
        scopes: Sequence[str],
        jkt: str,
        token_hash: str,
        now: float,
        expires_at: float,
    ) -> SessionChange:
        """Sign the Session in to `account` through `grant_id` with `scopes`, with a new token
        (the old one stops working). `invalid_session` as for `renew_session`;
        `account_mismatch` if it was ever signed in to another account. Of concurrent
        sign-ins of one fresh Session to two accounts, exactly one is `changed`."""
        check_new_session(account=account, grant_id=grant_id, jkt=jkt, token_hash=token_hash)
        renewal = SessionUpdate(
            session_id, brand_id, client_id, user_id, jkt, token_hash, now, expires_at
        )
        scopes = scope_tuple("scopes", scopes)
        return self._update(evolve(renewal, account=account, grant_id=grant_id, scopes=scopes))

    def get_session(self, session_id: str) -> PoppySession | None:
        """The Session with this id in any state, or None (what a refresh checks before it
        spends an Account Token: refusing then loses the agent nothing)."""
        return None if has_nul(session_id) else self._get_session(session_id)

    def session_for_token(self, *, token_hash: str, now: float) -> PoppySession | None:
        """The Session whose live token has this hash, or None (unknown, replaced, or expired
        at `now`). Read on every request, so a sign-out shows at once (PAP-4.9-01)."""
        session = None if has_nul(token_hash) else self._session_for_token(token_hash)
        if session is None or now >= session.token_expires_at:
            return None
        return session

    def sign_out_sessions(self, *, grant_id: str, now: float) -> int:
        """Sign out every Session signed in through `grant_id` (its grant was revoked, or one
        of its Account Tokens was); they keep their tokens and go on signed out (§4.9).
        Returns how many were signed out."""
        return 0 if has_nul(grant_id) else self._sign_out_sessions(grant_id)

    def session_clients(self, *, now: float) -> tuple[tuple[str, str], ...]:
        """Each `(brand_id, client_id)` with a Session live at `now` (its token unexpired, as
        `session_for_token` judges it), signed in or out, once, sorted by code point: the
        Poppy agents an operator sees (`agents list`) though they hold no grant."""
        return tuple(sorted(set(self._session_clients(now))))

    def _update(self, update: SessionUpdate) -> SessionChange:
        # An id holding NUL is never stored, so it names no Session, as an unknown id.
        if has_nul(update.session_id):
            return SessionChange("invalid_session")
        return self._change(update)

    # --- what a backend implements (inputs already checked) ------------------------------------

    def _insert_session(self, session: PoppySession, token_hash: str) -> None:
        """Store `session`; ValueError when its id or `token_hash` is already stored."""
        ...

    def _change(self, update: SessionUpdate) -> SessionChange:
        """Atomically: read the Session `update.session_id`, `change_session`, and when it
        changed store it with the new token (ValueError when its hash is stored)."""
        ...

    def _get_session(self, session_id: str) -> PoppySession | None: ...

    def _session_for_token(self, token_hash: str) -> PoppySession | None:
        """The Session whose current token has this hash, expired or not."""
        ...

    def _sign_out_sessions(self, grant_id: str) -> int: ...

    def _session_clients(self, now: float) -> Sequence[tuple[str, str]]:
        """`(brand_id, client_id)` of the Sessions whose token expires after `now`, in any
        order and possibly repeated (the contract sorts them and drops repeats)."""
        ...
