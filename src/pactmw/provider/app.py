"""The framework-neutral PACT Provider: one implementation that every adapter renders.

Processing order (pact-provider.md §2.1): route match (404, no body, before any
authentication), the Agent Card (no authentication), the personal-agent JWT (401), the Brand
lookup (404), rate limits (429), then the operation.

Like the identity verifier, the request flow is a generator that yields what it needs done
(verify a token, read the body, call the store, run the bot) and receives the results; the
sync driver does those things directly, the async driver awaits them (blocking store calls
and sync bots run in worker threads). So there is one flow, not a sync and an async copy.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from pactmw.core.encoding import json_dumps
from pactmw.core.errors import A2AError, AuthenticationFailed, RequestRefused
from pactmw.core.http import Request, Response
from pactmw.core.keys import JwksCache
from pactmw.protocols.delegation import (
    DelegationRejected,
    SigningKeys,
    receipt_claims,
    sign_receipt,
)
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    HandshakeChallenge,
    SessionClosed,
    is_activated,
)
from pactmw.provider.a2a import a2a_json, ok
from pactmw.provider.brand import Brand, Reply, Turn
from pactmw.provider.card import DEFAULT_IDENTITY_SCHEME, build_card, card_response
from pactmw.provider.delegated import (
    FORM_LIMIT,
    AuditHook,
    AuthorizationServer,
    ConsentRefused,
    OAuthError,
)
from pactmw.provider.driver import ACurrentUser, AReadBody, CurrentUser, ReadBody, arun, run
from pactmw.provider.errors import error_response
from pactmw.provider.flow import (
    Flow,
    NeedBody,
    NeedBot,
    NeedIdentity,
    NeedStore,
    NeedUser,
    SubFlow,
)
from pactmw.provider.messages import SendMessage, is_uuid, parse_page_size, parse_send_message
from pactmw.provider.parafe import ParafeAgent, ParafeRefused, ParafeTurn, refusal_task
from pactmw.provider.ratelimit import RateLimit, RateLimiter
from pactmw.provider.routes import MOUNT, PUBLIC_OPERATIONS, Route, match
from pactmw.provider.settings import ProviderSettings
from pactmw.provider.tools import BoundTools, StepUpRequired, ToolRegistry
from pactmw.store import open_store
from pactmw.store.base import Store, StoreUnavailable

logger = logging.getLogger("pactmw.provider")


_UNKNOWN_CONTEXT = "Unknown contextId"


class Provider:
    """Serves PACT 1.0 (Identity profile) for a set of Brands over A2A HTTP+JSON.

    Thread-safe; create one per process and share it. `clock` is wall-clock epoch seconds.
    """

    def __init__(
        self,
        *,
        base_url: str,
        verifier: IdentityVerifier,
        store: Store,
        brands: Iterable[Brand],
        identity_scheme: str = DEFAULT_IDENTITY_SCHEME,
        organization: str = "",
        rate_limit: RateLimit | None = None,
        max_body_bytes: int = 1024 * 1024,
        conversation_idle_timeout: float | None = None,
        claim_lease_seconds: float = 120.0,
        signing_keys: SigningKeys | None = None,
        audit: AuditHook | None = None,
        consent_rate_limit: RateLimit | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.verifier = verifier
        self.store = store
        self.brands = {brand.id: brand for brand in brands}
        self.identity_scheme = identity_scheme
        self.organization = organization
        self.rate_limiter = RateLimiter(rate_limit or RateLimit())
        self.max_body_bytes = max_body_bytes
        self.conversation_idle_timeout = conversation_idle_timeout
        self.claim_lease_seconds = claim_lease_seconds
        self._clock = clock
        #: The Delegated profile's authorization server, when any Brand offers delegation.
        self.oauth: AuthorizationServer | None = None
        if any(brand.delegation is not None for brand in self.brands.values()):
            if signing_keys is None:
                raise ValueError("Brands that offer delegation need signing_keys")
            self.oauth = AuthorizationServer(
                base_url=self.base_url,
                store=store,
                keys=signing_keys,
                clock=clock,
                agent_name=self._agent_name,
                brand_keys=JwksCache(verifier.keys.fetch_policy),
                consent_rate_limit=consent_rate_limit,
                audit=audit,
            )
        #: The Parafé runtime of each Brand that configures Parafé (proof replay in the store).
        self.parafe: dict[str, ParafeAgent] = {
            brand.id: ParafeAgent(brand.parafe, store=store, clock=clock)
            for brand in self.brands.values()
            if brand.parafe is not None
        }
        # Cards are static per Brand: render them once.
        self._cards = {
            brand.id: card_response(self.card(brand.id)) for brand in self.brands.values()
        }

    @classmethod
    def from_settings(
        cls,
        settings: ProviderSettings,
        *,
        store: Store | None = None,
        clock: Callable[[], float] | None = None,
        signing_keys: SigningKeys | None = None,
        audit: AuditHook | None = None,
    ) -> Provider:
        """Build from settings; opens `settings.store` unless a store is given.

        Runtime enable/disable of personal agents is persisted in the store. `signing_keys`
        overrides the configured ones (a tool that only revokes grants needs no private key);
        `audit` receives the delegation audit events.
        """
        store = store or open_store(settings.store)
        extra: dict[str, Any] = {} if clock is None else {"clock": clock}
        return cls(
            base_url=settings.base_url,
            verifier=settings.identity.build_verifier(overrides=store, **extra),
            store=store,
            brands=settings.brands,
            identity_scheme=settings.identity_scheme,
            organization=settings.organization,
            rate_limit=settings.rate_limit,
            max_body_bytes=settings.max_body_bytes,
            conversation_idle_timeout=settings.conversation_idle_timeout,
            claim_lease_seconds=settings.claim_lease_seconds,
            signing_keys=signing_keys or settings.signing_keys(),
            audit=audit,
            **extra,
        )

    def card(self, brand_id: str) -> dict[str, Any]:
        """The Agent Card of a Brand (KeyError for an unknown Brand).

        A Brand that offers delegation also declares the `userDelegation` device-code scheme
        and a second security requirement naming both schemes (spec §5.1).
        """
        brand = self.brands[brand_id]
        card = build_card(
            brand,
            base_url=self.base_url,
            identity_scheme=self.identity_scheme,
            organization=self.organization,
        )
        if brand.delegation is not None and self.oauth is not None:
            card["securitySchemes"]["userDelegation"] = self.oauth.card_scheme(
                brand, brand.delegation
            )
            card["securityRequirements"].append(
                {"schemes": {self.identity_scheme: {"list": []}, "userDelegation": {"list": []}}}
            )
        return card

    def _agent_name(self, issuer: str) -> str:
        agent = self.verifier.registry.lookup(issuer)
        return agent.name if agent is not None and agent.name else issuer

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke one delegation grant now (its tokens fail on their next request)."""
        return self._oauth().revoke_grant(grant_id)

    def revoke_account(self, account: str, *, brand_id: str | None = None) -> list[str]:
        """Revoke every grant of a Brand account: call it when the account is disabled."""
        return self._oauth().revoke_account(account, brand_id=brand_id, reason="account")

    def _oauth(self) -> AuthorizationServer:
        if self.oauth is None:
            raise RuntimeError("no Brand of this Provider offers delegation")
        return self.oauth

    def matches(self, method: str, path: str) -> bool:
        """Tell whether the Provider serves this path (anything under `/a2a/`)."""
        return path.startswith(MOUNT)

    def parafe_agent(self, brand_id: str) -> ParafeAgent:
        """The Parafé runtime of a Brand (KeyError when it has no `parafe` configuration);
        what `@parafe_action` uses on an app's own endpoints."""
        return self.parafe[brand_id]

    def close(self) -> None:
        for agent in self.parafe.values():
            agent.close()
        self.store.close()

    # -- the flow ------------------------------------------------------------------------

    def _flow(self, request: Request) -> Flow:
        route = match(request.method, request.path)
        if route is None:
            raise RequestRefused(404)
        brand = self.brands.get(route.brand_id)
        if route.operation in PUBLIC_OPERATIONS:
            if brand is None:
                raise RequestRefused(404)
            if route.operation == "card":
                return self._cards[brand.id]
            return (yield from self._public_oauth(route, brand, request))
        caller: PersonalAgent = yield NeedIdentity(request.header("authorization"), route.brand_id)
        if brand is None:
            raise RequestRefused(404)
        delegation_header = request.delegation_token()
        if delegation_header is not None:
            if self.oauth is None:
                raise DelegationRejected("not_offered", "this Brand offers no delegation")
            delegation = yield from self.oauth.verify_delegation(brand, caller, delegation_header)
            caller = attrs.evolve(caller, delegation=delegation)
        wait = self.rate_limiter.check(caller.issuer, caller.sub, self._clock())
        if wait is not None:
            raise RequestRefused(429, (("Retry-After", str(wait)),))
        parafe = self.parafe.get(brand.id)
        activated = parafe is not None and is_activated(request.headers)
        if route.operation == "send":
            body = yield NeedBody(self.max_body_bytes)
            if body is None:
                raise RequestRefused(413)
            message = parse_send_message(body)
            if parafe is not None:
                activated = activated or is_activated((), message.message)
                _check_activation(parafe, activated)
            response = yield from self._send(brand, caller, message, parafe, activated)
            # An agent that processed Parafé data says so in the response (spec §3).
            return _with_extension(response) if activated else response
        if route.operation in ("oauth_device_authorization", "oauth_token"):
            config = brand.delegation
            if config is None or self.oauth is None:
                raise RequestRefused(404)
            form = yield NeedBody(FORM_LIMIT)
            if form is None:
                raise RequestRefused(413)
            if route.operation == "oauth_token":
                return (yield from self.oauth.token(brand, config, caller, form))
            return (yield from self.oauth.device_authorization(brand, config, caller, form))
        if parafe is not None:
            _check_activation(parafe, activated)
        return _simple_operation(route, request)

    def _public_oauth(self, route: Route, brand: Brand, request: Request) -> Flow:
        """The authorization server's documents and the consent pages (no PACT JWT)."""
        config = brand.delegation
        if config is None or self.oauth is None:
            raise RequestRefused(404)
        oauth = self.oauth
        if route.operation == "oauth_metadata":
            return oauth.metadata(brand, config)
        if route.operation == "oauth_jwks":
            return oauth.jwks()
        if route.operation == "consent_result":
            return oauth.result(brand, config, request)
        try:
            user = (yield NeedUser()) if config.mode == "same-app" else None
            if route.operation == "consent" and request.method == "GET":
                return (yield from oauth.consent(brand, config, request, user, None))
            body = yield NeedBody(FORM_LIMIT)
            if body is None:
                raise RequestRefused(413)
            if route.operation == "consent":
                return (yield from oauth.consent(brand, config, request, user, body))
            return (yield from oauth.decision(brand, config, request, user, body))
        except OAuthError as exc:  # a malformed form on a page a person sees: an HTML answer
            return error_response(ConsentRefused(exc.description, 400), pages=config.pages)
        except ConsentRefused as exc:
            return error_response(exc, pages=config.pages)
        except (RequestRefused, AuthenticationFailed):
            raise
        except StoreUnavailable as exc:
            logger.error("store unavailable on a consent page: %s", exc)
            busy = "The service is busy. Please try again in a moment."
            return error_response(ConsentRefused(busy, 503), pages=config.pages)
        except Exception:
            # A person's browser gets an HTML page, never an A2A JSON error. The usual cause
            # is `current_user` reading what the host app's middleware sets (a session, a
            # signed-in user) while the Provider runs outside that middleware.
            logger.exception(
                "consent page of brand %r failed (if current_user reads the host app's "
                "session or user, serve the Provider inside the host app, after its "
                "middleware: pactmw.adapters.asgi.a2a_mount)",
                brand.id,
            )
            failed = "Something went wrong on our side. Please try again later."
            return error_response(ConsentRefused(failed, 500), pages=config.pages)

    def _send(
        self,
        brand: Brand,
        caller: PersonalAgent,
        message: SendMessage,
        parafe: ParafeAgent | None = None,
        activated: bool = False,
    ) -> Flow:
        now = self._clock()
        store = self.store
        closed = False
        if message.context_id is None:
            context_id: str = yield NeedStore(
                store.create_conversation,
                {"brand_id": brand.id, "issuer": caller.issuer, "sub": caller.sub, "now": now},
            )
        else:
            context_id = message.context_id
            conversation = (
                (yield NeedStore(store.get_conversation, {"context_id": context_id}))
                if is_uuid(context_id)
                else None
            )
            # Unknown, another user's and another Brand's contexts look the same (PACT §4.2).
            if (
                conversation is None
                or conversation.brand_id != brand.id
                or conversation.issuer != caller.issuer
                or conversation.sub != caller.sub
            ):
                raise A2AError("INVALID_PARAMS", _UNKNOWN_CONTEXT)
            closed = conversation.closed
            idle = self.conversation_idle_timeout
            if not closed and idle is not None and now - conversation.last_activity > idle:
                yield NeedStore(store.close_conversation, {"context_id": context_id})
                closed = True
        delegation = caller.delegation
        if delegation is not None:
            # Once a turn ran as one Brand account, the context stays with it (spec §5.5).
            bound = yield NeedStore(
                store.bind_account, {"context_id": context_id, "account": delegation.account}
            )
            if bound != delegation.account:
                raise A2AError("INVALID_PARAMS", "contextId already runs as a different Brand user")
        claim = yield NeedStore(
            store.claim_message,
            {
                "context_id": context_id,
                "message_id": message.message_id,
                "text": message.text,
                "now": now,
                "lease_seconds": self.claim_lease_seconds,
            },
        )
        # A retry is answered even in a closed conversation: the reply that closed it may be
        # the one the personal agent lost (PACT §4.3). Anything new there is refused (§4.2).
        if claim.kind == "reply":
            return a2a_json(200, claim.reply)
        if closed:
            if claim.kind == "new":
                yield NeedStore(
                    store.release_claim,
                    {"context_id": context_id, "message_id": message.message_id},
                )
            raise A2AError("UNSUPPORTED_OPERATION", "Conversation is closed")
        if claim.kind == "pending":
            raise A2AError(
                "INVALID_PARAMS",
                "messageId was already received in this context and has no reply yet",
            )
        if claim.kind == "conflict":
            raise A2AError("INVALID_PARAMS", "messageId is already in use in this context")
        history = yield NeedStore(store.history, {"context_id": context_id})
        registry = brand.delegation.tools if brand.delegation is not None else ToolRegistry()
        tools = BoundTools(registry, delegation)
        parafe_turn = (
            parafe.turn(message.message, activated=activated)
            if parafe is not None
            else ParafeTurn(None)
        )
        turn = Turn(
            text=message.text,
            parts=message.parts,
            context_id=context_id,
            message_id=message.message_id,
            caller=caller,
            brand=brand,
            history=tuple(history),
            tools=tools,
            parafe=parafe_turn,
        )
        release = NeedStore(
            store.release_claim, {"context_id": context_id, "message_id": message.message_id}
        )
        try:
            if parafe is not None:
                yield from _parafe_members(parafe, parafe_turn)
            result = yield NeedBot(brand.handler, turn)
            reply = _as_reply(result)
            reply_text, close = reply.text, reply.close
            reply_id = str(uuid.uuid4())
            parts: list[dict[str, Any]] = [{"text": reply.text}]
            parts.extend({"data": data} for data in reply.data)
            agent_message: dict[str, Any] = {
                "messageId": reply_id,
                "contextId": context_id,
                "role": "ROLE_AGENT",
                "parts": parts,
            }
            if delegation is not None:
                # Every reply under a delegation token carries a signed receipt (spec §5.6),
                # stored with the reply so a retry returns the very same one.
                agent_message["metadata"] = {"pact.receipt": self._receipt(brand, turn)}
            if parafe is not None:
                # The handshake answer and the turn's action receipts (stored with the reply,
                # so a retry returns the very same ones).
                agent_message = parafe_turn.decorate(agent_message)
            # Serialised here: data the bot returned that is not JSON (NaN, objects) is the
            # bot's failure too, and must release the claim like any other.
            body = json_dumps({"message": agent_message})
        except ParafeRefused as refused:
            # Not a failure: the reply is the refusal, with its Parafé error data and receipts.
            reply_text, refusal = parafe_turn.refusal(refused, context_id)
            reply_id, close = refusal["messageId"], False
            if parafe is not None and parafe.config.refusal == "task":
                task = json_dumps(refusal_task(refusal, refused))
                if refused.task_state == "TASK_STATE_AUTH_REQUIRED":
                    # Like a step-up: the message stays unanswered, so the personal agent can
                    # send it again after a new handshake.
                    yield release
                    parafe.file(parafe_turn.filings())
                    return a2a_json(200, task)
                body = task
            else:
                body = json_dumps({"message": refusal})
        except StepUpRequired as step_up:
            # Not a failure: the turn needs more scopes. The message stays unanswered so the
            # personal agent can send it again once the user has approved (spec §5.5).
            yield release
            if self.oauth is None:
                logger.error(
                    "the bot of brand %r asked for step-up, but no Brand offers delegation",
                    brand.id,
                )
                raise A2AError("INTERNAL", "Internal error") from None
            return (
                yield from self.oauth.step_up(
                    brand, caller, context_id, step_up.missing_scopes, step_up.message
                )
            )
        except Exception:
            # The bot failed: log it here, tell the caller nothing of it, and leave the message
            # unanswered so that a retry runs the bot again.
            logger.exception("turn handler of brand %r failed", brand.id)
            yield release
            raise A2AError("INTERNAL", "Internal error") from None
        yield NeedStore(
            store.store_reply,
            {
                "context_id": context_id,
                "message_id": message.message_id,
                "reply_message_id": reply_id,
                "reply_text": reply_text,
                "reply": body,
                "now": self._clock(),
            },
        )
        if parafe is not None:
            parafe.file(parafe_turn.filings())  # in the background, after the reply is stored
        if close:
            yield NeedStore(store.close_conversation, {"context_id": context_id})
        return a2a_json(200, body)

    def _receipt(self, brand: Brand, turn: Turn) -> dict[str, Any]:
        assert self.oauth is not None
        assert turn.caller.delegation is not None
        claims = receipt_claims(
            delegation=turn.caller.delegation,
            interface_url=self.oauth.interface(brand),
            scopes_used=turn.tools.scopes_used,
            actions=turn.tools.actions,
            now=self._clock(),
        )
        return sign_receipt(claims, self.oauth.keys.signer)

    # -- the two drivers -----------------------------------------------------------------

    def handle(
        self, request: Request, read_body: ReadBody, current_user: CurrentUser | None = None
    ) -> Response:
        """Answer one request (blocking).

        `read_body(limit)` returns the body, or None when it is longer than `limit` bytes; it
        is called only after authentication. `current_user()` tells who is signed in to the
        host app (same-app consent pages only; None when nobody is).
        """
        try:
            response: Response = run(self._flow(request), self.verifier, read_body, current_user)
        except Exception as exc:
            return error_response(exc)
        return response

    async def ahandle(
        self,
        request: Request,
        read_body: AReadBody,
        current_user: CurrentUser | ACurrentUser | None = None,
    ) -> Response:
        """Async `handle`: store calls, key fetches and sync bots run in worker threads."""
        try:
            response: Response = await arun(
                self._flow(request), self.verifier, read_body, current_user
            )
        except Exception as exc:
            return error_response(exc)
        return response

    def verify_delegation(
        self, brand_id: str, caller: PersonalAgent, header: str | None
    ) -> PersonalAgent:
        """For custom endpoints: check an `X-A2A-User-Delegation` header value for a Brand.

        Returns the caller with its `delegation`; raises `DelegationRejected` (401,
        `error="invalid_token"`). The Provider's own routes do this themselves.
        """
        delegation = run(self.delegation_flow(brand_id, caller, header), self.verifier, _no_body)
        return attrs.evolve(caller, delegation=delegation)

    async def averify_delegation(
        self, brand_id: str, caller: PersonalAgent, header: str | None
    ) -> PersonalAgent:
        """Async `verify_delegation`."""
        flow = self.delegation_flow(brand_id, caller, header)
        delegation = await arun(flow, self.verifier, _ano_body)
        return attrs.evolve(caller, delegation=delegation)

    def delegation_flow(self, brand_id: str, caller: PersonalAgent, header: str | None) -> SubFlow:
        """The delegation check as a flow (the guard runs it after the identity check)."""
        brand = self.brands.get(brand_id)
        if brand is None or self.oauth is None:
            raise DelegationRejected("not_offered", "this Brand offers no delegation")
        return (yield from self.oauth.verify_delegation(brand, caller, header))


def _check_activation(parafe: ParafeAgent, activated: bool) -> None:
    """A Brand whose card says Parafé is `required` serves no request that does not activate
    it (spec §2.1: A2A's ExtensionSupportRequiredError)."""
    if parafe.config.required and not activated:
        raise A2AError(
            "EXTENSION_SUPPORT_REQUIRED", f"This agent requires the extension {EXTENSION_URI}"
        )


def _with_extension(response: Response) -> Response:
    return attrs.evolve(response, headers=(*response.headers, ("A2A-Extensions", EXTENSION_URI)))


def _parafe_members(parafe: ParafeAgent, turn: ParafeTurn) -> SubFlow:
    """Answer a `handshake_challenge` (with the broker) or take note of a `session_closed`
    before the bot runs; other Parafé data waits for `turn.parafe.require`."""
    data = turn.data()
    member = data.member if data is not None else None
    if isinstance(member, HandshakeChallenge):
        turn.handshake = yield NeedStore(parafe.answer_handshake, {"challenge": member})
    elif isinstance(member, SessionClosed):
        turn.session_closed = yield NeedStore(parafe.close_session, {"member": member})


def _no_body(limit: int) -> bytes | None:
    return b""


async def _ano_body(limit: int) -> bytes | None:
    return b""


def _simple_operation(route: Route, request: Request) -> Response:
    """The operations with a fixed answer (the card's capabilities are all false)."""
    if route.operation == "list_tasks":
        size = parse_page_size(request.query)
        return ok({"tasks": [], "nextPageToken": "", "pageSize": size, "totalSize": 0})
    if route.operation in ("get_task", "cancel_task"):
        raise A2AError("TASK_NOT_FOUND", f"Task not found: {route.task_id}")
    if route.operation == "push_configs":
        raise A2AError("PUSH_NOTIFICATION_NOT_SUPPORTED", "Push notifications are not supported")
    raise A2AError("UNSUPPORTED_OPERATION", "Unsupported operation")


def _as_reply(result: Any) -> Reply:
    if isinstance(result, str):
        result = Reply(text=result)
    if not isinstance(result, Reply):
        raise TypeError(f"a turn handler must return str or Reply, not {type(result).__name__}")
    if not isinstance(result.text, str):
        raise TypeError(f"Reply.text must be str, not {type(result.text).__name__}")
    if "\x00" in result.text:
        # Stores refuse NUL; refusing it here releases the claim like any bot failure.
        raise ValueError("a reply text must not contain NUL characters")
    return result


__all__ = [
    "Provider",
]
