"""Starlette's authentication idioms for personal agents: `request.user`/`request.auth`,
an `AuthenticationBackend` for apps that mix schemes, its `on_error`, and `requires`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
)
from starlette.requests import HTTPConnection
from starlette.responses import Response as StarletteResponse
from starlette.types import Scope

from pactmw.adapters._arguments import require_refusal_status, require_strings
from pactmw.adapters._asgi_http import Endpoint, neutral_request, to_starlette, wrap_endpoint
from pactmw.adapters._common import (
    ReadersWarnings,
    instance_or_none,
    make_guard,
    record_checker,
    refusal_reason,
    scope_refusal,
)
from pactmw.core.errors import AuthenticationFailed, PactmwError
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.provider.app import Provider
from pactmw.provider.guard import GUARD_REFUSALS, Guard, GuardRefusal, refusal_response

SCOPE_KEY = "pactmw.personal_agent"
AUTH_SCOPES = ("authenticated", "personal_agent")


class PersonalAgentUser(BaseUser):
    """Starlette's view of a verified personal agent.

    `identity` and `display_name` are the stable `actor_id`: the A2A SDK and other Starlette
    code key ownership on `display_name`, so it must not collide between agents.
    """

    def __init__(self, personal_agent: PersonalAgent) -> None:
        self.personal_agent = personal_agent

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.personal_agent.actor_id

    @property
    def identity(self) -> str:
        return self.personal_agent.actor_id


def auth_scopes(personal_agent: PersonalAgent) -> list[str]:
    """`authenticated`, `personal_agent`, and with a delegation `delegated` plus one
    `scope:<id>` per granted scope (prefixed, so a scope never poses as an app role)."""
    scopes = list(AUTH_SCOPES)
    if personal_agent.delegation is not None:
        scopes.append("delegated")
        scopes.extend(f"scope:{scope}" for scope in sorted(personal_agent.delegation.scopes))
    return scopes


def _credentials(personal_agent: PersonalAgent) -> tuple[AuthCredentials, PersonalAgentUser]:
    """The verified caller as Starlette's `request.auth` and `request.user`."""
    return AuthCredentials(auth_scopes(personal_agent)), PersonalAgentUser(personal_agent)


def attach(scope: Scope, personal_agent: PersonalAgent) -> None:
    """Put the verified caller where Starlette users and the A2A SDK look for it."""
    scope[SCOPE_KEY] = personal_agent
    scope["auth"], scope["user"] = _credentials(personal_agent)


class PersonalAgentAuthError(AuthenticationError, PactmwError):
    """Carries the refusal through Starlette's `AuthenticationMiddleware` to `on_auth_error`:
    `failure`, a refused caller, or the store the check reads that could not be used (a 503;
    its message, which names the database, stays in the log, not in the error's text).
    `response` is the answer, rendered (and a store outage logged) here, once, so that an
    app's own `on_error` does not leave the outage unsaid."""

    def __init__(self, failure: GuardRefusal) -> None:
        super().__init__(refusal_reason(failure))
        self.failure = failure
        self.response = refusal_response(failure)


class PersonalAgentBackend(AuthenticationBackend):
    """For Starlette's `AuthenticationMiddleware` in apps that mix authentication schemes.

    No `Authorization`, or one that is not a PACT JWT of a registered agent (Basic, an opaque
    API token, another issuer's JWT), stays "not a personal agent" (None), so public routes
    and other schemes keep working. A personal agent's token that fails verification is an
    error: pass `on_error=on_auth_error` to answer it with the PACT 401 challenge.
    """

    def __init__(
        self,
        verifier: IdentityVerifier,
        *,
        delegation_provider: Provider | None = None,
        delegation_brand: str | None = None,
    ) -> None:
        self.guard = make_guard(verifier, delegation_provider, delegation_brand)

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        try:
            # Optional: no credential, or the app's other schemes, is anonymous (None).
            caller = await self.guard.aauthenticate(neutral_request(conn.scope), optional=True)
        except GUARD_REFUSALS as exc:  # a store that cannot be used too: its 503
            raise PersonalAgentAuthError(exc) from exc
        record_checker(conn.scope, self.guard)
        if caller is None:
            return None
        # `AuthenticationMiddleware` sets `auth` and `user` from what this returns.
        conn.scope[SCOPE_KEY] = caller
        return _credentials(caller)


def on_auth_error(conn: HTTPConnection, exc: AuthenticationError) -> StarletteResponse:
    """`AuthenticationMiddleware(on_error=...)` that answers with the PACT challenge (or, for
    a store that could not be used, the Provider's 503 with `Retry-After`)."""
    if isinstance(exc, PersonalAgentAuthError):
        return to_starlette(exc.response)
    return to_starlette(refusal_response(AuthenticationFailed("refused")))


def requires(scopes: str | Sequence[str], status_code: int = 403) -> Callable[[Endpoint], Endpoint]:
    """Starlette's `requires` for personal agents (behind `AuthenticationMiddleware` and
    `PersonalAgentBackend`): no personal agent is the PACT 401 challenge, not Starlette's
    bare 403; a missing `scope:<id>` is 403 `insufficient_scope`; another missing scope (an
    app role) is Starlette's empty `status_code` answer. No `redirect`: a personal agent
    follows no login page, and its refusal is the protocol's."""
    # `@requires` without its parentheses gives the endpoint for the scopes: refused here.
    given: list[object] = (
        [scopes] if isinstance(scopes, str) or not isinstance(scopes, Iterable) else list(scopes)
    )
    require_strings(given, "requires", "the scopes to require", "scope:orders:read", scopes=True)
    require_refusal_status(status_code, "requires")
    wanted = [scope for scope in given if isinstance(scope, str)]  # all of them, checked above
    delegated = any(scope == "delegated" or scope.startswith("scope:") for scope in wanted)
    asked = [scope.removeprefix("scope:") for scope in wanted if scope.startswith("scope:")]

    def decorate(endpoint: Endpoint) -> Endpoint:
        # Judged by the Brand of the guard that verified the caller (the backend's), as
        # `delegation_required` judges it.
        warnings = ReadersWarnings(
            "requires() on %s found no authentication: it reads what "
            "AuthenticationMiddleware with PersonalAgentBackend, or PersonalAgentMiddleware "
            "under its prefix, verified; elsewhere use personal_agent_required(verifier)",
            "requires() with scope:...",
            "requires() with scope:...",
        )

        async def around(request: HTTPConnection, call: Callable[[], Awaitable[Any]]) -> Any:
            # Every caller of a request nothing verified is refused, a valid one too
            # (Starlette's own `requires` raises an AssertionError there).
            path = request.url.path  # the caller's path (a Mount's `{param}`)
            warnings(request.scope, verified(request), path, asked, delegated=delegated)
            held = set(request.auth.scopes) if "auth" in request.scope else set()
            missing = [scope for scope in wanted if scope not in held]
            if not missing:
                return await call()
            if "personal_agent" in missing:
                return to_starlette(refusal_response(AuthenticationFailed("missing_token")))
            if any(scope == "delegated" or scope.startswith("scope:") for scope in missing):
                needed = [s.removeprefix("scope:") for s in missing if s.startswith("scope:")]
                refusal = scope_refusal(current_personal_agent(request), needed)
                if refusal is not None:
                    return to_starlette(refusal)
            return StarletteResponse(status_code=status_code)

        return wrap_endpoint(endpoint, around)

    return decorate


def verified(conn: HTTPConnection) -> bool:
    """Whether something checked this request's caller (a middleware, the backend, a
    decorator; anonymous counts): the decorators that only read the caller refuse every
    caller of a request nothing checked, and say so (`OnceWarning`)."""
    return SCOPE_KEY in conn.scope or "auth" in conn.scope


def current_personal_agent(conn: HTTPConnection) -> PersonalAgent | None:
    """The verified caller of this request, or None."""
    return instance_or_none(conn.scope.get(SCOPE_KEY), PersonalAgent)


async def verify_once(conn: HTTPConnection, guard: Guard, optional: bool) -> PersonalAgent | None:
    """The caller a middleware or the backend already verified, else `guard`'s (attached
    for the endpoint; None when `optional` and no personal agent's credential came): how
    the ASGI decorator and FastAPI's scheme check a request. Raises `AuthenticationFailed`."""
    caller = current_personal_agent(conn)
    if caller is None:
        caller = await guard.aauthenticate(neutral_request(conn.scope), optional=optional)
        record_checker(conn.scope, guard)
        if caller is not None:
            attach(conn.scope, caller)
        else:
            # Verified as anonymous (`optional`): recorded as the WSGI adapter records it, so
            # a `delegation_required` under it refuses for want of a delegation, not of a check.
            conn.scope.setdefault(SCOPE_KEY, None)
    return caller


__all__ = [
    "AUTH_SCOPES",
    "SCOPE_KEY",
    "PersonalAgentAuthError",
    "PersonalAgentBackend",
    "PersonalAgentUser",
    "attach",
    "auth_scopes",
    "current_personal_agent",
    "on_auth_error",
    "requires",
    "verified",
    "verify_once",
]
