"""RFC 8628 §3.1-3.2: the device authorization endpoint, and the consent link it hands out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from attrs import frozen

from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.brand import DEFAULT_DEVICE_CODE_SECONDS, Brand, DelegationConfig
from pactmw.provider.delegated._codes import new_secret, new_user_code, secret_hash
from pactmw.provider.delegated._context import ServerContext
from pactmw.provider.delegated._details import device_owner, keep, requested_details
from pactmw.provider.delegated._errors import OAuthError
from pactmw.provider.delegated._forms import agent_form
from pactmw.provider.delegated._responses import NO_STORE, json_response, with_query
from pactmw.provider.flow import Flow, SubFlow, store
from pactmw.provider.ratelimit import RateLimiter
from pactmw.store.base import Store, UserCodeTaken

#: The default lifetime only (kept for its importers): each Brand's delegation has its own,
#: `DelegationConfig.device_code_seconds`.
DEVICE_CODE_LIFETIME = DEFAULT_DEVICE_CODE_SECONDS


@frozen
class DeviceEndpoint:
    """Creates device authorizations: for the agent's own request, and for step-up tasks."""

    ctx: ServerContext
    #: Device authorization requests per (agent, sub): each one makes a consent link a person
    #: may be sent, so an agent user asking in a loop is stopped here. Step-up tasks make
    #: theirs inside `message:send` and count in this same bucket (`StepUp`).
    limiter: RateLimiter

    def device_authorization(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, body: bytes
    ) -> Flow:
        form = agent_form(body, caller)  # first: a mismatched client_id is 401 invalid_client
        wait = yield from self.limiter.admit(caller.issuer, caller.sub, self.ctx.clock())
        if wait is not None:
            raise OAuthError.rate_limited(wait, "device authorization")
        requested = " ".join(form.get("scope", [])).split()
        if not requested or any(scope not in config.scopes for scope in requested):
            raise OAuthError("invalid_scope", "request one or more scopes listed on the card")
        scopes = tuple(dict.fromkeys(requested))
        details = requested_details(form, config, scopes)  # checked after the scopes, as §5.1
        document = yield from self.authorize(brand, config, caller, scopes, details)
        return json_response(document, extra=NO_STORE)

    def authorize(
        self,
        brand: Brand,
        config: DelegationConfig,
        caller: PersonalAgent,
        scopes: tuple[str, ...],
        details: Sequence[Mapping[str, Any]] = (),
    ) -> SubFlow:
        """Create a device authorization; the value is the RFC 8628 response document."""
        device_code = new_secret("dc_")
        now = self.ctx.clock()
        # Kept first: an authorization never exists without the details it was asked with.
        owner = device_owner(secret_hash(device_code))
        expires_at = now + config.device_code_seconds
        yield from keep(self.ctx.store, owner, details, now, expires_at)
        document = yield from new_device_authorization(
            self.ctx.store,
            self.ctx.url(brand, "consent"),
            config,
            device_code=device_code,
            brand_id=brand.id,
            client_id=caller.issuer,
            pa_sub=caller.sub,
            scopes=scopes,
            now=now,
        )
        if document is None:  # pragma: no cover - 5 collisions in 2.6e10 codes
            raise OAuthError("temporarily_unavailable", "try again", 503)
        return document


def verification_uris(consent: str, config: DelegationConfig, code: str) -> tuple[str, str]:
    """The RFC 8628 `verification_uri` and `verification_uri_complete` of a user code whose
    consent page is `consent` (the same for PACT and Poppy device sign-in)."""
    complete = f"{consent}?{urlencode({'user_code': code})}"
    if config.mode == "brand":
        # The Brand's login comes first and returns the person to the consent page.
        return (
            with_query(config.login_url, {"return_to": consent}),
            with_query(config.login_url, {"return_to": complete}),
        )
    return consent, complete


def new_device_authorization(
    device_store: Store,
    consent_url: str,
    config: DelegationConfig,
    *,
    device_code: str,
    brand_id: str,
    client_id: str,
    pa_sub: str | None,
    scopes: tuple[str, ...],
    now: float,
) -> SubFlow:
    """Store a device authorization under a fresh user code (PACT's, and Poppy's Device
    Sign-In, whose `pa_sub` is None until its poll); the value is the RFC 8628 response
    document, or None when five fresh user codes were all taken."""
    for _ in range(5):
        user_code = new_user_code()
        try:
            yield store(
                device_store.create_device_authorization,
                device_code_hash=secret_hash(device_code),
                user_code=user_code,
                brand_id=brand_id,
                client_id=client_id,
                pa_sub=pa_sub,
                scopes=scopes,
                now=now,
                expires_at=now + config.device_code_seconds,
                interval=float(config.interval),
            )
            break
        except UserCodeTaken:
            continue
    else:  # pragma: no cover - 5 collisions in 2.6e10 codes
        return None
    verification_uri, complete = verification_uris(consent_url, config, user_code)
    return {
        "device_code": device_code,
        "user_code": user_code,
        "verification_uri": verification_uri,
        "verification_uri_complete": complete,
        "expires_in": config.device_code_seconds,
        "interval": config.interval,
    }


__all__ = [
    "DEVICE_CODE_LIFETIME",
    "DeviceEndpoint",
    "new_device_authorization",
    "verification_uris",
]
