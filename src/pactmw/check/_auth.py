"""9. Authentication: the missing token, every refused token, and an unknown Brand."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from pactmw.check._context import Checks
from pactmw.check._forge import hs256, now, public_secrets, unsigned
from pactmw.check._result import Mismatch
from pactmw.check._wire import CHALLENGE, describe, header_values, says_a2a
from pactmw.check.names import (
    ALG_NONE,
    AUD_INTERFACE,
    DISABLED_ISSUER,
    EXPIRED,
    FUTURE_IAT,
    HS256,
    LONG_LIFETIME,
    MISSING_TOKEN,
    MISSING_TOKEN_BODY,
    OTHER_KEY,
    UNKNOWN_BRAND,
)
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk


class AuthChecks(Checks):
    """The authentication checks. The missing-token check learns the challenge every other
    refusal must repeat."""

    def run(self) -> None:
        ctx, http = self.ctx, self.http
        ctx.check(
            MISSING_TOKEN,
            f"HTTP 401 with exactly WWW-Authenticate: {CHALLENGE} and no A2A body for a message "
            "without Authorization (PACT §3.4)",
            self._missing_token,
        )
        ctx.check(
            MISSING_TOKEN_BODY,
            "HTTP 401 (not 400) for a body '{' without a token: authenticate before reading",
            self._missing_token_body,
        )
        negatives: list[tuple[str, str, Callable[[], list[str]]]] = [
            (HS256, "an HS256 token whose HMAC key is the agent's public key", self._hs256),
            (EXPIRED, "iat now-200, exp now-100", lambda: [http.signed(iat=now() - 200,
                                                                       exp=now() - 100)]),
            (FUTURE_IAT, "iat now+31, exp now+151", self._future_iat),
            (LONG_LIFETIME, "exp - iat = 301 s", lambda: [http.signed(exp=now() + 301,
                                                                      iat=now())]),
            (AUD_INTERFACE, "aud = the interface URL", lambda: [http.signed(aud=ctx.interface)]),
            (DISABLED_ISSUER, "iss = {issuer}/disabled-pa, signed with the agent's key",
             lambda: [http.signed(iss=f"{self.settings.signer.issuer}/disabled-pa")]),
            (OTHER_KEY, "a signature by another key with the agent's kid", self._other_key),
            (ALG_NONE, "an unsigned token (alg none)", lambda: [unsigned(http.claims())]),
        ]  # fmt: skip
        for name, what, tokens in negatives:
            ctx.check(
                name,
                f"HTTP 401 as for a missing token, no A2A body, for {what} (PACT §3.2, §3.4)",
                self._refuses(what, tokens),
            )
        ctx.check(
            UNKNOWN_BRAND,
            "at an unknown Brand: 401 without a token, 404 with a valid one, neither with an "
            "A2A body (authenticate, then look up the Brand)",
            self._unknown_brand,
        )

    def _missing_token(self) -> None:
        expect = self.expect
        response = self.http.send("No token.", auth=False)
        challenges = header_values(response, "www-authenticate")
        expect.challenge = challenges[0] if response.status == 401 and challenges else None
        if response.status != 401:
            expect.challenge = CHALLENGE
        if response.status != 401 or challenges != [CHALLENGE] or says_a2a(response):
            raise Mismatch(
                f"HTTP 401, WWW-Authenticate: {CHALLENGE}, no A2A body", describe(response)
            )

    def _missing_token_body(self) -> None:
        response = self.http.send(body=b"{", auth=False)
        self.expect.refused(response, "body '{' without a token")

    def _refuses(self, what: str, tokens: Callable[[], list[str]]) -> Callable[[], None]:
        http, expect = self.http, self.expect

        def check() -> None:
            for token in tokens():
                expect.refused(http.send("Refuse me.", token=token), f"message:send, {what}")
                expect.refused(http.call("GET", "tasks", token=token), f"GET tasks, {what}")

        return check

    def _hs256(self) -> list[str]:
        signer = self.settings.signer
        return [
            hs256(self.http.claims(), secret, signer.kid) for secret in public_secrets(signer.key)
        ]

    def _future_iat(self) -> list[str]:
        # Rounded up, so the token is 31 s ahead of the Provider's clock however late it lands.
        iat = math.ceil(time.time()) + 31
        return [self.http.signed(iat=iat, exp=iat + 120)]

    def _other_key(self) -> list[str]:
        signer = self.settings.signer
        other = generate_private_jwk(signer.key.alg, kid=signer.kid)
        return [sign_compact(self.http.claims(), other, typ="JWT")]

    def _unknown_brand(self) -> None:
        http, expect = self.http, self.expect
        unknown = self.ctx.unknown_interface()
        expect.refused(http.send("Who?", interface=unknown, auth=False), "no token")
        response = http.send("Who?", interface=unknown)
        expect.bare(response, (404,), "a valid token")


__all__ = [
    "AuthChecks",
]
