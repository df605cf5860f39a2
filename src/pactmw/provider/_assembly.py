"""How a Provider assembles its protocol parts from its Brands at startup: its arguments
from settings, the checks of the Delegated profile's settings, the Poppy company side, each
Brand's Agent Card, and the name its pages give an agent."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pactmw.config import ConfigError
from pactmw.core.fetch import FetchPolicy
from pactmw.protocols.delegation import SigningKeys
from pactmw.protocols.identity import AgentOverrides, IdentityVerifier
from pactmw.provider._send import MessageSender
from pactmw.provider.brand import Brand
from pactmw.provider.card import build_card
from pactmw.provider.delegated import AuditHook, AuthorizationServer
from pactmw.provider.delegated._audit import Audit
from pactmw.provider.poppy import DeviceSignIn, PoppyServer
from pactmw.provider.ratelimit import RateLimit
from pactmw.provider.settings import ProviderSettings
from pactmw.store import AuthorizationDetailsStore, RateLimitStore, open_store
from pactmw.store.base import Store

_Provider = TypeVar("_Provider")


def built_from_settings(
    make: Callable[..., _Provider],
    settings: ProviderSettings,
    *,
    store: Store | None,
    clock: Callable[[], float] | None,
    signing_keys: SigningKeys | None,
    audit: AuditHook | None,
) -> _Provider:
    """`make` (the Provider class) called with what `settings` describe: `Provider.from_settings`.
    Opens `settings.store` unless a store is given; the verifier reads the agents added and
    switched at runtime from the store."""
    if store is None:
        try:
            store = open_store(settings.store)
        except ValueError as exc:  # a URL of no backend, a DSN that does not parse
            # A configuration error naming its key, in every front-end (the message never
            # repeats the URL, which may hold a password).
            raise ConfigError(f"store: {exc}") from None
    extra: dict[str, Any] = {} if clock is None else {"clock": clock}
    return make(
        base_url=settings.base_url,
        verifier=settings.identity.build_verifier(overrides=store, runtime=store, **extra),
        store=store,
        brands=settings.brands,
        identity_scheme=settings.identity_scheme,
        organization=settings.organization,
        rate_limit=settings.rate_limit,
        consent_rate_limit=settings.consent_rate_limit,
        device_rate_limit=settings.device_rate_limit,
        token_rate_limit=settings.token_rate_limit,
        shared_rate_limits=settings.shared_rate_limits,
        max_body_bytes=settings.max_body_bytes,
        conversation_idle_timeout=settings.conversation_idle_timeout,
        claim_lease_seconds=settings.claim_lease_seconds,
        turn_timeout=settings.turn_timeout,
        retention_days=settings.retention_days,
        signing_keys=signing_keys or settings.signing_keys(),
        # The hook given in code wins over the settings' `audit`, as `signing_keys` does.
        audit=audit if audit is not None else settings.audit,
        **extra,
    )


def offers_delegation(
    brands: Mapping[str, Brand], store: Store, signing_keys: SigningKeys | None
) -> bool:
    """Whether any Brand offers delegation; ValueError naming what its settings lack."""
    if not any(brand.delegation is not None for brand in brands.values()):
        return False
    if signing_keys is None:
        raise ValueError("Brands that offer delegation need signing_keys")
    for brand in brands.values():
        if (
            brand.delegation is not None
            and brand.delegation.authorization_details
            and not isinstance(store, AuthorizationDetailsStore)
        ):
            raise ValueError(
                f"brands.{brand.id}.delegation.authorization_details needs a store "
                f"that keeps authorization details; {type(store).__name__} does not"
            )
    return True


def poppy_server(
    brands: Mapping[str, Brand],
    *,
    base_url: str,
    store: Store,
    oauth: AuthorizationServer | None,
    fetch_policy: FetchPolicy,
    clock: Callable[[], float],
    token_rate_limit: RateLimit | None,
    rate_counters: RateLimitStore | None,
    audit: AuditHook | None,
    turns: MessageSender,
    blocks: AgentOverrides,
) -> PoppyServer | None:
    """The Poppy company side of the Brands that enable Poppy (None: none does), answering
    conversations with the Brands' own bots through `turns`, as `message:send` does.
    `audit` hears Poppy sign-ins and feedback (through the authorization server's `Audit`
    when there is one, so each event is published once). `blocks` are the switches PACT's
    verifier reads, so a blocked agent is refused whichever protocol it speaks."""
    poppy_brands = {
        brand.id: (brand.name, brand.poppy) for brand in brands.values() if brand.poppy is not None
    }
    if not poppy_brands:
        return None
    # A Poppy Brand with PACT delegation also offers Device Sign-In on its consent
    # pages: one grant, one consent page, whichever protocol asked (docs/poppy.md).
    sign_in = {
        brand.id: DeviceSignIn(brand.delegation, oauth.url(brand, "consent"))
        for brand in brands.values()
        if brand.poppy is not None and brand.delegation is not None and oauth is not None
    }
    return PoppyServer(
        base_url=base_url,
        brands=poppy_brands,
        store=store,
        fetch_policy=fetch_policy,
        clock=clock,
        token_rate_limit=token_rate_limit,
        rate_counters=rate_counters,
        sign_in=sign_in,
        # The operator's hook hears Poppy sign-ins and feedback, delegation or not.
        audit=oauth.audit if oauth is not None else Audit(audit),
        bots={brand_id: brands[brand_id] for brand_id in poppy_brands},
        turns=turns,
        blocks=blocks,
    )


def agent_name(verifier: IdentityVerifier, poppy: PoppyServer | None, issuer: str) -> str:
    """What the consent page calls an agent: a registered PACT agent's name, else the
    `client_name` of a Poppy agent's metadata (verified when it asked for the code), else
    its id."""
    agent = verifier.registry.lookup(issuer)
    if agent is not None and agent.name:
        return agent.name
    if poppy is not None:
        metadata = poppy.clients.last_verified(issuer)
        if metadata is not None and metadata.client_name:
            return metadata.client_name
    return issuer


def brand_card(
    brand: Brand,
    *,
    base_url: str,
    identity_scheme: str,
    organization: str,
    oauth: AuthorizationServer | None,
) -> dict[str, Any]:
    """The Agent Card of a Brand. One that offers delegation also declares the
    `userDelegation` device-code scheme and a second security requirement naming both
    schemes (spec §5.1)."""
    card = build_card(
        brand, base_url=base_url, identity_scheme=identity_scheme, organization=organization
    )
    if brand.delegation is not None and oauth is not None:
        card["securitySchemes"]["userDelegation"] = oauth.card_scheme(brand, brand.delegation)
        card["securityRequirements"].append(
            {"schemes": {identity_scheme: {"list": []}, "userDelegation": {"list": []}}}
        )
    return card


__all__ = [
    "agent_name",
    "brand_card",
    "built_from_settings",
    "offers_delegation",
    "poppy_server",
]
