"""What each Poppy-enabled Brand publishes: its issuer, its endpoints and its Device Sign-In,
checked at startup so that a setting no personal agent would accept is refused by name."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from attrs import frozen

from pactmw.config import ConfigError
from pactmw.protocols.poppy import PoppyCompany, PoppyConfigError
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.delegated._device import verification_uris
from pactmw.provider.poppy._config import PoppyConfig
from pactmw.provider.poppy._feedback import FEEDBACK_SEGMENT
from pactmw.provider.poppy._operations import OPERATIONS_SEGMENT

#: Where a Brand's issuer sits below `{base_url}/a2a/{brand}`.
ISSUER_SEGMENT = "poppy"
#: Where a Brand's conversation endpoint sits below its issuer (§7).
CONVERSATIONS_SEGMENT = "conversations"


@frozen
class DeviceSignIn:
    """How a Poppy Brand signs people in (§4.6): on its consent pages, with the scopes,
    login, interval and grant lifetime of its PACT `delegation` (one grant whichever
    protocol asked). `consent_url` is the Brand's consent (code entry) page."""

    delegation: DelegationConfig
    consent_url: str

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.delegation.scopes)


def issuer_url(base_url: str, brand_id: str) -> str:
    """The Poppy issuer of a Brand: `{base_url}/a2a/{brand}/poppy`."""
    return f"{base_url.rstrip('/')}/a2a/{brand_id}/{ISSUER_SEGMENT}"


def _within(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


def _check_sign_in_link(brand_id: str, company: PoppyCompany, sign_in: DeviceSignIn) -> None:
    """A personal agent shows a device sign-in link only on the issuer's host, a
    `poppy_domains` domain or a subdomain (PAP-4.6-02): refuse at startup a login page
    elsewhere, which every agent would refuse at sign-in."""
    link, _ = verification_uris(sign_in.consent_url, sign_in.delegation, "BCDF-GHJK")
    host = (urlsplit(link).hostname or "").lower().rstrip(".")
    allowed = ((urlsplit(company.issuer).hostname or "").lower(), *company.poppy_domains)
    if not any(_within(host, domain) for domain in allowed if domain):
        raise ConfigError(
            f"brands.{brand_id}.delegation.login_url must be on {allowed[0]} or one of "
            f"brands.{brand_id}.poppy.domains (or a subdomain): a personal agent refuses a "
            f"device sign-in link on {host} (PAP-4.6-02)"
        )


def _company(
    base_url: str,
    brand_id: str,
    name: str,
    config: PoppyConfig,
    sign_in: DeviceSignIn | None = None,
    conversations: bool = True,
) -> PoppyCompany:
    issuer = issuer_url(base_url, brand_id)
    where = f"brands.{brand_id}.poppy"
    try:
        return PoppyCompany(
            name=name,
            domain=config.domain,
            issuer=issuer,
            token_endpoint=f"{issuer}/token",
            revocation_endpoint=f"{issuer}/revoke",
            device_authorization_endpoint=None if sign_in is None else f"{issuer}/device",
            device_scopes=None if sign_in is None else sign_in.scopes,
            conversations_endpoint=(f"{issuer}/{CONVERSATIONS_SEGMENT}" if conversations else None),
            feedback_endpoint=f"{issuer}/{FEEDBACK_SEGMENT}",
            operations_endpoint=(
                f"{issuer}/{OPERATIONS_SEGMENT}" if config.operations is not None else None
            ),
            custom_scopes=config.custom_scopes,
            apis=config.apis,
            poppy_domains=config.domains,
        )
    except PoppyConfigError as exc:
        # Name the setting the operator wrote, not the protocol object's field.
        message = str(exc)
        if "needs conversations_endpoint" in message:  # until conversations (plan step 6)
            message = f"{where}.apis must list at least one API (conversations come later)"
        message = message.replace("PoppyCompany.poppy_domains", f"{where}.domains")
        message = message.replace("PoppyCompany.", f"{where}.")
        raise ConfigError(message) from exc


def poppy_companies(
    base_url: str,
    brands: Mapping[str, tuple[str, PoppyConfig]],
    sign_in: Mapping[str, DeviceSignIn] | None = None,
    conversations: bool = True,
) -> dict[str, PoppyCompany]:
    """What each Poppy-enabled Brand publishes (with Device Sign-In for those in
    `sign_in`); ConfigError naming the setting when the settings cannot make a valid
    Company (startup checks, PAP-3-05, PAP-3.2-01/02, PAP-4.6-02): the sign-in link is
    checked only here (by `ProviderSettings.from_mapping` and when the Provider is built),
    where a ValueError would reach the frameworks and `pactmw serve` as something other than
    a setting to fix.

    `conversations`: whether the Brands' conversation endpoint is listed (a Provider's
    always is; a `PoppyServer` built without the Brands' bots serves none)."""
    if brands and urlsplit(base_url).scheme != "https":
        first = next(iter(brands))
        raise ConfigError(
            f"base_url must be an https URL when a Brand enables Poppy "
            f"(brands.{first}.poppy): every Poppy URL is https (PAP-3-05)"
        )
    companies: dict[str, PoppyCompany] = {}
    owner: dict[str, str] = {}
    for brand_id, (name, config) in brands.items():
        device = (sign_in or {}).get(brand_id)
        company = _company(base_url.rstrip("/"), brand_id, name, config, device, conversations)
        if device is not None:
            _check_sign_in_link(brand_id, company, device)
        for domain in company.poppy_domains:
            if domain in owner:
                raise ConfigError(
                    f"brands.{brand_id}.poppy.domains: {domain} already serves "
                    f"brands.{owner[domain]}'s poppy.json (one Company per domain)"
                )
            owner[domain] = brand_id
        companies[brand_id] = company
    return companies


__all__ = [
    "CONVERSATIONS_SEGMENT",
    "ISSUER_SEGMENT",
    "DeviceSignIn",
    "issuer_url",
    "poppy_companies",
]
