"""PACT Delegated, as the personal agent lives it (spec §5): the card's delegated authority,
step-ups, the device flow, delegated turns and their receipts, refresh, and what a revoked
grant leaves. Jane's own part, in her browser, is `Person`'s."""

from __future__ import annotations

import json
import time

from attrs import frozen

from pactmw.brand_login import DevelopmentBrandLogin
from pactmw.client import (
    AuthorizationServerMetadata,
    DelegationScheme,
    DelegationTokenRejected,
    DeviceAuthorizationResponse,
    OAuthErrorResponse,
    PollStatus,
    ReceiptInvalid,
    TokenResponse,
    delegation_scheme,
    fetch_authorization_server_metadata,
    fetch_card,
    fetch_receipt_keys,
    verify_receipt,
)
from pactmw.core.errors import AuthenticationFailed
from pactmw.core.jwk import KeySet
from pactmw.demo._agent import PersonalAgent, Wire, refusal, reply_of, step_up_of
from pactmw.demo._common import (
    DEMO_USER,
    ISSUER,
    SCOPES,
    START_TIMEOUT,
    DemoFailed,
    acme_card_url,
    expect,
    peek,
)
from pactmw.demo._transcript import Transcript
from pactmw.protocols.delegation import Delegation, verify_access_token


@frozen
class Authority:
    """The Brand's authorization server as the personal agent found it from the card: the
    device-code scheme, the RFC 8414 metadata, and the keys of its tokens and receipts."""

    scheme: DelegationScheme
    metadata: AuthorizationServerMetadata
    keys: KeySet


def read_authority(t: Transcript, wire: Wire, base_url: str) -> Authority:
    """Delegated authority on the card (§5.1), its RFC 8414 metadata and the keys."""
    card = fetch_card(acme_card_url(base_url), transport=wire)
    scheme = delegation_scheme(card)
    if scheme is None:
        raise DemoFailed("card: no oauth2SecurityScheme device-code flow (delegation)")
    both = [set(r.get("schemes", {})) for r in card.security_requirements]
    identity = {scheme.identity_scheme}
    expect(
        identity in both and identity | {scheme.name} in both,
        f"card: expected the identity-only requirement and one naming both, got {both}",
    )
    t.note(f"card: security scheme {scheme.name!r}, OAuth 2.0 device-code flow; the scopes:")
    for scope in scheme.scopes:
        t.note(f"  {scope.id:<14} {scope.description}")
    t.note("card: two securityRequirements: the PACT JWT alone, or with the delegation")
    if scheme.metadata_url is None:
        raise DemoFailed("card: the delegation scheme has no oauth2MetadataUrl")
    metadata = fetch_authorization_server_metadata(scheme.metadata_url, transport=wire)
    expect(
        metadata.device_authorization_endpoint == scheme.device_authorization_url
        and metadata.token_endpoint == scheme.token_url,
        "metadata: the endpoints differ from the card's",
    )
    t.note(f"card: oauth2MetadataUrl {scheme.metadata_url}")
    t.note(f"GET it → issuer {metadata.issuer}")
    t.note(f"  jwks_uri {metadata.jwks_uri} (the keys of tokens and receipts)")
    keys = fetch_receipt_keys(jwks_uri=metadata.jwks_uri, transport=wire)
    return Authority(scheme, metadata, keys)


class DelegatedPart:
    """The personal agent's side of the Delegated profile, a step per method."""

    def __init__(
        self,
        t: Transcript,
        agent: PersonalAgent,
        authority: Authority,
        login: DevelopmentBrandLogin,
        interface: str,
        sub: str,
        audience: str,
    ) -> None:
        self.t = t
        self.agent = agent
        self.scheme = authority.scheme
        self.metadata = authority.metadata
        self.keys = authority.keys
        self.login = login
        self.interface = interface
        self.client = agent.client(interface, sub, audience)
        self.device = agent.device(authority.scheme, sub, audience)

    def step_up_without_token(self) -> str:
        """An account question with the PACT JWT alone; the step-up's contextId."""
        t = self.t
        text = "Show me my orders, please."
        t.say("PA", "Acme", text)
        step_up = step_up_of(self.client.send(text), "no delegation token")
        t.say("Acme", "PA", step_up.text)
        t.note(f"{self.agent.wire.last.status} OK: a task in TASK_STATE_AUTH_REQUIRED, contextId")
        t.note(f"  {step_up.context_id} (a new conversation, it stays open)")
        t.note(f"pact.missingScopes {json.dumps(list(step_up.missing_scopes))}")
        t.note(f"pact.verificationUriComplete {step_up.verification_uri_complete}")
        missing = list(step_up.missing_scopes)
        expect(missing == ["orders:read"], f"step-up: missing {missing}")
        self._expect_login_link(step_up.verification_uri_complete, "step-up link")
        return step_up.context_id

    def _expect_login_link(self, link: str, what: str) -> None:
        login_url = self.login.login_url
        expect(link.startswith(login_url + "?"), f"{what}: not Acme's login: {link}")

    def device_authorization(self) -> DeviceAuthorizationResponse:
        """Ask for every scope on the card (§5.3); the first poll is still pending."""
        t, wire, scheme = self.t, self.agent.wire, self.scheme
        authorization = self.device.start(SCOPES)
        t.note(f"POST {scheme.device_authorization_url}")
        t.note(f"  client_id={ISSUER}&scope={' '.join(authorization.scopes)}")
        t.note("  Authorization: Bearer <PACT JWT> (the personal agent is the OAuth client)")
        t.note(
            f"→ {wire.last.status}: user_code {authorization.user_code}, "
            f"expires_in {authorization.expires_in} s, interval {authorization.interval} s"
        )
        link = authorization.verification_uri_complete
        t.note(f"verification_uri_complete {link}")
        t.note("  (the personal agent shows this link to Jane; it never sees the login)")
        self._expect_login_link(link, "device authorization")
        first = self.device.poll(authorization)
        if first is not PollStatus.PENDING:
            raise DemoFailed(f"first poll: expected authorization_pending, got {first}")
        t.note(f"first poll of {scheme.token_url} → {wire.last.status} {first.value}")
        return authorization

    def poll_token(self, authorization: DeviceAuthorizationResponse) -> tuple[TokenResponse, str]:
        """Poll until Jane's decision: the tokens, checked, and their grant id."""
        t, scheme = self.t, self.scheme
        tokens = self.device.wait_for_token(authorization, timeout=START_TIMEOUT)
        t.note(
            f"after the {authorization.interval} s interval: POST {scheme.token_url} "
            f"→ {self.agent.wire.last.status}"
        )
        t.note(f"  scope {tokens.scope!r}: what Jane approved (asked: {' '.join(SCOPES)!r})")
        expect(tokens.scope == "orders:read", f"token: scope {tokens.scope!r}")
        delegation = self._check_access_token(tokens.access_token)
        claims = delegation.claims
        t.note(
            f"  access_token: a JWT the Provider signs, {claims['exp'] - claims['iat']} s; "
            f"sub {delegation.account}, client_id {delegation.client_id}"
        )
        t.note(f"    grant_id {delegation.grant_id}, scope {claims['scope']!r}")
        t.note(f"  refresh_token {self._refresh_token(tokens)[:8]}… (rotated on each use)")
        return tokens, delegation.grant_id

    @staticmethod
    def _refresh_token(tokens: TokenResponse) -> str:
        if tokens.refresh_token is None:
            raise DemoFailed("token: no refresh_token")
        return tokens.refresh_token

    def _check_access_token(self, token: str) -> Delegation:
        """The delegation token, checked as the Provider checks it (signature with the keys of
        the metadata's jwks_uri, typ, iss, aud, expiry, client_id), and for Jane's account."""
        try:
            delegation = verify_access_token(
                f"Bearer {token}",
                keys=self.keys,
                interface_url=self.interface,
                client_id=ISSUER,
                now=time.time(),
            )
        except AuthenticationFailed as exc:
            raise DemoFailed(f"delegation token: {exc}") from exc
        expect(
            delegation.claims.get("iss") == self.metadata.issuer
            and delegation.account == DEMO_USER.account,
            f"delegation token: unexpected claims {dict(delegation.claims)}",
        )
        return delegation

    def delegated_turn(
        self, text: str, context_id: str, access_token: str, grant_id: str, *, show_receipt: bool
    ) -> None:
        """A turn with the delegation token: its receipt is verified (§5.6)."""
        t = self.t
        t.say("PA", "Acme", text)
        if show_receipt:
            t.note("(Authorization: Bearer <PACT JWT>, X-A2A-User-Delegation: Bearer <token>)")
        sent = self.client.send(text, context_id=context_id, delegation_token=access_token)
        reply = reply_of(sent, "delegated turn")
        t.say("Acme", "PA", reply.text)
        expect("A-1002" in reply.text, "delegated turn: the bot did not list Jane's orders")
        if reply.receipt is None:
            raise DemoFailed("delegated turn: no pact.receipt {jws, claims} in the reply")
        try:
            receipt = verify_receipt(
                reply.receipt, expected_pa=ISSUER, expected_brand=self.interface, jwks=self.keys
            )
        except ReceiptInvalid as exc:
            raise DemoFailed(f"receipt: {exc}") from exc
        expect(receipt.grant_id == grant_id, "receipt: another grant")
        expect(receipt.user == DEMO_USER.account, "receipt: another user")
        expect(receipt.scopes_used == ("orders:read",), "receipt: scopesUsed")
        status = self.agent.wire.last.status
        if not show_receipt:
            t.note(f"{status} OK, same contextId; receipt verified (grant {grant_id})")
            return
        t.note(f"{status} OK, same contextId; metadata pact.receipt {{jws, claims}}")
        alg = peek(receipt.jws)[0].get("alg")
        t.note(f"receipt verified: {alg}, kid {receipt.kid}")
        t.note(f"  key from {self.metadata.jwks_uri} (the RFC 8414 metadata's jwks_uri);")
        t.note("  signed claims == returned claims; pa, brand, grantId and user as expected:")
        for key, value in receipt.claims.items():
            shown = value if isinstance(value, str) else json.dumps(value)
            t.note(f"    {key:<11} {shown}")

    def step_up_with_token(self, context_id: str, access_token: str) -> None:
        """A turn that needs the scope Jane did not approve."""
        t = self.t
        text = "Please cancel order A-1002."
        t.say("PA", "Acme", text)
        sent = self.client.send(text, context_id=context_id, delegation_token=access_token)
        step_up = step_up_of(sent, "the unticked scope")
        t.say("Acme", "PA", step_up.text)
        missing = list(step_up.missing_scopes)
        expect(missing == ["orders:cancel"], f"step-up: missing {missing}")
        self._expect_login_link(step_up.verification_uri_complete, "step-up link")
        status = self.agent.wire.last.status
        t.note(f"{status} OK: TASK_STATE_AUTH_REQUIRED, same contextId; nothing cancelled")
        t.note(f"pact.missingScopes {json.dumps(missing)}")
        t.note(f"pact.verificationUriComplete {step_up.verification_uri_complete}")

    def refresh(self, tokens: TokenResponse, grant_id: str) -> TokenResponse:
        """A new access token for the same grant; the refresh token rotates."""
        t, scheme = self.t, self.scheme
        fresh = self.device.refresh(self._refresh_token(tokens))
        delegation = self._check_access_token(fresh.access_token)
        expect(
            fresh.refresh_token != tokens.refresh_token
            and fresh.access_token != tokens.access_token,
            "refresh: the tokens were not renewed",
        )
        expect(delegation.grant_id == grant_id, "refresh: another grant")
        expect(fresh.scope == tokens.scope, f"refresh: scope {fresh.scope!r}")
        status = self.agent.wire.last.status
        t.note(f"POST {scheme.refresh_url} grant_type=refresh_token → {status}")
        t.note(f"  a new access token: same grant, scope {fresh.scope!r}")
        t.note(f"  and a new refresh token {self._refresh_token(fresh)[:8]}…; the old one is spent")
        t.note("  (presented again, it would revoke the whole grant: reuse detection)")
        return fresh

    def after_revocation(self, context_id: str, tokens: TokenResponse) -> None:
        """The grant is revoked: its delegation token and its refresh token are refused."""
        t = self.t
        text = "Show me my orders, please."
        t.say("PA", "Acme", text)
        rejected = refusal(
            DelegationTokenRejected,
            "revoked grant",
            lambda: self.client.send(
                text, context_id=context_id, delegation_token=tokens.access_token
            ),
        )
        challenge = rejected.header("WWW-Authenticate")
        expect(
            rejected.status == 401
            and challenge == 'Bearer realm="a2a", error="invalid_token"'
            and not rejected.body,
            f"revoked grant: expected 401 invalid_token, got {rejected.status} {challenge!r}",
        )
        t.note(f"the same (unexpired) delegation token → {rejected.status}, no body,")
        t.note(f"  WWW-Authenticate: {challenge}")
        refresh_token = self._refresh_token(tokens)
        refused = refusal(
            OAuthErrorResponse,
            "refresh after revocation",
            lambda: self.device.refresh(refresh_token),
        )
        expect(
            refused.status == 400 and refused.error == "invalid_grant",
            f"refresh after revocation: expected 400 invalid_grant, got {refused}",
        )
        t.note(
            f"the refresh token → {refused.status} {refused.error}; "
            "Jane would have to consent again"
        )


__all__ = [
    "Authority",
    "DelegatedPart",
    "read_authority",
]
