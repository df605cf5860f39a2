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
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse

from pactmw.config import Settings, in_protected_path
from pactmw.core.errors import AuthenticationFailed
from pactmw.core.http import Response, challenge
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent


class _Configured:
    """The verifier built from `settings.PACTMW`, rebuilt when the setting changes (tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: tuple[Settings, IdentityVerifier] | None = None

    def get(self) -> tuple[Settings, IdentityVerifier]:
        with self._lock:
            if self._built is None:
                config = Settings.from_mapping(
                    getattr(django_settings, "PACTMW", {}), extra_keys=EXTRA_KEYS
                )
                self._built = (config, config.build_verifier())
            return self._built

    def reset(self, **_: Any) -> None:
        with self._lock:
            self._built = None


#: Keys of the PACTMW dict that belong to other parts of pactmw (the Provider).
EXTRA_KEYS: frozenset[str] = frozenset()
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
        config, verifier = configured.get()
        if in_protected_path(request.path_info, config.protect_prefix):
            try:
                request.personal_agent = verifier.verify(_authorization(request))  # type: ignore[attr-defined]
            except AuthenticationFailed as exc:
                return to_django(challenge(exc))
        return self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> Any:
        request.personal_agent = None  # type: ignore[attr-defined]
        config, verifier = configured.get()
        if in_protected_path(request.path_info, config.protect_prefix):
            try:
                request.personal_agent = await verifier.averify(_authorization(request))  # type: ignore[attr-defined]
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
                    request.personal_agent = await configured.get()[1].averify(  # type: ignore[attr-defined]
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
                request.personal_agent = configured.get()[1].verify(_authorization(request))  # type: ignore[attr-defined]
            except AuthenticationFailed as exc:
                return to_django(challenge(exc))
        return view(request, *args, **kwargs)

    return wrapper


def get_verifier() -> IdentityVerifier:
    """The process's verifier built from `settings.PACTMW` (for custom views and admin actions)."""
    return configured.get()[1]
