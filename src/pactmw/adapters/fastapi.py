"""FastAPI dependencies: the verified caller through `Depends`/`Security`.

    personal_agent = PersonalAgentScheme(verifier, delegation_provider=p, delegation_brand="acme")
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get("/orders")
    def orders(caller: PersonalAgent = Security(personal_agent, scopes=["orders:read"])): ...

The scheme shows in `/openapi.json` as an HTTP bearer scheme (JWT), and one that takes
delegations adds `X-A2A-User-Delegation` to its operations as an optional header naming its
Brand. Scopes requested with `Security(..., scopes=[...])` are delegated scopes (the
operation's security requirement): no delegation is 401 `invalid_token`, a missing scope 403
`insufficient_scope`. Refusals are `PersonalAgentRefused`, a FastAPI `HTTPException` carrying
the protocol's `WWW-Authenticate`; with `EXCEPTION_HANDLERS` they answer exactly as the other
adapters do (empty body), else with FastAPI's `{"detail": ...}`. A dependency cannot add
responses to OpenAPI (fastapi#501): `responses=personal_agent.responses()` on the route (or
its router) documents them, `responses(scopes=[...])` with the 403 of a route that asks
scopes. Every rule is the guard's (`pactmw.provider.guard`).

A Brand's API for Poppy agents takes `PoppySessionScheme(provider, "shop")` the same way
(`Security(poppy, scopes=["orders:read"])` gives the `PoppyCaller`, `poppy.responses()` its
refusals); its refusals are `PoppySessionRefused`, answered with Poppy's JSON error by
`EXCEPTION_HANDLERS`. Its OpenAPI scheme is named after the Brand (`PoppySession.shop`): each
Brand's Session Token is a credential of its own.

The Provider itself goes in with the app's routes, in one step (`/a2a/...` and Poppy's
documents): `app.router.routes.extend(pactmw.adapters.asgi.a2a_routes(provider, ...))`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Annotated, Any

from pactmw.adapters._common import require_framework

require_framework("fastapi", __name__, "FastAPI", "fastapi")

from fastapi import Header, HTTPException, Request
from fastapi.openapi.models import HTTPBase as HTTPBaseModel
from fastapi.openapi.models import HTTPBearer as HTTPBearerModel
from fastapi.security import SecurityScopes
from fastapi.security.base import SecurityBase
from starlette.requests import HTTPConnection
from starlette.responses import Response as StarletteResponse

from pactmw.adapters._arguments import (
    require_brand_id,
    require_provider,
    require_verifier_not_optional,
)
from pactmw.adapters._asgi_http import neutral_request, to_starlette
from pactmw.adapters._common import (
    UnofferedScopesWarning,
    make_guard,
    refusal_reason,
    scopes_without_delegation,
    takes_no_delegation,
)
from pactmw.adapters._starlette_auth import current_personal_agent, verify_once
from pactmw.core.errors import PactmwError
from pactmw.core.http import DELEGATION_HEADER, Response
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.protocols.poppy import PoppyError
from pactmw.provider.app import Provider
from pactmw.provider.errors import error_response
from pactmw.provider.guard import GUARD_REFUSALS, GuardRefusal, refusal_response, require_scopes
from pactmw.provider.poppy import PoppyCaller, check_session_brand

#: The headers of pactmw's answer FastAPI's own handler sends too (without
#: `EXCEPTION_HANDLERS`): the challenge, and when to try again after a store outage.
_HANDLERS_HEADERS = frozenset({"www-authenticate", "retry-after"})


class _Refused(HTTPException, PactmwError):
    """A refusal as FastAPI's `HTTPException` (its status, `detail` and the protocol's
    `WWW-Authenticate`, for FastAPI's own handler), carrying pactmw's complete answer in
    `response` for `EXCEPTION_HANDLERS`, which send it as every adapter does."""

    def __init__(self, response: Response, detail: str) -> None:
        self.response = response
        headers = {k: v for k, v in response.headers if k.lower() in _HANDLERS_HEADERS}
        super().__init__(status_code=response.status, detail=detail, headers=headers)


class PersonalAgentRefused(_Refused):
    """A refused caller: `status_code` 401 or 403, the protocol's `WWW-Authenticate`, and
    `reason` (`missing_token`, `expired`, `insufficient_scope`, ...); or a caller that could
    not be checked because the store could not be used (a database not migrated, or down):
    503 with `Retry-After`, `reason` `temporarily_unavailable` (the log says why)."""

    def __init__(self, failure: GuardRefusal) -> None:
        reason = refusal_reason(failure)
        super().__init__(refusal_response(failure), reason)
        self.reason = reason


async def refusal_handler(request: Request, exc: Exception) -> StarletteResponse:
    """Answer a `PersonalAgentRefused` as every pactmw adapter does: the challenge, no body."""
    assert isinstance(exc, PersonalAgentRefused)
    return to_starlette(exc.response)


class PoppySessionRefused(_Refused):
    """A refused Poppy Session: `status_code` 400, 401 or 403, `error` the protocol's code;
    `response` is Poppy's complete answer (JSON body, `WWW-Authenticate: DPoP`)."""

    def __init__(self, refusal: PoppyError) -> None:
        super().__init__(error_response(refusal), refusal.error)
        self.error = refusal.error


async def poppy_refusal_handler(request: Request, exc: Exception) -> StarletteResponse:
    """Answer a `PoppySessionRefused` with Poppy's own JSON error, as every adapter does."""
    assert isinstance(exc, PoppySessionRefused)
    return to_starlette(exc.response)


#: `Security(..., scopes=[...])` as the warnings of a scope no caller can hold name it.
_SECURITY_SCOPES = "Security(PersonalAgentScheme(...), scopes=[...])"

#: The OpenAPI description of `PersonalAgentScheme`, one for every scheme: schemes share a
#: name by default, and OpenAPI keeps one description per name. It documents the one
#: credential every scheme reads in `Authorization`; which Brand's delegation a scheme takes
#: is said on its operations (`_delegation_header`).
_SCHEME_DESCRIPTION = (
    "PACT 1.0 identity JWT of the person's personal agent. Where an operation lists scopes, "
    "they are delegated scopes: the person's delegation, sent in X-A2A-User-Delegation, must "
    "grant them."
)


def _delegation_header(brand_id: str) -> Any:
    """The `X-A2A-User-Delegation` header as a scheme taking `brand_id`'s delegations
    documents it on each of its operations: optional, so that FastAPI never answers for the
    guard, which reads it from the request."""
    return Annotated[
        str | None,
        Header(
            alias=DELEGATION_HEADER,
            description=(
                f"The person's delegation for the Brand `{brand_id}`: `Bearer` and the access "
                "token this site issued to the personal agent for it. Needed by operations "
                "that list scopes; verified when sent."
            ),
        ),
    ]


def _challenge_header(description: str) -> dict[str, Any]:
    """The `WWW-Authenticate` header of a documented 401 or 403."""
    return {"WWW-Authenticate": {"description": description, "schema": {"type": "string"}}}


def _pact_responses(scoped: bool) -> dict[int | str, dict[str, Any]]:
    """The refusals a `PersonalAgentScheme` answers, as FastAPI's `responses=` takes them: 403
    only where `scoped` (the scheme takes delegations and the route asks scopes: without
    delegation no scope can be granted, without scopes none is checked). A refused
    identity JWT is PACT's bare challenge, as a missing one is: only a delegation's refusal
    names `invalid_token`."""
    responses: dict[int | str, dict[str, Any]] = {
        401: {
            "description": (
                "No personal agent's identity JWT, or a refused one (or a refused delegation): "
                'the PACT challenge in `WWW-Authenticate`, `Bearer realm="a2a"` (with '
                '`error="invalid_token"` for a refused delegation, or none where the '
                "operation lists scopes). Empty body with `EXCEPTION_HANDLERS`."
            ),
            "headers": _challenge_header("The PACT challenge."),
        }
    }
    if scoped:
        responses[403] = {
            "description": (
                "The delegation does not grant a scope the operation lists: "
                '`error="insufficient_scope"` and the scopes it needs in `WWW-Authenticate`. '
                "Empty body with `EXCEPTION_HANDLERS`."
            ),
            "headers": _challenge_header(
                'The challenge: `Bearer realm="a2a", error="insufficient_scope", scope="..."`.'
            ),
        }
    return responses


def _any(scopes: Iterable[str]) -> bool:
    """Whether a route asks any of `scopes` (a list, a tuple, a set; FastAPI takes a string
    for one scope a character, so a non-empty one asks some too)."""
    return any(True for _ in scopes)


def _poppy_responses(scoped: bool) -> dict[int | str, dict[str, Any]]:
    """The refusals a `PoppySessionScheme` answers (`SessionCheck.session_flow`'s), as
    FastAPI's `responses=` takes them, with Poppy's JSON error as `EXCEPTION_HANDLERS` send
    it: 403 only on a route that asks scopes (`scoped`), where a signed-out Session or a
    scope not approved is refused."""

    def error_body() -> dict[str, Any]:
        schema = {
            "type": "object",
            "properties": {"error": {"type": "string"}, "scope": {"type": "string"}},
            "required": ["error"],
        }
        return {"application/json": {"schema": schema}}

    def challenge() -> dict[str, Any]:
        return _challenge_header(
            'The code again: `DPoP error="..."` (and `scope="..."` for a 403).'
        )

    responses: dict[int | str, dict[str, Any]] = {
        400: {
            "description": (
                "`invalid_request`: the Session Token in the URL, two `Authorization` "
                "headers, or a write's malformed `Idempotency-Key`."
            ),
            "content": error_body(),
        },
        401: {
            "description": (
                "`invalid_token` (no live Session Token of this Brand, or its agent is no "
                "longer admitted) or `invalid_dpop_proof` (no valid, fresh DPoP proof of this "
                "request)."
            ),
            "headers": challenge(),
            "content": error_body(),
        },
    }
    if scoped:
        responses[403] = {
            "description": (
                "`sign_in_required` (the Session is signed out) or `insufficient_scope` (the "
                "person did not approve a scope the operation lists), naming the scopes to "
                "ask for in `scope`."
            ),
            "headers": challenge(),
            "content": error_body(),
        }
    return responses


#: `FastAPI(exception_handlers=EXCEPTION_HANDLERS)`, or merge it into your own.
EXCEPTION_HANDLERS: dict[Any, Any] = {
    PersonalAgentRefused: refusal_handler,
    PoppySessionRefused: poppy_refusal_handler,
}


class PersonalAgentScheme(SecurityBase):
    """A FastAPI security dependency that returns the verified `PersonalAgent`.

    Checked exactly as the middleware does (identity, then a delegation when one is sent);
    behind `PersonalAgentMiddleware` it reuses the caller already verified. With
    `optional=True` a request without a personal agent's credential gets None (the app's
    other schemes count as none; a personal agent's token is still checked).
    """

    def __init__(
        self,
        verifier: IdentityVerifier,
        *,
        delegation_provider: Provider | None = None,
        delegation_brand: str | None = None,
        optional: bool = False,
        scheme_name: str = "PersonalAgent",
        description: str = _SCHEME_DESCRIPTION,
    ) -> None:
        self.model = HTTPBearerModel(bearerFormat="JWT", description=description)
        self.scheme_name = scheme_name
        self.optional = optional
        require_verifier_not_optional(
            verifier, "PersonalAgentScheme", "PersonalAgentScheme(verifier, optional=True)"
        )
        self.guard = make_guard(verifier, delegation_provider, delegation_brand)
        # Said once per scheme when scopes are asked of a caller no delegation can reach:
        # this scheme verifies it and takes none, or a middleware verified it taking none.
        self.scopes_without_delegation = scopes_without_delegation(_SECURITY_SCOPES, "the scheme")
        self.verified_without_delegation = scopes_without_delegation(_SECURITY_SCOPES)
        # Said once per list of scopes that the scheme's Brand does not offer (a misspelt one).
        self.scopes_not_offered = UnofferedScopesWarning(
            _SECURITY_SCOPES,
            one_character_hint="scopes= takes a list: a string is read one character a scope",
        )

    @property
    def __signature__(self) -> inspect.Signature:
        """What FastAPI reads of this dependency (`inspect.signature` takes it from here):
        `__call__`'s parameters, of which the delegation header only when this scheme takes
        delegations, so that only then is it a parameter of its operations in OpenAPI."""
        signature = inspect.signature(self.__call__, eval_str=True)
        brand_id = self.guard.delegation_brand
        kept = []
        for name, parameter in signature.parameters.items():
            if name != "delegation":
                kept.append(parameter)
            elif brand_id is not None:  # it takes the delegations of that Brand
                kept.append(parameter.replace(annotation=_delegation_header(brand_id)))
        return signature.replace(parameters=kept)

    def responses(self, *, scopes: Iterable[str] = ()) -> dict[int | str, dict[str, Any]]:
        """The scheme's refusals for FastAPI's `responses=` (a route, an `APIRouter` or
        `include_router`), which a dependency cannot add itself (fastapi#501): 401 with the
        PACT challenge, and 403 `insufficient_scope` when the scheme takes delegations and
        `scopes` are those the route asks (its `Security(..., scopes=[...])`): a route that
        asks none is never answered 403, and the mapping cannot see the route. A new mapping
        at each call."""
        return _pact_responses(self.guard.takes_delegation and _any(scopes))

    async def __call__(
        self,
        connection: HTTPConnection,
        security_scopes: SecurityScopes,
        delegation: str | None = None,
    ) -> PersonalAgent | None:
        # HTTPConnection, not Request: FastAPI gives a WebSocket endpoint's dependencies
        # only the former. `delegation` is there for OpenAPI only: the guard reads the
        # header from the request, where a repeated one is refused (FastAPI keeps one).
        if security_scopes.scopes:
            if current_personal_agent(connection) is None:
                # Nothing verified the caller before, so this scheme does: without delegation
                # it refuses one, and no caller can hold a scope.
                if not self.guard.takes_delegation:
                    self.scopes_without_delegation(connection.url.path)
            elif takes_no_delegation(connection.scope):
                # A middleware verified it, taking no delegation: this scheme reuses that.
                self.verified_without_delegation(connection.url.path)
            self.scopes_not_offered(self.guard, connection.url.path, security_scopes.scopes)
        try:
            caller = await verify_once(connection, self.guard, self.optional)
            if security_scopes.scopes:
                require_scopes(caller, security_scopes.scopes)
        except GUARD_REFUSALS as exc:  # a store that cannot be used too: its 503
            raise PersonalAgentRefused(exc) from exc
        return caller


class PoppySessionScheme(SecurityBase):
    """A FastAPI security dependency that returns the `PoppyCaller` of a request carrying a
    Poppy Session Token and its DPoP proof (`Provider.poppy_session`'s rules); scopes asked
    with `Security(..., scopes=[...])` need a signed-in Session that approved them. A Brand
    that is not one of the Provider's or has no Poppy is a `ConfigError` when it is made.

    In OpenAPI it is an HTTP `DPoP` scheme named `PoppySession.<brand>` by default: a Session
    Token is one Brand's credential, so two Brands' schemes are two entries, neither
    overwriting the other's description. It reads `Authorization`, `DPoP` and a write's
    `Idempotency-Key` from the request itself: none is an operation parameter, which FastAPI
    would answer with its 422 when missing, never Poppy's 401.
    """

    def __init__(
        self,
        provider: Provider,
        brand_id: str,
        *,
        scheme_name: str | None = None,
        description: str | None = None,
    ) -> None:
        require_provider(provider, "PoppySessionScheme(provider, brand_id)")
        require_brand_id(brand_id, "PoppySessionScheme(provider, brand_id)")
        setting = f"PoppySessionScheme(provider, {brand_id!r})"
        check_session_brand(provider.brands.values(), brand_id, setting)
        if description is None:
            description = (
                f"Poppy Session Token of the Brand `{brand_id}` (`Authorization: DPoP "
                "<token>`), with a DPoP proof of the request (RFC 9449) in the `DPoP` header, "
                "signed with the Session's key. Where an operation lists scopes, the Session "
                "must be signed in and the person must have approved them."
            )
        self.model = HTTPBaseModel(scheme="DPoP", description=description)
        # OpenAPI names a security scheme with letters, digits, ".", "-" and "_" only.
        self.scheme_name = scheme_name or "PoppySession." + re.sub(
            r"[^A-Za-z0-9._-]", "_", brand_id
        )
        self.provider = provider
        self.brand_id = brand_id

    def responses(self, *, scopes: Iterable[str] = ()) -> dict[int | str, dict[str, Any]]:
        """The scheme's refusals for FastAPI's `responses=` (a route, an `APIRouter` or
        `include_router`), which a dependency cannot add itself (fastapi#501): Poppy's 400
        and 401, and 403 when `scopes` are those the route asks (its `Security(...,
        scopes=[...])`: signed out or a scope not approved; a route that asks none is never
        answered 403), each with its JSON error, 401 and 403 with the `DPoP` challenge. A new
        mapping at each call."""
        return _poppy_responses(_any(scopes))

    async def __call__(self, request: Request, security_scopes: SecurityScopes) -> PoppyCaller:
        try:
            return await self.provider.apoppy_session(
                self.brand_id, neutral_request(request.scope), tuple(security_scopes.scopes)
            )
        except PoppyError as exc:
            raise PoppySessionRefused(exc) from exc


__all__ = [
    "EXCEPTION_HANDLERS",
    "PersonalAgentRefused",
    "PersonalAgentScheme",
    "PoppySessionRefused",
    "PoppySessionScheme",
    "poppy_refusal_handler",
    "refusal_handler",
]
