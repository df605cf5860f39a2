"""One Brand's Poppy runtime, built once at startup: its settings, the Company it publishes,
its rendered documents, its client assertion verifier and its Device Sign-In."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from attrs import field, frozen

from pactmw.core.client_metadata import ClientMetadataCache
from pactmw.core.http import Response
from pactmw.core.replay import StoreReplayMemory
from pactmw.protocols.poppy import (
    AssertionVerifier,
    PoppyCompany,
    authorization_server_metadata,
    discovery_document,
)
from pactmw.provider.delegated._responses import PUBLIC_DOCUMENT, json_response
from pactmw.provider.poppy._companies import DeviceSignIn
from pactmw.provider.poppy._config import PoppyConfig


@frozen
class PoppyBrand:
    """One Brand's Poppy runtime: its settings, its published description and verifier,
    and its Device Sign-In (None: it offers none)."""

    brand_id: str
    config: PoppyConfig
    company: PoppyCompany
    verifier: AssertionVerifier = field(repr=False)
    metadata: Response = field(repr=False)
    documents: Mapping[str, Response] = field(repr=False)  # served domain -> poppy.json
    sign_in: DeviceSignIn | None = None


def brand_runtimes(
    configs: Mapping[str, PoppyConfig],
    companies: Mapping[str, PoppyCompany],
    sign_in: Mapping[str, DeviceSignIn],
    *,
    clients: ClientMetadataCache,
    assertion_replay: StoreReplayMemory,
    clock: Callable[[], float],
) -> dict[str, PoppyBrand]:
    """Each Brand's runtime, its documents rendered once (they never change while it runs).

    Every verifier shares `clients` and `assertion_replay`: an agent's metadata is fetched
    once for all Brands, and an assertion replayed at another Brand is still a replay."""
    runtimes: dict[str, PoppyBrand] = {}
    for brand_id, config in configs.items():
        company = companies[brand_id]
        runtimes[brand_id] = PoppyBrand(
            brand_id=brand_id,
            config=config,
            company=company,
            verifier=AssertionVerifier(
                issuer=company.issuer, clients=clients, replay=assertion_replay, clock=clock
            ),
            metadata=json_response(authorization_server_metadata(company), extra=PUBLIC_DOCUMENT),
            documents={
                domain: json_response(discovery_document(company, domain), extra=PUBLIC_DOCUMENT)
                for domain in company.poppy_domains
            },
            sign_in=sign_in.get(brand_id),
        )
    return runtimes


__all__ = [
    "PoppyBrand",
    "brand_runtimes",
]
