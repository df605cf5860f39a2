"""Who decides on a consent page: the signed-in user, carried from the page to its decision."""

from __future__ import annotations

from typing import Any

from attrs import frozen

from pactmw.core.errors import JoseError
from pactmw.core.http import Request
from pactmw.core.jose import parse_compact, sign_compact, verify_with_any
from pactmw.protocols.delegation import DELEGATION_ALGORITHMS
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.delegated._context import ServerContext
from pactmw.provider.delegated._errors import ConsentRefused

CONSENT_SESSION_TYP = "pact-consent+jwt"
CONSENT_SESSION_LIFETIME = 600
OUTCOME_TYP = "pact-consent-outcome+jwt"
#: The result page is opened right after the decision; a bookmarked one just stops naming it.
OUTCOME_LIFETIME = 600


def mint_page_token(ctx: ServerContext, claims: dict[str, Any], *, typ: str, lifetime: int) -> str:
    """A short-lived token a page carries to its next request: `claims`, `iat` and `exp`,
    signed with the server's keys under its own `typ` (so no token passes for another)."""
    now = int(ctx.clock())
    return sign_compact({**claims, "iat": now, "exp": now + lifetime}, ctx.keys.signer, typ=typ)


def read_page_token(ctx: ServerContext, token: str, *, typ: str) -> dict[str, Any]:
    """The claims of a page token this server signed with `typ`; `JoseError` when it is
    malformed, of another `typ` or not signed by the server's keys (claims unchecked)."""
    jws = parse_compact(token, allowed_algs=DELEGATION_ALGORITHMS)
    claims = jws.claims()
    if jws.header.get("typ") != typ:
        raise JoseError("bad_typ", f"not a {typ} token")
    if not verify_with_any(jws, ctx.keys.public.candidates(jws.kid, jws.alg)):
        raise JoseError("bad_signature", "page token signature")
    return claims


def is_fresh(ctx: ServerContext, claims: dict[str, Any], aud: str) -> bool:
    """Whether page token claims are for `aud` and unexpired."""
    exp = claims.get("exp")
    return claims.get("aud") == aud and isinstance(exp, int) and exp > ctx.clock()


@frozen
class SignedInUser:
    """The host app's signed-in user, as an adapter reports it (same-app consent)."""

    account: str  # the id the Brand's other channels use for this user
    label: str  # what to show ("signed in as ..."): an email or a username


@frozen
class PageVisit:
    """A person's request to a Brand's consent or connected agents page, and who the host
    app says is signed in: what each of those pages starts from."""

    brand: Brand
    config: DelegationConfig
    request: Request
    #: The host app's signed-in user (same-app mode); None when nobody is, and in brand mode.
    user: SignedInUser | None

    def host_user(self) -> SignedInUser | None:
        """The host app's signed-in user the page goes on with, or None when the person signs
        in first: at the Brand's login (brand mode, every time) or in the host app (same-app,
        when nobody is signed in)."""
        return None if self.config.mode == "brand" else self.user

    def is_not(self, signed_in: SignedInUser) -> bool:
        """Whether the host app's signed-in user (same-app) is not `signed_in`, the person a
        page's session names: then the page must not act for them."""
        return self.config.mode == "same-app" and (
            self.user is None or self.user.account != signed_in.account
        )


@frozen
class ConsentSessions:
    """The consent form's `session`: a short-lived JWT binding the user to one user code."""

    ctx: ServerContext

    def mint(self, brand: Brand, user: SignedInUser, user_code: str) -> str:
        claims = {
            "aud": self.ctx.url(brand, "consent/decision"),
            "sub": user.account,
            "label": user.label,
            "user_code": user_code,
        }
        return mint_page_token(
            self.ctx, claims, typ=CONSENT_SESSION_TYP, lifetime=CONSENT_SESSION_LIFETIME
        )

    def read(self, brand: Brand, token: str) -> tuple[SignedInUser, str]:
        """The session's user and user code; `ConsentRefused` if it is forged, foreign or old."""
        try:
            claims = read_page_token(self.ctx, token, typ=CONSENT_SESSION_TYP)
        except JoseError as exc:
            raise ConsentRefused("This consent page is no longer valid. Start again.", 400) from exc
        sub, label, code = (claims.get(k) for k in ("sub", "label", "user_code"))
        if not is_fresh(self.ctx, claims, self.ctx.url(brand, "consent/decision")) or not all(
            isinstance(v, str) and v for v in (sub, label, code)
        ):
            raise ConsentRefused("This consent page has expired. Start again.", 400)
        return SignedInUser(account=str(sub), label=str(label)), str(code)


@frozen
class Outcome:
    """What one consent decision was about: whose grant, for which agent, what was allowed.

    The result page reads the grant of this key again when it is shown, so it states what
    the agent can do at that moment, not what the decision alone suggests. A Poppy sign-in
    has no `pa_sub` until the agent's poll binds one: its `user_code` finds the
    authorization, and through it the grant.
    """

    approved: bool
    account: str
    client_id: str
    pa_sub: str | None
    granted: tuple[str, ...]
    user_code: str | None = None


@frozen
class ConsentOutcomes:
    """The result page's `outcome`: a signed, short-lived record of the decision.

    Signed so that a crafted link cannot make the Brand's own page claim an agent was (or
    was not) connected.
    """

    ctx: ServerContext

    def mint(self, brand: Brand, outcome: Outcome) -> str:
        claims = {
            "aud": self.ctx.url(brand, "connected"),
            "approved": outcome.approved,
            "sub": outcome.account,
            "client_id": outcome.client_id,
            "pa_sub": outcome.pa_sub,
            "user_code": outcome.user_code,
            "granted": list(outcome.granted),
        }
        return mint_page_token(self.ctx, claims, typ=OUTCOME_TYP, lifetime=OUTCOME_LIFETIME)

    def read(self, brand: Brand, token: str) -> Outcome | None:
        """The decision, or None when the token is forged, foreign, malformed or expired."""
        try:
            claims = read_page_token(self.ctx, token, typ=OUTCOME_TYP)
        except JoseError:
            return None
        approved, granted = claims.get("approved"), claims.get("granted")
        key = tuple(claims.get(k) for k in ("sub", "client_id"))
        # The grant's user, or (a Poppy sign-in, bound at the poll) the user code.
        pa_sub, user_code = claims.get("pa_sub"), claims.get("user_code")
        user = (pa_sub,) if pa_sub is not None else (user_code,)
        if (
            not is_fresh(self.ctx, claims, self.ctx.url(brand, "connected"))
            or not isinstance(approved, bool)
            or not isinstance(granted, list)
            or not all(isinstance(s, str) for s in granted)
            or not all(isinstance(v, str) and v for v in (*key, *user))
        ):
            return None
        return Outcome(
            approved=approved,
            account=str(key[0]),
            client_id=str(key[1]),
            pa_sub=None if pa_sub is None else str(pa_sub),
            granted=tuple(granted),
            user_code=None if pa_sub is not None else str(user_code),
        )


__all__ = [
    "CONSENT_SESSION_LIFETIME",
    "CONSENT_SESSION_TYP",
    "OUTCOME_LIFETIME",
    "OUTCOME_TYP",
    "ConsentOutcomes",
    "ConsentSessions",
    "Outcome",
    "PageVisit",
    "SignedInUser",
    "is_fresh",
    "mint_page_token",
    "read_page_token",
]
