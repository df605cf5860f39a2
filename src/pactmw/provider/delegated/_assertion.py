"""Spec §5.3: the Brand's single-use login assertion that opens the consent page (brand mode)."""

from __future__ import annotations

from attrs import define

from pactmw.core.encoding import is_storable_text
from pactmw.core.errors import JoseError, KeyUnavailable
from pactmw.core.jose import parse_compact, verify_with_any
from pactmw.core.keys import JwksCache
from pactmw.core.replay import remember_until
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.delegated._codes import normalize_user_code
from pactmw.provider.delegated._context import ServerContext
from pactmw.provider.delegated._errors import ConsentRefused
from pactmw.provider.delegated._sessions import SignedInUser
from pactmw.provider.flow import NeedKeys, SubFlow, store

ASSERTION_MAX_AGE = 300  # spec §5.3: the Brand's assertion is at most 5 minutes old
ASSERTION_SKEW = 30


class SignInReused(ConsentRefused):
    """A verified assertion whose `jti` was already spent: refused, but it says who signed
    in and for which code, so the page can show that person the answer they already gave
    (Back after a decision posts the assertion again)."""

    def __init__(self, message: str, user: SignedInUser, user_code: str | None) -> None:
        super().__init__(message, 400)
        self.user = user
        #: The assertion's code, normalized; None when it is not a code (or not for consent).
        self.user_code = user_code


@define
class BrandAssertions:
    """Verifies the assertion against the Brand's keys and spends its `jti` once."""

    ctx: ServerContext
    #: Where `brand_jwks_uri` keys are cached (the Provider may replace it, tests do).
    brand_keys: JwksCache

    def verify(
        self, brand: Brand, config: DelegationConfig, assertion: str, page: str = "consent"
    ) -> SubFlow:
        """The flow's value is (SignedInUser, user_code).

        `page` is the page the assertion is for (its `aud`, under the Brand's `oauth/`): the
        consent page needs a `user_code`; the connected agents page (`agents`) needs none and
        gets "".
        """
        refused = ConsentRefused("The sign-in could not be verified. Sign in again.", 401)
        try:
            jws = parse_compact(assertion, allowed_algs=frozenset({"ES256", "RS256"}))
            claims = jws.claims()
        except JoseError as exc:
            raise refused from exc
        if config.brand_jwks is not None:
            candidates = config.brand_jwks.candidates(jws.kid, jws.alg)
        else:
            uri = config.brand_jwks_uri
            assert uri is not None
            try:
                candidates = yield NeedKeys(lambda: self.brand_keys.get_keys(uri, jws.kid, jws.alg))
            except KeyUnavailable as exc:
                raise refused from exc
        if not verify_with_any(jws, candidates):
            raise refused
        now = self.ctx.clock()
        sub, jti, code = claims.get("sub"), claims.get("jti"), claims.get("user_code")
        if page != "consent":
            code = "-"  # whatever it says: this sign-in opens no consent, it needs no code
        iat, exp = claims.get("iat"), claims.get("exp")
        label = claims.get("email") or claims.get("name") or sub
        if (
            claims.get("iss") != config.brand_issuer
            or claims.get("aud") != self.ctx.url(brand, page)
            or not all(
                isinstance(v, str) and v and is_storable_text(v) for v in (sub, jti, code, label)
            )
            or not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in (iat, exp))
        ):
            raise refused
        assert isinstance(iat, (int, float))
        assert isinstance(exp, (int, float))
        if exp <= now or now - iat > ASSERTION_MAX_AGE or iat > now + ASSERTION_SKEW:
            raise ConsentRefused("The sign-in has expired. Sign in again.", 400)
        first_use = yield store(
            self.ctx.store.use_once,
            namespace="brand-assertion",
            value=f"{config.brand_issuer}\n{jti}",
            now=now,
            # Until the last instant it would be accepted (iat + max age), that one included.
            expires_at=remember_until(iat + ASSERTION_MAX_AGE),
        )
        signed_in = SignedInUser(account=str(sub), label=str(label))
        user_code = normalize_user_code(str(code)) if page == "consent" else None
        if not first_use:
            raise SignInReused(
                "This sign-in was already used. Sign in again.", signed_in, user_code
            )
        if page != "consent":
            return (signed_in, "")
        if user_code is None:
            raise ConsentRefused.unusable_code()
        return (signed_in, user_code)


__all__ = [
    "ASSERTION_MAX_AGE",
    "ASSERTION_SKEW",
    "BrandAssertions",
    "SignInReused",
]
