"""The Delegated profile (PACT §5), before a person approves: the card's scheme, the
authorization server metadata, the step-up task and the device authorization refusals."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Sequence
from urllib.parse import urlencode

from pactmw.check._context import Checks
from pactmw.check._result import Mismatch
from pactmw.check._wire import describe, loads
from pactmw.check.names import (
    DELEGATED_DETAILS,
    DELEGATED_METADATA,
    DELEGATED_REFUSALS,
    DELEGATED_SCHEME,
    DELEGATED_STEP_UP,
)
from pactmw.client import (
    AuthorizationServerMetadata,
    DelegationScheme,
    HttpResponse,
    MessageReply,
    StepUp,
    delegation_scheme,
    fetch_authorization_server_metadata,
    fetch_receipt_keys,
)
from pactmw.client.a2a import parse_send_response
from pactmw.client.card import check_scheme_links
from pactmw.core.jwk import KeySet


class DelegatedChecks(Checks):
    """The Delegated checks up to the device authorization, in order; each needs what the
    ones before it found, and `GrantChecks` what they all found."""

    scheme: DelegationScheme | None = None
    metadata: AuthorizationServerMetadata | None = None
    keys: KeySet | None = None
    step_up: StepUp | None = None

    def run(self) -> bool:
        """Whether the grant checks can go on (the scheme and the metadata were found)."""
        ctx = self.ctx
        if not ctx.check(
            DELEGATED_SCHEME,
            "a securityRequirements entry naming the identity scheme and an "
            "oauth2SecurityScheme with a deviceCode flow (absolute URLs, scopes) and an "
            "oauth2MetadataUrl (PACT §5.1)",
            self._scheme,
        ):
            return False
        if not ctx.check(
            DELEGATED_METADATA,
            "RFC 8414 metadata at oauth2MetadataUrl whose device_authorization_endpoint and "
            "token_endpoint are the card's, with a jwks_uri serving the signing keys",
            self._metadata,
        ):
            return False
        assert self.metadata is not None
        if "authorization_details_types_supported" in self.metadata.raw:
            ctx.check(
                DELEGATED_DETAILS,
                "HTTP 400 invalid_authorization_details for an unsupported authorization_details "
                "type (the metadata lists authorization_details_types_supported)",
                self._authorization_details,
            )
        self._step_up()
        ctx.check(
            DELEGATED_REFUSALS,
            "device authorization: HTTP 400 invalid_scope for a scope not on the card, "
            "HTTP 401 without a personal-agent JWT (PACT §5.3), HTTP 401 invalid_client for a "
            "client_id other than the JWT's iss (RFC 6749 §5.2)",
            self._refusals,
        )
        return True

    def credentials(self) -> Callable[[], str]:
        """Fresh personal-agent JWTs for the delegated user."""
        return self.settings.signer.for_user(self.ctx.delegated_sub, self.settings.audience)

    def _scheme(self) -> str:
        ctx = self.ctx
        assert ctx.card is not None
        scheme = delegation_scheme(ctx.card)
        if scheme is None:
            raise Mismatch(
                "a two-scheme requirement: the identity Bearer scheme and an "
                "oauth2SecurityScheme deviceCode flow",
                "none on the card (does this Brand offer delegation?)",
            )
        if scheme.metadata_url is None:
            raise Mismatch("oauth2MetadataUrl on the oauth2SecurityScheme", "absent")
        # The checks below send the agent's token there, as DeviceCodeClient would.
        check_scheme_links(scheme)
        if not scheme.scopes:
            raise Mismatch("at least one scope on the deviceCode flow", "none")
        if ctx.identity_scheme is not None and scheme.identity_scheme != ctx.identity_scheme:
            raise Mismatch(
                f"the delegated requirement to name the identity scheme {ctx.identity_scheme}",
                f"it names {scheme.identity_scheme}",
            )
        unknown = [s for s in self.settings.scopes if s not in scheme.scope_ids]
        if unknown:
            raise Mismatch(f"--scope ids on the card {list(scheme.scope_ids)}", f"{unknown}")
        self.scheme = scheme
        return f"{scheme.name}: scopes {' '.join(scheme.scope_ids)}"

    def _metadata(self) -> str:
        http, scheme = self.http, self.scheme
        assert scheme is not None
        assert scheme.metadata_url is not None
        metadata = fetch_authorization_server_metadata(
            scheme.metadata_url, transport=http.transport, retry=http.retry
        )
        for field, card_value, value in (
            ("device_authorization_endpoint", scheme.device_authorization_url,
             metadata.device_authorization_endpoint),
            ("token_endpoint", scheme.token_url, metadata.token_endpoint),
        ):  # fmt: skip
            if value != card_value:
                raise Mismatch(f"{field} {card_value} (the card's)", value)
        keys = fetch_receipt_keys(
            jwks_uri=metadata.jwks_uri, transport=http.transport, retry=http.retry
        )
        if not keys.keys:
            raise Mismatch(f"signing keys at {metadata.jwks_uri}", "an empty key set")
        self.metadata, self.keys = metadata, keys
        return f"issuer {metadata.issuer}, {len(keys.keys)} key(s) at {metadata.jwks_uri}"

    def _oauth_post(self, url: str, form: Sequence[tuple[str, str]], *, auth: bool) -> HttpResponse:
        headers = [("Content-Type", "application/x-www-form-urlencoded"),
                   ("Accept", "application/json")]  # fmt: skip
        if auth:
            headers.append(("Authorization", f"Bearer {self.credentials()()}"))
        return self.http.request("POST", url, headers=headers, body=urlencode(form).encode("ascii"))

    def _oauth_error(self, response: HttpResponse, status: int, error: str, what: str) -> None:
        body = loads(response.body)
        got = body.get("error") if isinstance(body, dict) else None
        if response.status != status or got != error:
            raise Mismatch(f"HTTP {status} with JSON error {error} ({what})", describe(response))

    def _authorization_details(self) -> None:
        scheme = self.scheme
        assert scheme is not None
        details = [{"type": "https://pactmw.invalid/check/unsupported-type"}]
        form = [("client_id", self.settings.signer.issuer), ("scope", scheme.scope_ids[0]),
                ("authorization_details", json.dumps(details))]  # fmt: skip
        response = self._oauth_post(scheme.device_authorization_url, form, auth=True)
        self._oauth_error(response, 400, "invalid_authorization_details", "unsupported type")

    def _step_up(self) -> None:
        ctx, ask = self.ctx, self.settings.ask
        sent = str(uuid.uuid4())
        try:
            response = self.http.send(ask, sub=ctx.delegated_sub, message_id=sent)
            if response.status != 200:
                raise Mismatch("HTTP 200", describe(response))
            result = parse_send_response(response, sent_message_id=sent)
            self.expect.a2a_json(response, "message:send without a delegation token")
        except Exception as exc:  # a failed probe fails this check; the checks after it run
            ctx.check(
                DELEGATED_STEP_UP,
                f"HTTP 200 for {ask!r} without a delegation token (a reply or a step-up)",
                functools.partial(_raise, exc),
            )
            return
        if isinstance(result, MessageReply):
            ctx.progress.note(
                f"note: {ask!r} got a reply without a delegation token, so the step-up task "
                "was not checked (--ask sets a message that needs delegated scopes)"
            )
            return
        self.step_up = result

        def check() -> str:
            scheme = self.scheme
            assert scheme is not None
            unknown = [s for s in result.missing_scopes if s not in scheme.scope_ids]
            if unknown:
                raise Mismatch(
                    f"pact.missingScopes among the card's scopes {list(scheme.scope_ids)}",
                    f"{list(result.missing_scopes)}",
                )
            return (
                f"TASK_STATE_AUTH_REQUIRED, missing {' '.join(result.missing_scopes)}, "
                f"contextId {result.context_id}"
            )

        ctx.check(
            DELEGATED_STEP_UP,
            "a task in TASK_STATE_AUTH_REQUIRED with id, contextId, pact.missingScopes (card "
            "scopes) and an absolute pact.verificationUriComplete (PACT §5.5)",
            check,
        )

    def _refusals(self) -> None:
        scheme = self.scheme
        assert scheme is not None
        issuer, url = self.settings.signer.issuer, scheme.device_authorization_url
        form = [("client_id", issuer), ("scope", "pactmw-check:no-such-scope")]
        self._oauth_error(self._oauth_post(url, form, auth=True), 400, "invalid_scope",
                          "a scope not on the card")  # fmt: skip
        form = [("client_id", issuer), ("scope", scheme.scope_ids[0])]
        self.expect.refused(self._oauth_post(url, form, auth=False), "no personal-agent JWT")
        form = [("client_id", issuer + "/other"), ("scope", scheme.scope_ids[0])]
        self._oauth_error(self._oauth_post(url, form, auth=True), 401, "invalid_client",
                          "client_id other than the JWT's iss")  # fmt: skip


def _raise(exc: Exception) -> None:
    raise exc


__all__ = [
    "DelegatedChecks",
]
