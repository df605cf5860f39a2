"""What a host app's own code asks of a Provider besides answering its routes: revoking
grants, the Poppy document and Session checks of the app's own site and APIs, and delegation
checks on its custom endpoints. `Provider` hands each of these calls here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from pactmw.core.encoding import is_storable_text
from pactmw.core.errors import RequestRefused
from pactmw.core.http import Request, Response
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.provider._delegation_check import checked_delegation
from pactmw.provider.brand import Brand
from pactmw.provider.delegated import AuthorizationServer, DelegationGrant, SignedInUser
from pactmw.provider.driver import ano_body, arun, no_body, run
from pactmw.provider.errors import error_response
from pactmw.provider.flow import SubFlow
from pactmw.provider.poppy import (
    JsonAnswer,
    PoppyCaller,
    PoppyOperations,
    PoppyServer,
    Proposal,
    check_session_brand,
)
from pactmw.provider.routes import allow, for_method, options_response, routed_method


@attrs.frozen
class AppCalls:
    """The app-facing calls over one Provider's parts (None: no Brand offers that part)."""

    brands: Mapping[str, Brand]
    verifier: IdentityVerifier
    oauth: AuthorizationServer | None
    poppy: PoppyServer | None

    # -- revocation ------------------------------------------------------------------------

    def revoke_grant(self, grant_id: str) -> bool:
        if self.oauth is None and self.poppy is not None:
            return self.poppy.revoke_grant(grant_id)
        return self._oauth().revoke_grant(grant_id)

    def revoke_account(self, account: str, brand_id: str | None) -> list[str]:
        if self.oauth is None and self.poppy is not None:
            return self.poppy.revoke_account(account, brand_id=brand_id)
        return self._oauth().revoke_account(account, brand_id=brand_id, reason="account")

    def _oauth(self) -> AuthorizationServer:
        if self.oauth is None:
            raise RuntimeError("no Brand of this Provider offers delegation or Poppy")
        return self.oauth

    # -- a grant for the app's own tests ----------------------------------------------------

    def grant_delegation(
        self,
        brand_id: str,
        *,
        account: str,
        agent_issuer: str,
        agent_sub: str,
        scopes: Iterable[str],
    ) -> DelegationGrant:
        # Each refusal names its argument: a test's typo is read in the test's traceback.
        brand = self.brands.get(brand_id)
        if brand is None:
            known = ", ".join(repr(known) for known in self.brands) or "none"
            raise ValueError(f"brand_id: no Brand {brand_id!r} (this Provider's: {known})")
        config = brand.delegation
        if config is None or self.oauth is None:
            raise ValueError(f"brand_id: Brand {brand_id!r} offers no delegation")
        for name, value in (
            ("account", account),
            ("agent_issuer", agent_issuer),
            ("agent_sub", agent_sub),
        ):
            # The store's rule for text (`is_storable_text`): NUL, or a lone surrogate.
            if not isinstance(value, str) or not value or not is_storable_text(value):
                raise ValueError(f"{name}: a non-empty string without NUL, not {value!r}")
        self._check_agent(agent_issuer)
        if isinstance(scopes, str):
            # One string iterates by letter: each letter would be "not offered".
            raise ValueError(f"scopes: a list of scope ids, not the string {scopes!r}")
        wanted = tuple(dict.fromkeys(scopes))
        offered = ", ".join(config.scopes)
        if not wanted:
            raise ValueError(f"scopes: name at least one of Brand {brand_id!r}'s: {offered}")
        for scope in wanted:
            if scope not in config.scopes:
                raise ValueError(
                    f"scopes: {scope!r} is not offered by Brand {brand_id!r} (it offers: {offered})"
                )
        # The agent as PACT binds a grant: its issuer (the client_id) and its user (`sub`).
        agent = PersonalAgent(agent_issuer, agent_sub, "", {}, "")
        user = SignedInUser(account=account, label=account)
        flow = self.oauth.grant(brand, config, agent, user, wanted)
        granted: DelegationGrant = run(flow, self.verifier, no_body)
        return granted

    def _check_agent(self, issuer: str) -> None:
        # As on a request, the verifier's registry decides (configured agents, those added
        # at runtime): a token for an issuer it refuses could never be presented, and the
        # test would only see a 401 far from its typo. An open Provider accepts any issuer
        # its discovery finds, which needs the network: that is left to the request.
        agent = self.verifier.registry.lookup(issuer)
        if agent is None and not self.verifier.open_mode:
            known = ", ".join(repr(known.issuer) for known in self.verifier.registry) or "none"
            raise ValueError(
                f"agent_issuer: no agent {issuer!r} is known to this Provider "
                f"(configured: {known}; or one added at runtime)"
            )
        if agent is not None and not agent.enabled:
            raise ValueError(f"agent_issuer: the agent {issuer!r} is disabled")

    # -- Poppy on the app's own site and APIs ----------------------------------------------

    def poppy_discovery(self, brand_id: str, host: str | None, method: str) -> Response:
        # The adapters' helpers check where they are made; a direct call is named here.
        check_session_brand(
            self.brands.values(), brand_id, f"Provider.poppy_discovery({brand_id!r})"
        )
        poppy = self._poppy()
        if method == "OPTIONS":  # as the Provider's own public documents answer it
            return options_response(("GET",), public=True)
        if routed_method(method) != "GET":
            # A route of the Brand's own site, not the Provider's table: refused as the
            # frameworks refuse a method their GET routes lack (RFC 9110 §15.5.6).
            return error_response(RequestRefused(405, (allow("GET"),)))
        try:
            response = poppy.brand_discovery(brand_id, host)
        except Exception as exc:
            response = error_response(exc)
        return for_method(method, response)

    def poppy_session(
        self, brand_id: str, request: Request, scopes: tuple[str, ...]
    ) -> PoppyCaller:
        self._check_session_brand(brand_id)
        flow = self._poppy().session_flow(brand_id, request, scopes)
        caller: PoppyCaller = run(flow, self.verifier, no_body)
        return caller

    async def apoppy_session(
        self, brand_id: str, request: Request, scopes: tuple[str, ...]
    ) -> PoppyCaller:
        self._check_session_brand(brand_id)
        flow = self._poppy().session_flow(brand_id, request, scopes)
        caller: PoppyCaller = await arun(flow, self.verifier, ano_body)
        return caller

    def poppy_propose(self, caller: PoppyCaller, proposal: Proposal) -> JsonAnswer:
        flow = self._poppy_operations().proposal_answer(caller, proposal)
        answer: JsonAnswer = run(flow, self.verifier, no_body)
        return answer

    async def apoppy_propose(self, caller: PoppyCaller, proposal: Proposal) -> JsonAnswer:
        flow = self._poppy_operations().proposal_answer(caller, proposal)
        answer: JsonAnswer = await arun(flow, self.verifier, ano_body)
        return answer

    def _check_session_brand(self, brand_id: str) -> None:
        # The adapters check where they are built; a direct call is named here, never a
        # KeyError.
        check_session_brand(self.brands.values(), brand_id, f"Provider.poppy_session({brand_id!r})")

    def _poppy_operations(self) -> PoppyOperations:
        operations = self._poppy().operations
        if operations is None:
            raise ValueError("no Brand of this Provider sets poppy.operations")
        return operations

    def _poppy(self) -> PoppyServer:
        if self.poppy is None:
            raise RuntimeError("no Brand of this Provider enables Poppy")
        return self.poppy

    # -- delegation on custom endpoints ----------------------------------------------------

    def verify_delegation(
        self, brand_id: str, caller: PersonalAgent, header: str | None
    ) -> PersonalAgent:
        delegation = run(self.delegation_flow(brand_id, caller, header), self.verifier, no_body)
        return attrs.evolve(caller, delegation=delegation)

    async def averify_delegation(
        self, brand_id: str, caller: PersonalAgent, header: str | None
    ) -> PersonalAgent:
        flow = self.delegation_flow(brand_id, caller, header)
        delegation = await arun(flow, self.verifier, ano_body, threads=self.verifier.threads)
        return attrs.evolve(caller, delegation=delegation)

    def delegation_flow(self, brand_id: str, caller: PersonalAgent, header: str | None) -> SubFlow:
        brand = self.brands.get(brand_id)
        return checked_delegation(self.oauth, brand, caller, header, brand_id=brand_id)


__all__ = [
    "AppCalls",
]
