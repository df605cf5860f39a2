"""The page after a consent decision: what was decided, and what the agent can do now."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs

from attrs import frozen

from pactmw.core.http import Request
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.consent_pages import ResultView
from pactmw.provider.delegated._context import ServerContext, origin_of
from pactmw.provider.delegated._details import grant_owner, held
from pactmw.provider.delegated._responses import page
from pactmw.provider.delegated._sessions import ConsentOutcomes, Outcome
from pactmw.provider.flow import Flow, SubFlow, store
from pactmw.store.base import DeviceAuthorization, Grant


def described(config: DelegationConfig, scopes: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`scopes` with the descriptions the person reads, in the Brand's own order."""
    owned = set(scopes)
    return tuple((scope, text) for scope, text in config.scopes.items() if scope in owned)


def conditions(
    config: DelegationConfig, entries: Sequence[Mapping[str, Any]]
) -> tuple[tuple[str, str], ...]:
    """RFC 9396 authorization detail `entries` as the person reads them: (the scope each
    conditions, its rendering), for the entries of the types the Brand accepts."""
    kinds = {kind.type: kind for kind in config.authorization_details}
    return tuple(
        (kinds[entry["type"]].scope, kinds[entry["type"]].describe(entry))
        for entry in entries
        if entry.get("type") in kinds
    )


@frozen
class ResultPage:
    """Reads the grant again when shown, so it tells what the agent can do at that moment
    (a denied step-up leaves the earlier grant live, and says so)."""

    ctx: ServerContext
    agent_name: Callable[[str], str]
    outcomes: ConsentOutcomes
    #: The connected agents page of a Brand, when the Provider serves one.
    manage_url: Callable[[Brand], str | None]

    def result(self, brand: Brand, config: DelegationConfig, request: Request) -> Flow:
        tokens = parse_qs(request.query).get("outcome", [])
        reference = self.outcomes.read(brand, tokens[0]) if len(tokens) == 1 else None
        outcome: Outcome | None = None
        if reference is not None:
            # The link names no one: whose decision it was is the store's to say.
            found: DeviceAuthorization | None = yield store(
                self.ctx.store.device_authorization_by_user_code, user_code=reference.user_code
            )
            outcome = reference.finds(brand, found)
        if outcome is None:
            unknown = ResultView(
                brand_name=brand.name,
                agent_name="",
                agent_origin="",
                approved=False,
                granted=(),
                can_now=(),
                until=None,
                manage_url=self.manage_url(brand),
                known=False,
            )
            return page(config.pages.result(unknown))
        return (yield from self.shown(brand, config, outcome))

    def shown(
        self, brand: Brand, config: DelegationConfig, outcome: Outcome, *, again: bool = False
    ) -> Flow:
        """The page of `outcome`. `again`: the person answered a request they had already
        answered (Allow pressed twice, a form sent again after Back): 400, nothing decided,
        and the page says their first answer stands."""
        can_now, until, held_now = yield from self._can_now(brand, config, outcome)
        view = ResultView(
            brand_name=brand.name,
            agent_name=self.agent_name(outcome.client_id),
            agent_origin=origin_of(outcome.client_id),
            approved=outcome.approved,
            granted=described(config, outcome.granted),
            can_now=described(config, can_now),
            until=until,
            conditions=conditions(config, held_now),
            manage_url=self.manage_url(brand),
            again=again,
        )
        return page(config.pages.result(view), 400 if again else 200)

    def _can_now(self, brand: Brand, config: DelegationConfig, outcome: Outcome) -> SubFlow:
        """What the agent of a decision can do now, and until when: its live grant's scopes,
        expiry and authorization details, or `((), None, ())` when nothing is shared.

        A Poppy sign-in names its user only when the agent's poll collects the approval
        (`pa_sub` None): once collected, the grant is the bound user's; approved and not yet
        collected, the approval is what the poll will grant, for the Brand's grant lifetime."""
        now = self.ctx.clock()
        nothing: tuple[tuple[str, ...], float | None, tuple[Mapping[str, Any], ...]] = (
            (),
            None,
            (),
        )
        pa_sub = outcome.pa_sub
        if pa_sub is None:
            found: DeviceAuthorization | None = yield store(
                self.ctx.store.device_authorization_by_user_code, user_code=outcome.user_code
            )
            if found is None or (found.brand_id, found.client_id, found.account) != (
                brand.id,
                outcome.client_id,
                outcome.account,
            ):
                return nothing
            if found.pa_sub is None:
                if found.status != "approved" or found.expires_at <= now:
                    # Denied (or never collected): this sign-in grants nothing, but an
                    # earlier approval of the agent by the person may stand.
                    return (yield from self._earlier_approval(brand, config, outcome, now))
                return found.granted_scopes, now + config.grant_lifetime, ()
            pa_sub = found.pa_sub
        grant: Grant | None = yield store(
            self.ctx.store.live_grant,
            brand_id=brand.id,
            account=outcome.account,
            client_id=outcome.client_id,
            pa_sub=pa_sub,
            now=now,
        )
        if grant is None:
            return nothing
        return (yield from self._held(config, grant))

    def _earlier_approval(
        self, brand: Brand, config: DelegationConfig, outcome: Outcome, now: float
    ) -> SubFlow:
        """What an earlier approval of the outcome's agent by the person still lets it do:
        its newest live grant for the person's account, of whichever of the agent's users (a
        Poppy sign-in the person denied named none); `((), None, ())` when there is none."""
        grants: list[Grant] = yield store(
            self.ctx.store.list_grants, brand_id=brand.id, account=outcome.account, now=now
        )
        # Newest first: the approval the person most likely remembers.
        mine = [grant for grant in grants if grant.client_id == outcome.client_id]
        if not mine:
            return (), None, ()
        return (yield from self._held(config, mine[0]))

    def _held(self, config: DelegationConfig, grant: Grant) -> SubFlow:
        entries = yield from held(self.ctx.store, config, grant_owner(grant.grant_id))
        return grant.scopes, grant.expires_at, entries


__all__ = [
    "ResultPage",
    "conditions",
    "described",
]
