"""The consent pages a person sees in a browser: code entry, consent, and the decision
(the page after it is `_result_page`)."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, urlencode

from attrs import frozen

from pactmw.core.http import Response
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.consent_pages import ConsentView
from pactmw.provider.delegated._assertion import BrandAssertions, SignInReused
from pactmw.provider.delegated._audit import AuditEvent
from pactmw.provider.delegated._codes import new_grant_id, normalize_user_code
from pactmw.provider.delegated._context import ServerContext, origin_of, serialized_origin
from pactmw.provider.delegated._details import approved, device_owner, grant_owner, held, keep
from pactmw.provider.delegated._errors import ConsentRefused
from pactmw.provider.delegated._forms import parse_form, single_value
from pactmw.provider.delegated._page_limit import PageRateLimit
from pactmw.provider.delegated._responses import code_entry_page, login_redirect, page, redirect
from pactmw.provider.delegated._result_page import ResultPage, conditions, described
from pactmw.provider.delegated._sessions import (
    ConsentOutcomes,
    ConsentSessions,
    Outcome,
    PageVisit,
    SignedInUser,
    is_navigation,
)
from pactmw.provider.flow import Flow, SubFlow, store
from pactmw.provider.routes import allow
from pactmw.store.base import Approval, DeviceAuthorization, Grant

#: The longest typed code shown back in the form after a typo (a code is 9 characters).
_ECHOED = 32


@frozen
class ConsentEndpoint:
    """Where a person approves or denies what their personal agent asked for
    (`agent_name(issuer)`: what the pages call a personal agent, never empty)."""

    ctx: ServerContext
    agent_name: Callable[[str], str]
    #: Per client address: user-code guessing and form floods hit this long before 20^8.
    #: Shared with the connected agents page.
    limit: PageRateLimit
    sessions: ConsentSessions
    assertions: BrandAssertions
    outcomes: ConsentOutcomes
    #: The connected agents page of a Brand, when the Provider serves one.
    manage_url: Callable[[Brand], str | None]

    def consent(self, visit: PageVisit, body: bytes | None) -> Flow:
        brand, config, user = visit.brand, visit.config, visit.user
        yield from self.limit.admit(visit.request)
        consent_url = self.ctx.url(brand, "consent")
        if visit.request.method == "POST":
            if config.mode != "brand" or body is None:
                # Same-app consent is GET only (a POST is brand mode's assertion).
                raise ConsentRefused("This page does not accept that.", 405, (allow("GET"),))
            assertion = single_value(parse_form(body), "assertion")
            try:
                user, user_code = yield from self.assertions.verify(brand, config, assertion)
            except SignInReused as reused:
                return (yield from self._answered_before(brand, config, reused))
            if is_navigation(visit.request):
                # Post/Redirect/Get, for a browser: Back and Reload then GET the page. A
                # program gets the page itself, as PACT's delegated suite reads it (200).
                return self.sessions.signed_in_redirect(brand, user, user_code)
        else:
            typed = parse_qs(visit.request.query).get("user_code", [""])[0]
            if not typed:
                return self._code_entry(config, config.pages.code_entry(consent_url))
            normalized = normalize_user_code(typed)
            if normalized is None:
                # Typed back to correct, unless far longer than any code typed by hand.
                echoed = typed if len(typed) <= _ECHOED else ""
                error = config.pages.translate("That is not a valid code.")
                invalid = config.pages.code_entry(consent_url, error, echoed)
                return self._code_entry(config, invalid, 400)
            user_code = normalized
            user = visit.host_user()
            if config.mode == "brand":
                user = self.sessions.signed_in(brand, visit.request, user_code)
            if user is None:
                here = f"{consent_url}?{urlencode({'user_code': user_code})}"
                return login_redirect(config, here)
        assert user is not None
        try:
            authorization = yield from self._pending(brand, user_code, user)
        except ConsentRefused as unusable:
            # A mistyped or stale code: the form again, with the code to correct or replace
            # (an error page was a dead end). It says no more than the error page did.
            error = config.pages.translate(unusable.message, **unusable.params)
            retry = config.pages.code_entry(consent_url, error, user_code)
            return self._code_entry(config, retry, unusable.status)
        if authorization.status != "pending":
            return (yield from self._decided(brand, config, authorization, user))
        # A Poppy sign-in names its user only at the poll: no grant to show or skip by yet.
        grant: Grant | None = None
        if authorization.pa_sub is not None:
            grant = yield store(
                self.ctx.store.live_grant,
                brand_id=brand.id,
                account=user.account,
                client_id=authorization.client_id,
                pa_sub=authorization.pa_sub,
                now=self.ctx.clock(),
            )
        asked = yield from held(
            self.ctx.store, config, device_owner(authorization.device_code_hash)
        )
        # What the agent already holds: shown on a step-up, and a skip must not widen it.
        kept = (
            (yield from held(self.ctx.store, config, grant_owner(grant.grant_id)))
            if grant is not None
            else ()
        )
        # New authorization details are conditions the person must see: no skipping.
        if (
            config.skip_consent_if_granted
            and grant is not None
            and set(authorization.scopes) <= set(grant.scopes)
            and all(entry in kept for entry in asked)
        ):
            return (
                yield from self.approve(brand, config, authorization, user, authorization.scopes)
            )
        session = self.sessions.mint(brand, user, user_code)
        view = ConsentView(
            brand_name=brand.name,
            agent_name=self.agent_name(authorization.client_id),
            agent_origin=origin_of(authorization.client_id),
            signed_in_as=user.label,
            scopes=tuple((s, config.scopes[s]) for s in authorization.scopes if s in config.scopes),
            decision_url=self.ctx.url(brand, "consent/decision"),
            session=session,
            conditions=conditions(config, asked),
            lasts=config.grant_lifetime,
            already=described(config, grant.scopes if grant is not None else ()),
            already_conditions=conditions(config, kept),
            manage_url=self.manage_url(brand),
            user_code=user_code,
        )
        return page(config.pages.consent(view))

    def decision(self, visit: PageVisit, body: bytes) -> Flow:
        brand, config = visit.brand, visit.config
        yield from self.limit.admit(visit.request)
        if not self.ctx.same_origin(visit.request):
            # A cross-site form post: the session token already binds the user and the code,
            # this refuses the request before it gets anywhere near them.
            raise ConsentRefused("This request did not come from the consent page.", 403)
        form = parse_form(body)
        sessions = form.get("session", [])
        if len(sessions) != 1:
            raise ConsentRefused("This consent page is no longer valid. Start again.", 400)
        signed_in, user_code = self.sessions.read(brand, sessions[0])
        if visit.is_not(signed_in):
            raise ConsentRefused("Sign in as the person who was asked, then start again.", 403)
        authorization = yield from self._pending(brand, user_code, signed_in)
        if authorization.status != "pending":
            return (yield from self._decided(brand, config, authorization, signed_in))
        ticked = set(form.get("scope", []))
        granted = tuple(s for s in authorization.scopes if s in ticked)
        if form.get("decision") != ["allow"] or not granted:
            return (yield from self._deny(brand, config, user_code, authorization, signed_in))
        return (yield from self.approve(brand, config, authorization, signed_in, granted))

    def _code_entry(self, config: DelegationConfig, html: str, status: int = 200) -> Response:
        return code_entry_page(config, serialized_origin(self.ctx.base_url), html, status)

    def _answered_before(
        self, brand: Brand, config: DelegationConfig, reused: SignInReused
    ) -> Flow:
        """A spent sign-in posted again (Back or reload after the decision): the answer its
        person gave on its code, shown again; anything else stays refused. It never opens
        the form again: a pending code keeps the single-use refusal."""
        if reused.user_code is None:
            raise reused
        try:
            authorization = yield from self._pending(brand, reused.user_code, reused.user)
        except ConsentRefused:
            raise reused from None
        if authorization.status == "pending":
            raise reused
        return (yield from self._decided(brand, config, authorization, reused.user))

    def _pending(self, brand: Brand, user_code: str, person: SignedInUser) -> SubFlow:
        """The pending, unexpired device authorization of this Brand with `user_code`, or the
        one `person` already decided (to be shown that decision, never to decide again)."""
        found: DeviceAuthorization | None = yield store(
            self.ctx.store.device_authorization_by_user_code, user_code=user_code
        )
        if (
            found is not None
            and found.brand_id == brand.id
            and found.status != "pending"
            and found.account == person.account
        ):
            return found
        if (
            found is None
            or found.brand_id != brand.id
            or found.status != "pending"
            or found.expires_at <= self.ctx.clock()
        ):
            raise ConsentRefused.unusable_code()
        return found

    def _decided(
        self,
        brand: Brand,
        config: DelegationConfig,
        authorization: DeviceAuthorization,
        user: SignedInUser,
    ) -> Flow:
        """What `user` already decided on this code, shown again (400: nothing is decided):
        Allow pressed twice, a form sent again after Back or from another tab, the link
        opened again. They got an error page saying the code was used, after an approval
        that had worked."""
        outcome = Outcome.of(authorization)
        if outcome is None:
            # Not decided after all: callers pass decided ones only; the code's error page.
            raise ConsentRefused.unusable_code()
        result = ResultPage(
            self.ctx, agent_name=self.agent_name, outcomes=self.outcomes, manage_url=self.manage_url
        )
        return (yield from result.shown(brand, config, outcome, again=True))

    def _taken_meanwhile(
        self, brand: Brand, config: DelegationConfig, user_code: str, user: SignedInUser
    ) -> Flow:
        """A decision lost to another one taken meanwhile: that one, shown, when it was
        `user`'s own (Allow pressed twice), else the code's error page (it expired)."""
        authorization = yield from self._pending(brand, user_code, user)
        if authorization.status == "pending":
            raise ConsentRefused.unusable_code()
        return (yield from self._decided(brand, config, authorization, user))

    def _deny(
        self,
        brand: Brand,
        config: DelegationConfig,
        user_code: str,
        authorization: DeviceAuthorization,
        signed_in: SignedInUser,
    ) -> Flow:
        decided = yield store(
            self.ctx.store.decide_device_authorization,
            user_code=user_code,
            approved=False,
            account=signed_in.account,
            granted_scopes=(),
            grant_id=None,
            now=self.ctx.clock(),
        )
        if decided is None:
            return (yield from self._taken_meanwhile(brand, config, user_code, signed_in))
        self.ctx.audit.publish(
            AuditEvent(
                name="agent.delegation_denied",
                brand_id=brand.id,
                issuer=authorization.client_id,
                account=signed_in.account,
                scopes=authorization.scopes,
            )
        )
        return self._to_result(brand, authorization, None)

    def approve(
        self,
        brand: Brand,
        config: DelegationConfig,
        authorization: DeviceAuthorization,
        user: SignedInUser,
        granted: tuple[str, ...],
    ) -> Flow:
        """`user` allows `granted`, the one way a grant is approved (`AuthorizationServer.grant`
        too): recorded or widened, audited; the 303 to the result page."""
        now = self.ctx.clock()
        requested = yield from held(
            self.ctx.store, config, device_owner(authorization.device_code_hash)
        )
        # One atomic store operation: the grant is created or widened only if this approval
        # wins the decision (a concurrent Deny, or expiry, leaves every grant untouched).
        approval: Approval | None = yield store(
            self.ctx.store.approve_device_authorization,
            user_code=authorization.user_code,
            brand_id=brand.id,
            account=user.account,
            granted_scopes=granted,
            new_grant_id=new_grant_id(now),
            now=now,
            grant_expires_at=now + config.grant_lifetime,
        )
        if approval is None:
            return (yield from self._taken_meanwhile(brand, config, authorization.user_code, user))
        if approval.grant is None:
            # A Poppy sign-in: its grant is written when the agent's poll binds its user
            # (it asks with no authorization details, so none are kept here).
            return self._to_result(brand, authorization, granted)
        # The entries of unticked scopes are declined with them. Added after the grant is:
        # an entry approved by this decision only (a lost write leaves the grant narrower).
        yield from keep(
            self.ctx.store,
            grant_owner(approval.grant.grant_id),
            approved(config, requested, granted),
            now,
            None,
        )
        self.ctx.audit.grant("agent.delegation_approved", approval.grant, scopes=granted)
        return self._to_result(brand, authorization, granted)

    def _to_result(
        self,
        brand: Brand,
        authorization: DeviceAuthorization,
        granted: tuple[str, ...] | None,
    ) -> Response:
        """303 to the result page with a signed reference to the decision (`granted` None:
        denied)."""
        status = (
            {"status": "denied"}
            if granted is None
            else {"status": "approved", "scope": " ".join(granted)}
        )
        query = urlencode({**status, "outcome": self.outcomes.mint(brand, authorization)})
        return redirect(f"{self.ctx.url(brand, 'connected')}?{query}")


__all__ = [
    "ConsentEndpoint",
]
