"""Django adapter: hybrid (WSGI and ASGI) middleware, `request.personal_agent`, a decorator.

Configure with one settings dict::

    PACTMW = {"audience": "https://provider.example/a2a", "agents": [...]}
    MIDDLEWARE = [..., "pactmw.adapters.django.PersonalAgentMiddleware"]

Requests under `PACTMW["protect_prefix"]` (default `/a2a/`) must carry a valid personal-agent
JWT; every request gets `request.personal_agent` (the `PersonalAgent`, or None).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, re_path
from django.views.decorators.csrf import csrf_exempt

from pactmw.config import Settings, in_protected_path
from pactmw.core.encoding import is_ascii_digits
from pactmw.core.errors import AuthenticationFailed, RequestRefused
from pactmw.core.http import Request, Response, challenge, insufficient_scope
from pactmw.protocols.delegation import DelegationRejected
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.provider.app import Provider, awith_delegation, missing_scopes, with_delegation
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.parafe import (
    ParafeAgent,
    ParafeRefused,
    ParafeTurn,
    body_too_large,
    endpoint_message,
    select_agent,
)
from pactmw.provider.settings import PROVIDER_KEYS, ProviderSettings


class _Built:
    def __init__(self, data: Mapping[str, Any]) -> None:
        self.provider: Provider | None = None
        brand = data.get("delegation_brand")
        self.delegation_brand = brand if isinstance(brand, str) else None
        parafe_brand = data.get("parafe_brand")
        self.parafe_brand = parafe_brand if isinstance(parafe_brand, str) else None
        if "brands" in data:
            provider_settings = ProviderSettings.from_mapping(data)
            self.provider = Provider.from_settings(provider_settings)
            self.settings = provider_settings.identity
            self.verifier = self.provider.verifier
        else:
            self.settings = Settings.from_mapping(data, extra_keys=PROVIDER_KEYS)
            self.verifier = self.settings.build_verifier()

    def guards(self, path: str) -> bool:
        """Whether the middleware verifies this path (the Provider authenticates its own)."""
        if self.provider is not None and self.provider.matches("", path):
            return False
        return in_protected_path(path, self.settings.protect_prefix)


class _Configured:
    """What `settings.PACTMW` builds, once per process; rebuilt when the setting changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: _Built | None = None

    def get(self) -> _Built:
        with self._lock:
            if self._built is None:
                self._built = _Built(getattr(django_settings, "PACTMW", {}))
            return self._built

    def reset(self) -> None:
        with self._lock:
            if self._built is not None and self._built.provider is not None:
                self._built.provider.close()
            self._built = None


configured = _Configured()


def _on_setting_changed(*, setting: str, **_: Any) -> None:
    if setting == "PACTMW":
        configured.reset()


setting_changed.connect(_on_setting_changed)


def to_django(response: Response) -> HttpResponse:
    """A neutral `Response` as a Django response (no default content type added)."""
    result = HttpResponse(response.body, status=response.status)
    del result["Content-Type"]
    for name, value in response.headers:
        result[name] = value
    return result


def _authorization(request: HttpRequest) -> str | None:
    return request.META.get("HTTP_AUTHORIZATION")


class PersonalAgentMiddleware:
    """Verify personal agents on the protected prefix; works under WSGI and ASGI."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        request.personal_agent = None  # type: ignore[attr-defined]
        built = configured.get()
        if built.guards(request.path_info):
            try:
                request.personal_agent = with_delegation(  # type: ignore[attr-defined]
                    built.provider,
                    built.delegation_brand,
                    built.verifier.verify(_authorization(request)),
                    request.META.get("HTTP_X_A2A_USER_DELEGATION"),
                )
            except AuthenticationFailed as exc:
                return to_django(challenge(exc))
        return self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> Any:
        request.personal_agent = None  # type: ignore[attr-defined]
        built = configured.get()
        if built.guards(request.path_info):
            try:
                request.personal_agent = await awith_delegation(  # type: ignore[attr-defined]
                    built.provider,
                    built.delegation_brand,
                    await built.verifier.averify(_authorization(request)),
                    request.META.get("HTTP_X_A2A_USER_DELEGATION"),
                )
            except AuthenticationFailed as exc:
                return to_django(challenge(exc))
        return await self.get_response(request)


def personal_agent_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a Django view (sync or async) so it needs a verified personal agent.

    Uses the middleware's result when present, so a view under the prefix verifies once.
    """
    if iscoroutinefunction(view):

        @functools.wraps(view)
        async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(getattr(request, "personal_agent", None), PersonalAgent):
                try:
                    request.personal_agent = await configured.get().verifier.averify(  # type: ignore[attr-defined]
                        _authorization(request)
                    )
                except AuthenticationFailed as exc:
                    return to_django(challenge(exc))
            return await view(request, *args, **kwargs)

        return async_wrapper

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(getattr(request, "personal_agent", None), PersonalAgent):
            try:
                request.personal_agent = configured.get().verifier.verify(_authorization(request))  # type: ignore[attr-defined]
            except AuthenticationFailed as exc:
                return to_django(challenge(exc))
        return view(request, *args, **kwargs)

    return wrapper


def delegation_required(*scopes: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a view behind the middleware so it needs a delegation with `scopes`.

    No delegation: 401 `error="invalid_token"`; missing scopes: 403 `insufficient_scope`.
    Configure `PACTMW["delegation_brand"]` so the middleware verifies delegation tokens.
    """

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        def refusal(request: HttpRequest) -> HttpResponse | None:
            missing = missing_scopes(getattr(request, "personal_agent", None), scopes)
            if missing is None:
                return to_django(challenge(DelegationRejected("required")))
            return to_django(insufficient_scope(missing)) if missing else None

        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                return refusal(request) or await view(request, *args, **kwargs)

            return async_wrapper

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            return refusal(request) or view(request, *args, **kwargs)

        return wrapper

    return decorate


def _parafe_agent(brand: str | None) -> ParafeAgent:
    built = configured.get()
    agents = built.provider.parafe if built.provider is not None else {}
    return select_agent(agents, brand or built.parafe_brand)


def _finish_parafe(agent: ParafeAgent, turn: ParafeTurn, response: Any) -> Any:
    """Sign the receipts and add them to a JSON A2A message the view answered."""
    if not isinstance(response, HttpResponse):
        agent.finish(turn, b"", None)
        return response
    updated = agent.finish(turn, response.content, response.get("Content-Type"))
    if updated is not None:
        response.content = updated
        if response.has_header("Content-Length"):
            response["Content-Length"] = str(len(updated))
    return response


def parafe_action(
    action: str, *, brand: str | None = None, refusal_status: int = 403
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a view (sync or async) so it performs `action` only with Parafé consent.

    The JSON body is an A2A message (or `{"message": ...}`) whose consent must permit
    `action` (token, proof, replay). The Brand's `[brands.X.parafe]` configuration in
    `settings.PACTMW` is used: `brand`, else `PACTMW["parafe_brand"]`, else the one Brand
    with Parafé. On success the view runs with `request.parafe` (`.consent`,
    `.complete(action, business_ref=...)`), and a JSON A2A message it returns gets the signed
    receipt. A refusal is answered with `refusal_status` and an A2A-shaped message with the
    Parafé error and the refusal receipt. Consider `csrf_exempt`: callers are agents.
    """

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                agent = _parafe_agent(brand)
                if body_too_large(request.META.get("CONTENT_LENGTH") or None):
                    return HttpResponse(status=413)
                turn = agent.turn(endpoint_message(request.body))
                try:
                    await turn.arequire(action)
                except ParafeRefused as refused:
                    return to_django(agent.refusal_response(refused, refusal_status))
                request.parafe = turn  # type: ignore[attr-defined]
                return _finish_parafe(agent, turn, await view(request, *args, **kwargs))

            return async_wrapper

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            agent = _parafe_agent(brand)
            if body_too_large(request.META.get("CONTENT_LENGTH") or None):
                return HttpResponse(status=413)
            turn = agent.turn(endpoint_message(request.body))
            try:
                turn.require(action)
            except ParafeRefused as refused:
                return to_django(agent.refusal_response(refused, refusal_status))
            request.parafe = turn  # type: ignore[attr-defined]
            return _finish_parafe(agent, turn, view(request, *args, **kwargs))

        return wrapper

    return decorate


def get_verifier() -> IdentityVerifier:
    """The process's verifier built from `settings.PACTMW` (for custom views and admin actions)."""
    return configured.get().verifier


def get_provider() -> Provider:
    """The process's Provider built from `settings.PACTMW` (which must list `brands`)."""
    provider = configured.get().provider
    if provider is None:
        raise RuntimeError("settings.PACTMW lists no brands: there is no Provider to serve")
    return provider


def _neutral_request(request: HttpRequest) -> Request:
    return Request(
        method=request.method or "GET",
        path=request.path_info,
        query=request.META.get("QUERY_STRING", ""),
        headers=tuple((name.lower(), value) for name, value in request.headers.items()),
        client=request.META.get("REMOTE_ADDR"),
    )


@csrf_exempt
def a2a_view(request: HttpRequest) -> HttpResponse:
    """Serve every `/a2a/...` request with the configured Provider.

    CSRF-exempt: callers are personal agents authenticating with a bearer JWT, never a
    browser session, so there is no ambient credential for a forged request to ride on.
    """

    def read_body(limit: int) -> bytes | None:
        declared = request.META.get("CONTENT_LENGTH") or ""
        if not declared and request.META.get("HTTP_TRANSFER_ENCODING"):
            # Django reads CONTENT_LENGTH bytes (0 without it), so a chunked body would look
            # empty: ask for a length instead of misreading the request.
            raise RequestRefused(411)
        if is_ascii_digits(declared) and int(declared) > limit:
            return None
        body = request.read(limit + 1)
        return None if len(body) > limit else body

    def current_user() -> SignedInUser | None:
        # django.contrib.auth's signed-in user, when the app uses it (same-app consent).
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return SignedInUser(account=str(user.pk), label=user.get_username())

    return to_django(get_provider().handle(_neutral_request(request), read_body, current_user))


def a2a_urlpatterns() -> list[URLPattern]:
    """URL patterns for the Provider: `urlpatterns += a2a_urlpatterns()` in the root urls.py."""
    return [re_path(r"^a2a/", a2a_view, name="pactmw-a2a")]
