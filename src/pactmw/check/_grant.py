"""The Delegated profile (PACT §5) with a person in the loop: the device authorization, the
token after approval, a delegated reply's receipt, a tampered token, and the refresh."""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pactmw.check._context import Checks, Context
from pactmw.check._delegated import DelegatedChecks
from pactmw.check._forge import tampered
from pactmw.check._result import Mismatch
from pactmw.check._wire import describe, header_values, says_a2a
from pactmw.check.names import (
    DELEGATED_DEVICE,
    DELEGATED_RECEIPT,
    DELEGATED_REFRESH,
    DELEGATED_SINGLE_USE,
    DELEGATED_SPENT_REFRESH,
    DELEGATED_TAMPERED,
    DELEGATED_TOKEN,
)
from pactmw.client import (
    DeviceAuthorizationResponse,
    DeviceCodeClient,
    MessageReply,
    OAuthErrorResponse,
    StepUp,
    TokenResponse,
    check_receipt,
)
from pactmw.client.a2a import parse_send_response

T = TypeVar("T")


class GrantChecks(Checks):
    """The Delegated checks from the device authorization on, in order, over what
    `DelegatedChecks` found (`found`)."""

    device: DeviceCodeClient | None = None
    authorization: DeviceAuthorizationResponse | None = None
    tokens: TokenResponse | None = None
    refreshed: TokenResponse | None = None
    spent = ""
    deadline = 0.0

    def __init__(self, ctx: Context, found: DelegatedChecks) -> None:
        super().__init__(ctx)
        self.found = found

    def run(self) -> None:
        ctx = self.ctx
        if not ctx.check(
            DELEGATED_DEVICE,
            "a device authorization: device_code, user_code, absolute verification_uri and "
            "verification_uri_complete, positive expires_in and interval (RFC 8628 §3.2)",
            self._device_authorization,
        ):
            return
        if not ctx.check(
            DELEGATED_TOKEN,
            "after the person approves: a Bearer token whose scope lists only requested "
            "scopes, at least one (PACT §5.3), sent with Cache-Control: no-store",
            self._token,
        ):
            return
        ctx.check(
            DELEGATED_SINGLE_USE,
            "an OAuth error (invalid_grant) when the spent device code is polled again",
            self._single_use,
        )
        ctx.check(
            DELEGATED_RECEIPT,
            "with the delegation token: a reply whose metadata carries a pact.receipt that "
            "verifies with the jwks_uri keys, for this agent (pa) and this interface (brand), "
            "using only granted scopes (PACT §5.6)",
            self._receipt,
        )
        ctx.check(
            DELEGATED_TAMPERED,
            'HTTP 401 with WWW-Authenticate: Bearer realm="a2a", error="invalid_token" and no '
            "A2A body for a delegation token with a tampered signature (PACT §5.5)",
            self._tampered,
        )
        if ctx.check(
            DELEGATED_REFRESH,
            "refresh_token grant: a new access token with the same scopes (no-store), which works",
            self._refresh,
        ):
            ctx.check(
                DELEGATED_SPENT_REFRESH,
                "an OAuth error (invalid_grant) for the refresh token already used (the "
                "reference rotates refresh tokens), or within a reuse interval the very same "
                "token pair again, never a new one",
                self._spent_refresh,
            )

    def _wait(self, seconds: float) -> None:
        """The device client's sleep between polls, showing how long the person has left."""
        end = time.monotonic() + seconds
        while True:
            left = max(0, math.ceil(self.deadline - time.monotonic()))
            self.ctx.progress.status(f"waiting for approval… ({left}s left)")
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(1.0, remaining))

    def _device_authorization(self) -> str:
        ctx, http, scheme = self.ctx, self.http, self.found.scheme
        assert scheme is not None
        self.device = DeviceCodeClient(
            scheme,
            self.found.credentials(),
            client_id=self.settings.signer.issuer,
            transport=http.transport,
            retry=http.retry,
            sleep=self._wait,
        )
        scopes = self.settings.scopes or scheme.scope_ids
        details = self.settings.authorization_details
        metadata = self.found.metadata
        advertised = metadata.authorization_details_types if metadata is not None else ()
        unknown = sorted({str(entry.get("type")) for entry in details} - set(advertised))
        if unknown:
            raise Mismatch(
                "authorization_details_types_supported listing every --authorization-details type",
                f"{list(advertised) or 'no types'} (missing {', '.join(unknown)})",
            )
        authorization = self.device.start(scopes, authorization_details=details or None)
        self.authorization = authorization
        self.deadline = authorization.expires_at
        if self.settings.approval_timeout is not None:
            self.deadline = min(self.deadline, time.monotonic() + self.settings.approval_timeout)
        left = max(0, math.ceil(self.deadline - time.monotonic()))
        ctx.progress.note(
            "A person must approve: open this link, sign in at the Brand and allow "
            f"({' '.join(scopes)}):"
        )
        ctx.progress.note(f"  {authorization.verification_uri_complete}")
        ctx.progress.note(f"(user code {authorization.user_code}; waiting up to {left} s)")
        return f"user code {authorization.user_code}, interval {authorization.interval} s"

    def _token(self) -> str:
        progress = self.ctx.progress
        assert self.device is not None
        assert self.authorization is not None
        try:
            tokens = self.device.wait_for_token(
                self.authorization, timeout=max(0.0, self.deadline - time.monotonic())
            )
        finally:
            progress.end_status()
        self._no_store(self.device.scheme.token_url, "the token response")
        requested = set(self.authorization.scopes)
        if not tokens.scopes or not set(tokens.scopes) <= requested:
            raise Mismatch(
                f"scope within the requested {' '.join(self.authorization.scopes)}",
                repr(tokens.scope),
            )
        self.tokens = tokens
        progress.note(f"approved: scope {tokens.scope!r}")
        return f"scope {tokens.scope!r}, expires_in {tokens.expires_in}" + self._details(
            tokens, all_scopes=requested <= set(tokens.scopes)
        )

    def _details(self, tokens: TokenResponse, *, all_scopes: bool) -> str:
        """RFC 9396 §7: the token response lists the authorization details granted, each one
        of those requested; when the person granted every requested scope, all of them."""
        requested = [_canonical(entry) for entry in self.settings.authorization_details]
        if not requested:
            return ""
        returned = [_canonical(entry) for entry in tokens.authorization_details]
        wanted = "authorization_details: " + (
            "every requested entry" if all_scopes else "only requested entries"
        )
        if not set(returned) <= set(requested) or (all_scopes and set(returned) != set(requested)):
            raise Mismatch(wanted, f"authorization_details {returned or 'none'}")
        return f", {len(returned)} of {len(requested)} authorization details"

    def _no_store(self, url: str, what: str) -> None:
        """RFC 6749 §5.1: a response carrying tokens has `Cache-Control: no-store`."""
        response = self.http.transport.last.get(url)
        cache = ", ".join(header_values(response, "cache-control")) if response else ""
        if "no-store" not in {d.strip().lower() for d in cache.split(",")}:
            raise Mismatch(
                f"Cache-Control: no-store on {what} (RFC 6749 §5.1)", cache or "no Cache-Control"
            )

    def _single_use(self) -> str:
        device, authorization = self.device, self.authorization
        assert device is not None
        assert authorization is not None
        return _oauth_error(lambda: device.poll(authorization), repr)

    def _delegated_send(self, token: str, what: str) -> MessageReply:
        ctx, ask, step_up = self.ctx, self.settings.ask, self.found.step_up
        sent = str(uuid.uuid4())
        context_id = step_up.context_id if step_up is not None else None
        headers = {"X-A2A-User-Delegation": f"Bearer {token}"}
        response = self.http.send(
            ask, sub=ctx.delegated_sub, message_id=sent, context_id=context_id, headers=headers
        )
        if response.status != 200:
            raise Mismatch(f"HTTP 200 ({what})", describe(response))
        result = parse_send_response(response, sent_message_id=sent, context_id=context_id)
        self.expect.a2a_json(response, what)
        if isinstance(result, StepUp):
            raise Mismatch(
                f"a reply ({what})",
                f"a step-up for {' '.join(result.missing_scopes)} (did the person untick them?)",
            )
        return result

    def _receipt(self) -> str:
        ctx, keys = self.ctx, self.found.keys
        assert self.tokens is not None
        assert keys is not None
        reply = self._delegated_send(self.tokens.access_token, "delegated message:send")
        if reply.receipt is None:
            raise Mismatch("metadata pact.receipt on the reply", "no receipt")
        verified = check_receipt(
            reply.receipt,
            keys,
            expected_pa=self.settings.signer.issuer,
            expected_brand=ctx.interface,
        )
        extra = [s for s in verified.scopes_used if s not in self.tokens.scopes]
        if extra:
            raise Mismatch(f"scopesUsed within {self.tokens.scope!r}", f"{list(extra)}")
        return f"grant {verified.grant_id}, scopesUsed {list(verified.scopes_used)}"

    def _tampered(self) -> None:
        ctx = self.ctx
        assert self.tokens is not None
        headers = {"X-A2A-User-Delegation": f"Bearer {tampered(self.tokens.access_token)}"}
        response = self.http.send(self.settings.ask, sub=ctx.delegated_sub, headers=headers)
        challenge = response.header("www-authenticate") or ""
        if response.status != 401 or 'error="invalid_token"' not in challenge or says_a2a(response):
            raise Mismatch(
                'HTTP 401, WWW-Authenticate: Bearer realm="a2a", error="invalid_token", no A2A '
                "body",
                describe(response),
            )

    def _refresh(self) -> str:
        assert self.device is not None
        assert self.tokens is not None
        old = self.tokens
        if old.refresh_token is None:
            raise Mismatch("a refresh_token in the token response", "none")
        new = self.device.refresh(old.refresh_token)
        self._no_store(self.device.scheme.refresh_url, "the refresh response")
        if set(new.scopes) != set(old.scopes):
            raise Mismatch(f"the same scopes {old.scope!r}", repr(new.scope))
        kept = {_canonical(entry) for entry in old.authorization_details}
        if {_canonical(entry) for entry in new.authorization_details} != kept:
            raise Mismatch(
                f"the same authorization_details {sorted(kept) or 'none'} (RFC 9396 §7)",
                f"{[dict(entry) for entry in new.authorization_details] or 'none'}",
            )
        self._delegated_send(new.access_token, "message:send with the refreshed token")
        self.spent, self.refreshed = old.refresh_token, new
        return f"scope {new.scope!r}"

    def _spent_refresh(self) -> str:
        device, refreshed = self.device, self.refreshed
        assert device is not None
        assert refreshed is not None
        try:
            again = device.refresh(self.spent)
        except OAuthErrorResponse as exc:
            return f"HTTP {exc.status} {exc.error}"
        # A reuse interval (Okta's and Auth0's grace period, pactmw's refresh_reuse_interval)
        # answers a repeat with the rotation's own pair: a retry after a lost response. Any
        # other pair means a spent token still mints tokens.
        pair = (again.access_token, again.refresh_token)
        if pair == (refreshed.access_token, refreshed.refresh_token):
            return "the same token pair again (within the Provider's reuse interval)"
        raise Mismatch("an OAuth error", f"a new token (scope {again.scope!r})")


def _canonical(entry: Mapping[str, Any]) -> str:
    """One authorization detail as comparable text (member order does not matter)."""
    return json.dumps(dict(entry), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _oauth_error(attempt: Callable[[], T], shown: Callable[[T], str]) -> str:
    """What the OAuth error `attempt` must end in says; if it succeeds instead, a Mismatch
    showing what came back (`shown`)."""
    try:
        result = attempt()
    except OAuthErrorResponse as exc:
        return f"HTTP {exc.status} {exc.error}"
    raise Mismatch("an OAuth error", shown(result))


__all__ = [
    "GrantChecks",
]
