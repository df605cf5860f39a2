"""View decorators (sync and async views): `personal_agent_required`,
`delegation_required`, `parafe_action`. Each runs the guard's check with the sync or the
async driver, as the view is, and leaves the rules to the guard."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse

from pactmw.adapters._arguments import (
    require_brand_id,
    require_refusal_status,
    require_scope_names,
    require_strings,
    require_view,
)
from pactmw.adapters._common import UnofferedScopesWarning, scope_refusal
from pactmw.adapters._view_checks import (
    ParafeViewCheck,
    PoppyViewCheck,
    delegation_brand_unset,
    delegation_decorator,
    tag_delegation_view,
    tag_parafe_view,
    tag_poppy_view,
)
from pactmw.adapters.django._config import (
    SETTING,
    configured,
    get_provider,
    settings_guard,
    takes_delegation,
)
from pactmw.adapters.django._http import (
    abody_reader,
    body_reader,
    neutral_request,
    refused,
    to_django,
)
from pactmw.core.errors import RequestRefused
from pactmw.core.http import Response
from pactmw.protocols.identity import PersonalAgent
from pactmw.protocols.poppy import PoppyError
from pactmw.provider.app import Provider
from pactmw.provider.errors import error_response
from pactmw.provider.guard import (
    GUARD_REFUSALS,
    ParafeAdmitted,
    ParafeEndpoint,
    refusal_response,
)

View = TypeVar("View", bound=Callable[..., Any])
#: `before(request)`: a response that answers instead of the view, or None to run it.
Before = Callable[[HttpRequest], "HttpResponse | None"]
ABefore = Callable[[HttpRequest], Awaitable["HttpResponse | None"]]
#: `after(request, response)`: the view's response, possibly changed.
After = Callable[[HttpRequest, Any], Any]


def _decorator(
    before: Before, abefore: ABefore, after: After | None = None
) -> Callable[[View], View]:
    """A view decorator that runs `before` (sync views) or `abefore` (async views)."""

    def decorate(view: View) -> View:
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                answer = await abefore(request)
                if answer is not None:
                    return answer
                response = await view(request, *args, **kwargs)
                return after(request, response) if after is not None else response

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            answer = before(request)
            if answer is not None:
                return answer
            response = view(request, *args, **kwargs)
            return after(request, response) if after is not None else response

        return wrapper  # type: ignore[return-value]

    return decorate


def _verified(request: HttpRequest) -> bool:
    return isinstance(getattr(request, "personal_agent", None), PersonalAgent)


def _verify(request: HttpRequest, optional: bool = False) -> HttpResponse | None:
    if _verified(request):
        return None
    try:
        guard = configured.guard()
        request.personal_agent = guard.authenticate(neutral_request(request), optional=optional)  # type: ignore[attr-defined]
    except GUARD_REFUSALS as exc:  # a store that cannot be used too: its 503
        return to_django(refusal_response(exc))
    except RequestRefused as exc:  # a `PACTMW` that does not build: its 503
        return refused(exc)
    return None


async def _averify(request: HttpRequest, optional: bool = False) -> HttpResponse | None:
    if _verified(request):
        return None
    try:
        guard = configured.guard()
        caller = await guard.aauthenticate(neutral_request(request), optional=optional)
        request.personal_agent = caller  # type: ignore[attr-defined]
    except GUARD_REFUSALS as exc:  # a store that cannot be used too: its 503
        return to_django(refusal_response(exc))
    except RequestRefused as exc:  # a `PACTMW` that does not build: its 503
        return refused(exc)
    return None


@overload
def personal_agent_required(view: View, *, optional: bool = False) -> View: ...
@overload
def personal_agent_required(
    view: None = None, *, optional: bool = False
) -> Callable[[View], View]: ...
def personal_agent_required(
    view: View | None = None, *, optional: bool = False
) -> View | Callable[[View], View]:
    """Decorate a Django view (sync or async) so it needs a verified personal agent, checked
    exactly as the middleware does (identity, then a delegation when one is sent); uses the
    middleware's result when there is one. `@personal_agent_required(optional=True)` also
    runs the view without a personal agent's credential (`request.personal_agent` is None;
    the app's other schemes count as none); a personal agent's token is still checked.
    `optional` is keyword-only: anything but a view by position is a `ConfigError` here."""
    require_view(view, "personal_agent_required")

    def before(request: HttpRequest) -> HttpResponse | None:
        return _verify(request, optional)

    async def abefore(request: HttpRequest) -> HttpResponse | None:
        return await _averify(request, optional)

    decorate: Callable[[View], View] = _decorator(before, abefore)
    return decorate if view is None else decorate(view)


def delegation_required(*scopes: str) -> Callable[[View], View]:
    """Decorate a view so it needs a delegation with `scopes` (configure
    `PACTMW["delegation_brand"]`): none is 401 `invalid_token`, missing scopes 403. Without
    `delegation_brand` every caller is refused: the system check (pactmw.E005) reports the
    routed views, and a view refusing a caller says so once at ERROR (no check runs under
    gunicorn or uvicorn). A scope the Brand does not offer refuses every caller too:
    pactmw.W006 at startup, and once at WARNING at the first refused request."""
    require_strings(
        scopes, "delegation_required", "the scopes to require", "orders:read", scopes=True
    )
    # Once a decorator, not once a view it decorates: Django's `method_decorator` decorates
    # the method anew at each request, so a line said once a view would be said every time.
    unset = delegation_brand_unset(f"settings.{SETTING}", scopes)
    unoffered = UnofferedScopesWarning(delegation_decorator(scopes))

    def decorate(view: View) -> View:
        def check(request: HttpRequest) -> HttpResponse | None:
            refusal = scope_refusal(getattr(request, "personal_agent", None), scopes)
            return None if refusal is None else to_django(refusal)

        def said(request: HttpRequest, answer: HttpResponse | None) -> HttpResponse | None:
            # Any refusal, a delegation sent in vain (401 `not_offered`) included.
            if answer is not None and not takes_delegation():
                unset(request.path)
            elif answer is not None:
                unoffered(settings_guard(), request.path, scopes)
            return answer

        def before(request: HttpRequest) -> HttpResponse | None:
            return said(request, _verify(request) or check(request))

        async def abefore(request: HttpRequest) -> HttpResponse | None:
            return said(request, (await _averify(request)) or check(request))

        return tag_delegation_view(_decorator(before, abefore)(view), scopes)

    return decorate


def parafe_action(
    action: str, *, brand: str | None = None, refusal_status: int = 403
) -> Callable[[View], View]:
    """Decorate a view (sync or async) so it performs `action` only with Parafé consent
    (`pactmw.provider.guard.ParafeEndpoint`: body read to 1 MiB, then 413; consent; the
    refusal reply). The Brand's `[brands.X.parafe]` is used: `brand`, else
    `PACTMW["parafe_brand"]`, else the one Brand with Parafé. The view runs with
    `request.parafe` (`.consent`, `.complete(...)`) and reads the same `request.body`; a
    JSON A2A message it returns gets the signed receipts. Consider `csrf_exempt`: callers
    are agents. An action or a `brand` that is no string is a `ConfigError` here; a routed
    view naming a Brand without Parafé (or none, where several have it) is pactmw.E007 (no
    Brand with Parafé at all: pactmw.W007), and where no check ran, each request is a 503,
    said once at ERROR."""
    require_strings([action], "parafe_action", "the action to perform", "create_order")
    require_refusal_status(refusal_status, "parafe_action", "refusal_status", lowest=200)
    if brand is not None:
        require_brand_id(brand, "parafe_action(action, brand=...)", "brand")
    # Once a decorator, not once a view: see `delegation_required`.
    check = ParafeViewCheck(f"settings.{SETTING}", action, brand, refusal_status)

    def endpoint() -> ParafeEndpoint:
        return configured.guard().parafe_endpoint(
            action, brand=brand, refusal_status=refusal_status
        )

    def admitted(request: HttpRequest, result: ParafeAdmitted | Response) -> HttpResponse | None:
        if not isinstance(result, ParafeAdmitted):
            return to_django(result)
        request.parafe = result.turn  # type: ignore[attr-defined]
        return None

    def before(request: HttpRequest) -> HttpResponse | None:
        found = check.endpoint(configured.guard(), request.path)
        if not isinstance(found, ParafeEndpoint):
            return to_django(found)
        return admitted(request, found.admit(body_reader(request, keep=True)))

    async def abefore(request: HttpRequest) -> HttpResponse | None:
        found = check.endpoint(configured.guard(), request.path)
        if not isinstance(found, ParafeEndpoint):
            return to_django(found)
        return admitted(request, await found.aadmit(abody_reader(request, keep=True)))

    def after(request: HttpRequest, response: Any) -> Any:
        turn = request.parafe  # type: ignore[attr-defined]
        status = getattr(response, "status_code", None)
        if not isinstance(response, HttpResponse):  # streamed
            endpoint().finish(turn, None, None, status)
            return response
        updated = endpoint().finish(
            turn, response.content, response.get("Content-Type"), response.status_code
        )
        if updated is not None:
            response.content = updated
            if response.has_header("Content-Length"):
                response["Content-Length"] = str(len(updated))
            extensions = response.get("A2A-Extensions")
            response["A2A-Extensions"] = ParafeEndpoint.reply_extensions(extensions)
        return response

    decorate = _decorator(before, abefore, after)
    return lambda view: tag_parafe_view(decorate(view), action, brand)


def poppy_session_required(brand_id: str, *scopes: str) -> Callable[[View], View]:
    """Decorate a view (sync or async) of one of the Brand's APIs so it needs a Poppy Session
    Token with its DPoP proof, signed in with `scopes` when any are named (the rules are
    `Provider.poppy_session`'s). The view runs with `request.poppy_caller`. Consider
    `csrf_exempt`: callers are agents. A routed view naming a Brand without Poppy is
    pactmw.E004; where no check ran, each request is a 503, said once at ERROR."""
    require_strings([brand_id], "poppy_session_required", "the Brand's id", "shop")
    require_scope_names(scopes, "poppy_session_required(brand_id, *scopes)")

    # Once a decorator, not once a view: see `delegation_required`.
    check = PoppyViewCheck(brand_id)

    def provider(request: HttpRequest) -> Provider | HttpResponse:
        # The system check (pactmw.E004) checked the routed views where it ran; under a
        # server that runs none (gunicorn, uvicorn), a Brand without Poppy is said here.
        found = get_provider()
        unavailable = check.refusal(found.brands.values(), request.path)
        return found if unavailable is None else to_django(unavailable)

    def before(request: HttpRequest) -> HttpResponse | None:
        found = provider(request)
        if not isinstance(found, Provider):
            return found
        try:
            caller = found.poppy_session(brand_id, neutral_request(request), scopes)
        except PoppyError as exc:
            return to_django(error_response(exc))
        request.poppy_caller = caller  # type: ignore[attr-defined]
        return None

    async def abefore(request: HttpRequest) -> HttpResponse | None:
        found = provider(request)
        if not isinstance(found, Provider):
            return found
        try:
            caller = await found.apoppy_session(brand_id, neutral_request(request), scopes)
        except PoppyError as exc:
            return to_django(error_response(exc))
        request.poppy_caller = caller  # type: ignore[attr-defined]
        return None

    decorate = _decorator(before, abefore)
    return lambda view: tag_poppy_view(decorate(view), brand_id)


__all__ = [
    "ABefore",
    "After",
    "Before",
    "delegation_required",
    "parafe_action",
    "personal_agent_required",
    "poppy_session_required",
]
