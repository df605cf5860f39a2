"""Who decides on a consent page: the signed-in user, carried from the page to its decision."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit

from attrs import frozen

from pactmw.core.errors import JoseError
from pactmw.core.http import Request, Response
from pactmw.core.jose import parse_compact, sign_compact, verify_with_any
from pactmw.protocols.delegation import DELEGATION_ALGORITHMS
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.delegated._context import ServerContext
from pactmw.provider.delegated._errors import ConsentRefused
from pactmw.provider.delegated._responses import redirect
from pactmw.store.base import DeviceAuthorization

CONSENT_SESSION_TYP = "pact-consent+jwt"
CONSENT_SESSION_LIFETIME = 600
#: Brand mode: who signed in at the Brand's login, for one user code, carried from the
#: sign-in's 303 to the consent page's GET in a cookie (Post/Redirect/Get).
SIGNED_IN_TYP = "pact-consent-signed-in+jwt"
SIGNED_IN_COOKIE = "pactmw_signed_in"
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


def is_navigation(request: Request) -> bool:
    """Whether `request` is a browser's top-level navigation (Fetch Metadata: a followed
    link, a submitted form), not a script's or another program's request."""
    return (
        request.header("sec-fetch-mode") == "navigate"
        and request.header("sec-fetch-dest") == "document"
    )


def cookie_values(request: Request, name: str) -> list[str]:
    """The values of the cookies named `name` that `request` carries (one per path that
    matched; several `Cookie` lines included)."""
    values = []
    for header, line in request.headers:
        if header == "cookie":
            for pair in line.split(";"):
                key, equals, value = pair.strip().partition("=")
                if equals and key == name:
                    values.append(value)
    return values


def set_cookie(name: str, value: str, url: str, lifetime: int) -> tuple[str, str]:
    """A `Set-Cookie` for the page at `url` only (its path and below), `lifetime` seconds:
    never sent to the host app's other pages, unreadable to script, sent on a link or a
    redirect from another site (Lax: the Brand's login is often another site), and only
    over https when the pages are served over https."""
    parts = urlsplit(url)
    attributes = [f"Path={parts.path}", f"Max-Age={lifetime}", "HttpOnly", "SameSite=Lax"]
    if parts.scheme == "https":
        attributes.append("Secure")
    return ("Set-Cookie", "; ".join([f"{name}={value}", *attributes]))


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
        in first: at the Brand's login (brand mode, every time: the host app's word is never
        taken; only the cookie a browser's sign-in left for that page is, read by the page
        itself) or in the host app (same-app, when nobody is signed in)."""
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

    def signed_in_redirect(self, brand: Brand, user: SignedInUser, user_code: str) -> Response:
        """Brand mode, a browser's sign-in: 303 to the consent page's GET, with a cookie
        saying who signed in for `user_code` (Post/Redirect/Get).

        The sign-in POST answered the consent page itself, so Back from the result page (and
        Reload) asked to send the form again: Chromium's "Confirm Form Resubmission". The
        assertion is single-use, so the GET needs its own proof of the sign-in; the cookie
        carries it, never the URL, which lands in access logs. It lasts as long as a consent
        session and is bound to the one code, as that session is.
        """
        url = self.ctx.url(brand, "consent")
        claims = {"aud": url, "sub": user.account, "label": user.label, "user_code": user_code}
        token = mint_page_token(
            self.ctx, claims, typ=SIGNED_IN_TYP, lifetime=CONSENT_SESSION_LIFETIME
        )
        answer = redirect(f"{url}?{urlencode({'user_code': user_code})}")
        cookie = set_cookie(SIGNED_IN_COOKIE, token, url, CONSENT_SESSION_LIFETIME)
        return Response(status=answer.status, headers=(*answer.headers, cookie))

    def signed_in(self, brand: Brand, request: Request, user_code: str) -> SignedInUser | None:
        """Who signed in at the Brand's login for `user_code`, by the cookie
        `signed_in_redirect` set; None without a valid one for this Brand and code."""
        url = self.ctx.url(brand, "consent")
        for token in cookie_values(request, SIGNED_IN_COOKIE):
            try:
                claims = read_page_token(self.ctx, token, typ=SIGNED_IN_TYP)
            except JoseError:
                continue
            sub, label = claims.get("sub"), claims.get("label")
            if (
                is_fresh(self.ctx, claims, url)
                and claims.get("user_code") == user_code
                and isinstance(sub, str)
                and isinstance(label, str)
                and sub
                and label
            ):
                return SignedInUser(account=sub, label=label)
        return None


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

    @classmethod
    def of(cls, decided: DeviceAuthorization) -> Outcome | None:
        """The decision recorded on `decided`, or None when it records none (pending, or
        no account: nothing to show)."""
        if decided.status == "pending" or decided.account is None:
            return None
        approved = decided.status in ("approved", "consumed")
        return cls(
            approved=approved,
            account=decided.account,
            client_id=decided.client_id,
            pa_sub=decided.pa_sub,
            granted=decided.granted_scopes if approved else (),
            user_code=decided.user_code if decided.pa_sub is None else None,
        )


@frozen
class OutcomeReference:
    """Which decision a result link shows: the device authorization's user code, and its
    device code's hash to tell it from a later authorization drawing the same code."""

    user_code: str
    device_code_hash: str

    def finds(self, brand: Brand, found: DeviceAuthorization | None) -> Outcome | None:
        """The decision of `found`, the authorization holding the user code now, when it is
        the one referred to, at `brand`; else None."""
        if found is None or found.brand_id != brand.id:
            return None
        if found.device_code_hash != self.device_code_hash:
            return None
        return Outcome.of(found)


@frozen
class ConsentOutcomes:
    """The result page's `outcome`: a signed, short-lived reference to the decision.

    Signed so that a crafted link cannot make the Brand's own page claim an agent was (or
    was not) connected. It names no one: a result link lands in access logs (servers log
    the query string), and a JWS is signed, not encrypted. It carries the user code (which
    the consent link already carried) and the hash of the device code (no use without the
    code); the page reads the decision, its person and the agent's user from the store.
    """

    ctx: ServerContext

    def mint(self, brand: Brand, decided: DeviceAuthorization) -> str:
        claims = {
            "aud": self.ctx.url(brand, "connected"),
            "user_code": decided.user_code,
            "ref": decided.device_code_hash,
        }
        return mint_page_token(self.ctx, claims, typ=OUTCOME_TYP, lifetime=OUTCOME_LIFETIME)

    def read(self, brand: Brand, token: str) -> OutcomeReference | None:
        """The decision referred to, or None when the token is forged, foreign, malformed or
        expired."""
        try:
            claims = read_page_token(self.ctx, token, typ=OUTCOME_TYP)
        except JoseError:
            return None
        user_code, ref = claims.get("user_code"), claims.get("ref")
        if (
            not is_fresh(self.ctx, claims, self.ctx.url(brand, "connected"))
            or not isinstance(user_code, str)
            or not isinstance(ref, str)
            or not (user_code and ref)
        ):
            return None
        return OutcomeReference(user_code=user_code, device_code_hash=ref)


__all__ = [
    "CONSENT_SESSION_LIFETIME",
    "CONSENT_SESSION_TYP",
    "OUTCOME_LIFETIME",
    "OUTCOME_TYP",
    "SIGNED_IN_COOKIE",
    "SIGNED_IN_TYP",
    "ConsentOutcomes",
    "ConsentSessions",
    "Outcome",
    "OutcomeReference",
    "PageVisit",
    "SignedInUser",
    "cookie_values",
    "is_fresh",
    "is_navigation",
    "mint_page_token",
    "read_page_token",
    "set_cookie",
]
