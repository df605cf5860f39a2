"""One Brand's Poppy runtime, built once at startup: its settings, the Company it publishes,
its rendered documents, its client assertion verifier and its Device Sign-In; and whom it
refuses (`agent_refusal`), the one rule the token, device and revocation endpoints and the
Session check apply."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from attrs import field, frozen

from pactmw.core.client_metadata import ClientMetadataCache
from pactmw.core.http import Response
from pactmw.core.replay import StoreReplayMemory
from pactmw.protocols.identity import AgentOverrides
from pactmw.protocols.poppy import (
    AssertionVerifier,
    PoppyCompany,
    authorization_server_metadata,
    discovery_document,
)
from pactmw.provider.delegated._responses import PUBLIC_DOCUMENT, json_response
from pactmw.provider.flow import SubFlow, store
from pactmw.provider.poppy._companies import DeviceSignIn
from pactmw.provider.poppy._config import PoppyConfig

#: Why a Brand refuses an agent (`agent_refusal`), as its refusals are logged.
NOT_ADMITTED = "this agent is not admitted"
BLOCKED = "this agent is blocked"


def agent_refusal(
    config: PoppyConfig, client_id: str, enabled: bool | None, *, revoking: bool = False
) -> str | None:
    """Why a Brand with these settings refuses the personal agent `client_id` now (None: it
    admits it): not in its `poppy.agents`, or blocked by an operator (`enabled`, the
    agent's block/allow switch, is False), the switch PACT reads for the same issuer, so
    `agents block` stops an agent whichever protocol it speaks.

    A block stops what gives or uses access, not what gives it up: an agent `revoking` its
    own tokens (RFC 7009, Poppy §4.9) only removes access, which is what the operator who
    blocked it wants, so the block lets that through. (A blocked PACT agent has nothing to
    let through: PACT has no revocation endpoint for agents, every request of a blocked one
    is refused, and its grants end by the person's or the operator's revocation.) An agent
    the Brand does not admit is an unknown client, revoking or not: nothing is fetched or
    revoked for it."""
    if not config.admits(client_id):
        return NOT_ADMITTED
    return BLOCKED if enabled is False and not revoking else None


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
    #: The block/allow switches of agents: the PACT verifier's (the store on a Provider).
    blocks: AgentOverrides = field(repr=False)
    sign_in: DeviceSignIn | None = None

    def refusal(self, client_id: str, *, revoking: bool = False) -> SubFlow:
        """Why this Brand refuses `client_id` now, or None (`agent_refusal`); reads the
        switch only for an agent `poppy.agents` admits and when a block would refuse it
        (one store read, on every request as PACT's, so a block is seen at once by every
        process on the store)."""
        if not self.config.admits(client_id) or revoking:
            return agent_refusal(self.config, client_id, None, revoking=revoking)
        enabled: bool | None = yield store(self.blocks.agent_enabled, issuer=client_id)
        return agent_refusal(self.config, client_id, enabled)


def brand_runtimes(
    configs: Mapping[str, PoppyConfig],
    companies: Mapping[str, PoppyCompany],
    sign_in: Mapping[str, DeviceSignIn],
    *,
    clients: ClientMetadataCache,
    assertion_replay: StoreReplayMemory,
    clock: Callable[[], float],
    blocks: AgentOverrides,
) -> dict[str, PoppyBrand]:
    """Each Brand's runtime, its documents rendered once (they never change while it runs).

    Every verifier shares `clients` and `assertion_replay`: an agent's metadata is fetched
    once for all Brands, and an assertion replayed at another Brand is still a replay.
    `blocks` are the agents' block/allow switches (`PoppyBrand.refusal`)."""
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
            blocks=blocks,
        )
    return runtimes


__all__ = [
    "BLOCKED",
    "NOT_ADMITTED",
    "PoppyBrand",
    "agent_refusal",
    "brand_runtimes",
]
