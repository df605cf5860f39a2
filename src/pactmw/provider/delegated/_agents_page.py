"""The connected agents page: a signed-in person sees every agent that can act for them at a
Brand and revokes any of them (AuthKit's account console, for personal agents).

Same-app mode reads the host app's signed-in user; brand mode sends the person to the Brand's
login, which POSTs a single-use assertion for this page (as for consent; a browser's is
answered 303 to the page's GET, signed in there by a cookie). The page carries a
short-lived signed session (the consent pages' CSRF mechanism: bound to the person and this
page, with the Origin check) that every Revoke form posts back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlencode

from attrs import frozen

from pactmw.core.errors import JoseError
from pactmw.core.http import Response
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.consent_pages import ConnectedAgent, ConnectedAgentsView
from pactmw.provider.delegated._assertion import BrandAssertions
from pactmw.provider.delegated._context import ServerContext, origin_of
from pactmw.provider.delegated._details import grant_owner, held
from pactmw.provider.delegated._errors import ConsentRefused
from pactmw.provider.delegated._forms import parse_form, single_value
from pactmw.provider.delegated._page_limit import PageRateLimit
from pactmw.provider.delegated._responses import login_redirect, page, redirect
from pactmw.provider.delegated._result_page import conditions
from pactmw.provider.delegated._revocation import Revocation
from pactmw.provider.delegated._sessions import (
    SIGNED_IN_COOKIE,
    PageVisit,
    SignedInUser,
    cookie_values,
    is_fresh,
    is_navigation,
    mint_page_token,
    read_page_token,
    set_cookie,
)
from pactmw.provider.flow import Flow, SubFlow, store
from pactmw.store.base import Grant

AGENTS_SESSION_TYP = "pact-agents+jwt"
#: How long the page's Revoke buttons work before the person signs in again (brand mode) or
#: reloads it (same-app).
AGENTS_SESSION_LIFETIME = 900
#: Brand mode: who signed in at the Brand's login, carried from the sign-in's 303 (and a
#: Revoke's) to the page's GET in a cookie (Post/Redirect/Get).
AGENTS_SIGNED_IN_TYP = "pact-agents-signed-in+jwt"
PAGE = "agents"


@frozen
class ConnectedAgentsEndpoint:
    """GET shows the page (or sends the person to sign in); POST takes the Brand's assertion
    (brand mode) or a Revoke."""

    ctx: ServerContext
    agent_name: Callable[[str], str]
    #: The consent pages' limit, per client address: one count for every page.
    limit: PageRateLimit
    assertions: BrandAssertions
    #: How a Revoke revokes: as the operator does, Poppy Sessions signed out included.
    revocation: Revocation

    def agents(self, visit: PageVisit, body: bytes | None) -> Flow:
        brand, config = visit.brand, visit.config
        yield from self.limit.admit(visit.request)
        here = self.ctx.url(brand, PAGE)
        if body is None:
            user = visit.host_user()
            if config.mode == "brand":
                user = self._cookie_user(brand, visit)
            if user is None:
                return login_redirect(config, here)
            revoked = yield from self._revoked(brand, user, visit)
            return (yield from self._render(brand, config, user, revoked))
        form = parse_form(body)
        if config.mode == "brand" and "assertion" in form:
            assertion = single_value(form, "assertion")
            signed_in, _ = yield from self.assertions.verify(brand, config, assertion, PAGE)
            if is_navigation(visit.request):
                # Post/Redirect/Get, for a browser: Back and Reload then GET the page.
                return self._to_page(brand, config, signed_in, here)
            return (yield from self._render(brand, config, signed_in, ""))
        if not self.ctx.same_origin(visit.request):
            raise ConsentRefused("This request did not come from the connected agents page.", 403)
        signed_in = self._read_session(brand, single_value(form, "session"))
        if visit.is_not(signed_in):
            raise ConsentRefused("Sign in as the person who opened this page, then reload it.", 403)
        grants = form.get("grant", [])
        if form.get("action") != ["revoke"] or len(grants) != 1:
            raise ConsentRefused("This page does not accept that.", 400)
        revoked = yield from self._revoke(brand, signed_in, grants[0])
        if is_navigation(visit.request):
            # The page's GET names the grant; it shows the notice only to its own person.
            shown = f"{here}?{urlencode({'revoked': grants[0]})}"
            return self._to_page(brand, config, signed_in, shown)
        return (yield from self._render(brand, config, signed_in, revoked))

    def _to_page(
        self, brand: Brand, config: DelegationConfig, user: SignedInUser, location: str
    ) -> Response:
        """303 to the page's GET at `location`; in brand mode with the cookie that signs
        `user` in there (the assertion is single-use; the URL, which lands in access logs,
        never carries a proof of sign-in)."""
        answer = redirect(location)
        if config.mode != "brand":
            return answer
        url = self.ctx.url(brand, PAGE)
        claims = {"aud": url, "sub": user.account, "label": user.label}
        token = mint_page_token(
            self.ctx, claims, typ=AGENTS_SIGNED_IN_TYP, lifetime=AGENTS_SESSION_LIFETIME
        )
        cookie = set_cookie(SIGNED_IN_COOKIE, token, url, AGENTS_SESSION_LIFETIME)
        return Response(status=answer.status, headers=(*answer.headers, cookie))

    def _cookie_user(self, brand: Brand, visit: PageVisit) -> SignedInUser | None:
        """Brand mode: who signed in for this page, by the cookie `_to_page` set."""
        for token in cookie_values(visit.request, SIGNED_IN_COOKIE):
            try:
                return self._read_token(brand, token, AGENTS_SIGNED_IN_TYP)
            except ConsentRefused:
                continue
        return None

    def _revoked(self, brand: Brand, user: SignedInUser, visit: PageVisit) -> SubFlow:
        """The name of the agent a Revoke's 303 names (`?revoked=GRANT`), when that grant is
        this person's at this Brand and revoked; else "" (an edited or foreign link says
        nothing)."""
        named = parse_qs(visit.request.query).get("revoked", [])
        if len(named) != 1:
            return ""
        grant: Grant | None = yield store(self.ctx.store.get_grant, grant_id=named[0])
        if (
            grant is None
            or grant.brand_id != brand.id
            or grant.account != user.account
            or grant.revoked_at is None
        ):
            return ""
        return self.agent_name(grant.client_id)

    def _revoke(self, brand: Brand, signed_in: SignedInUser, grant_id: str) -> SubFlow:
        """Revoke one of the person's own grants at this Brand, as `revoke_grant` does
        (audited); the agent's next request fails. The flow's value is the agent's name."""
        grant: Grant | None = yield store(self.ctx.store.get_grant, grant_id=grant_id)
        if grant is None or grant.brand_id != brand.id or grant.account != signed_in.account:
            # Someone else's grant id is as unknown as a made-up one.
            raise ConsentRefused("That agent is not connected to your account here.", 404)
        name = self.agent_name(grant.client_id)
        yield store(self.revocation.revoke_grant, grant_id=grant_id, reason="revoked by the person")
        return name

    def _render(
        self, brand: Brand, config: DelegationConfig, user: SignedInUser, revoked: str
    ) -> Flow:
        now = self.ctx.clock()
        grants: list[Grant] = yield store(
            self.ctx.store.list_grants, brand_id=brand.id, account=user.account, now=now
        )
        entries: dict[str, tuple[Mapping[str, Any], ...]] = {}
        for grant in grants:
            entries[grant.grant_id] = yield from held(
                self.ctx.store, config, grant_owner(grant.grant_id)
            )
        view = ConnectedAgentsView(
            brand_name=brand.name,
            signed_in_as=user.label,
            agents=tuple(
                ConnectedAgent(
                    grant_id=grant.grant_id,
                    agent_name=self.agent_name(grant.client_id),
                    agent_origin=origin_of(grant.client_id),
                    agent_user=grant.pa_sub,
                    scopes=tuple(
                        (scope, text)
                        for scope, text in config.scopes.items()
                        if scope in grant.scopes
                    ),
                    conditions=conditions(config, entries[grant.grant_id]),
                    since=grant.created_at,
                    last_used=grant.last_used_at,
                    expires_at=grant.expires_at,
                )
                for grant in grants
            ),
            action_url=self.ctx.url(brand, PAGE),
            session=self._mint_session(brand, user),
            revoked=revoked,
        )
        return page(config.pages.connected_agents(view))

    def _mint_session(self, brand: Brand, user: SignedInUser) -> str:
        claims = {"aud": self.ctx.url(brand, PAGE), "sub": user.account, "label": user.label}
        return mint_page_token(
            self.ctx, claims, typ=AGENTS_SESSION_TYP, lifetime=AGENTS_SESSION_LIFETIME
        )

    def _read_session(self, brand: Brand, token: str) -> SignedInUser:
        return self._read_token(brand, token, AGENTS_SESSION_TYP)

    def _read_token(self, brand: Brand, token: str, typ: str) -> SignedInUser:
        expired = ConsentRefused("This page has expired. Open it again.", 400)
        try:
            claims = read_page_token(self.ctx, token, typ=typ)
        except JoseError as exc:
            raise expired from exc
        sub, label = claims.get("sub"), claims.get("label")
        if not is_fresh(self.ctx, claims, self.ctx.url(brand, PAGE)) or not all(
            isinstance(v, str) and v for v in (sub, label)
        ):
            raise expired
        return SignedInUser(account=str(sub), label=str(label))


__all__ = [
    "AGENTS_SESSION_LIFETIME",
    "AGENTS_SESSION_TYP",
    "AGENTS_SIGNED_IN_TYP",
    "PAGE",
    "ConnectedAgentsEndpoint",
]
