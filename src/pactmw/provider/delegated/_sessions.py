"""Who decides on a consent page: the signed-in user, carried from the page to its decision."""

from __future__ import annotations

from attrs import frozen

from pactmw.core.errors import JoseError
from pactmw.core.jose import parse_compact, sign_compact, verify_with_any
from pactmw.protocols.delegation import DELEGATION_ALGORITHMS
from pactmw.provider.brand import Brand
from pactmw.provider.delegated._context import ServerContext
from pactmw.provider.delegated._errors import ConsentRefused

CONSENT_SESSION_TYP = "pact-consent+jwt"
CONSENT_SESSION_LIFETIME = 600


@frozen
class SignedInUser:
    """The host app's signed-in user, as an adapter reports it (same-app consent)."""

    account: str  # the id the Brand's other channels use for this user
    label: str  # what to show ("signed in as ..."): an email or a username


@frozen
class ConsentSessions:
    """The consent form's `session`: a short-lived JWT binding the user to one user code."""

    ctx: ServerContext

    def mint(self, brand: Brand, user: SignedInUser, user_code: str) -> str:
        now = int(self.ctx.clock())
        return sign_compact(
            {
                "aud": self.ctx.url(brand, "consent/decision"),
                "sub": user.account,
                "label": user.label,
                "user_code": user_code,
                "iat": now,
                "exp": now + CONSENT_SESSION_LIFETIME,
            },
            self.ctx.keys.signer,
            typ=CONSENT_SESSION_TYP,
        )

    def read(self, brand: Brand, token: str) -> tuple[SignedInUser, str]:
        """The session's user and user code; `ConsentRefused` if it is forged, foreign or old."""
        try:
            jws = parse_compact(token, allowed_algs=DELEGATION_ALGORITHMS)
            claims = jws.claims()
            if jws.header.get("typ") != CONSENT_SESSION_TYP:
                raise JoseError("bad_typ", "not a consent session")
            if not verify_with_any(jws, self.ctx.keys.public.candidates(jws.kid, jws.alg)):
                raise JoseError("bad_signature", "session signature")
        except JoseError as exc:
            raise ConsentRefused("This consent page is no longer valid. Start again.", 400) from exc
        exp, sub, label, code = (claims.get(k) for k in ("exp", "sub", "label", "user_code"))
        if (
            claims.get("aud") != self.ctx.url(brand, "consent/decision")
            or not isinstance(exp, int)
            or exp <= self.ctx.clock()
            or not all(isinstance(v, str) and v for v in (sub, label, code))
        ):
            raise ConsentRefused("This consent page has expired. Start again.", 400)
        return SignedInUser(account=str(sub), label=str(label)), str(code)


__all__ = [
    "CONSENT_SESSION_LIFETIME",
    "CONSENT_SESSION_TYP",
    "ConsentSessions",
    "SignedInUser",
]
