"""`PersonalAgentMiddleware`: works under WSGI and ASGI; every request gets
`request.personal_agent` (the verified caller, or None)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

from pactmw.adapters.django._config import configured, protect_prefix
from pactmw.adapters.django._http import neutral_request, refused, to_django
from pactmw.adapters.django.views import a2a_view
from pactmw.config import in_protected_path
from pactmw.core.errors import RequestRefused
from pactmw.provider.guard import GUARD_REFUSALS, Guard, refusal_response

#: Django's `process_view(request, view_func, view_args, view_kwargs)`.
_ProcessView = Callable[[HttpRequest, Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]


class PersonalAgentMiddleware:
    """Verify personal agents on `PACTMW["protect_prefix"]` (default `/a2a/`; the Provider's
    own routes authenticate themselves, and a view of the site's own routed under them is
    verified once Django has resolved it). Other paths pass untouched, even when the settings
    are broken (the system checks report those); a view that raises `RequestRefused` answers
    its status."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        # Django builds its middleware as the server starts (and no system check runs under
        # gunicorn or uvicorn): build the Provider now, so that what is wrong is logged at
        # startup, not at the first request to pactmw's paths.
        configured.check_at_startup()
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
        # Django calls `process_view` in its handler's mode, adapting a method of the other
        # one (a thread per request under ASGI for a sync one): the async twin under ASGI
        # verifies without holding a thread, as `__acall__` does.
        self.process_view: _ProcessView = (
            self._aprocess_view if self.is_async else self._process_view
        )

    def _guard(self, request: HttpRequest) -> Guard | HttpResponse | None:
        """The guard when this path is guarded, a 503 when it is but cannot be, else None."""
        request.personal_agent = None  # type: ignore[attr-defined]
        guard = self._prefix_guard(request)
        if isinstance(guard, Guard) and not guard.protects(request.path_info):
            return None
        return guard

    def _routed_guard(
        self, request: HttpRequest, view: Callable[..., Any]
    ) -> Guard | HttpResponse | None:
        """The guard when Django resolved this request, which `_guard` left alone, to `view`
        and the guard verifies it there (`Guard.protects_once_routed`: a view of the site's
        own under the Provider's `/a2a/`, which the Provider never sees), a 503 when it
        cannot be built, else None."""
        guard = self._prefix_guard(request)
        # `a2a_view` is the Provider, whichever pattern routes to it (as pactmw.W003 asks).
        own = view is not a2a_view
        if isinstance(guard, Guard) and not guard.protects_once_routed(
            request.path_info, apps_own_view=own
        ):
            return None
        return guard

    @staticmethod
    def _prefix_guard(request: HttpRequest) -> Guard | HttpResponse | None:
        """The guard for a path under the protected prefix (None elsewhere), or the 503 that
        says it cannot be built."""
        if not in_protected_path(request.path_info, protect_prefix()):
            return None
        try:
            return configured.guard()
        except RequestRefused as exc:
            return refused(exc)

    @staticmethod
    def _verify(guard: Guard | HttpResponse | None, request: HttpRequest) -> HttpResponse | None:
        """Attach the verified caller when `guard` is a guard; the refusal (or the 503 it is)
        instead when it answers."""
        if isinstance(guard, Guard):
            try:
                request.personal_agent = guard.authenticate(neutral_request(request))  # type: ignore[attr-defined]
            except GUARD_REFUSALS as exc:  # a store that cannot be used too: its 503
                return to_django(refusal_response(exc))
            return None
        return guard

    @staticmethod
    async def _averify(
        guard: Guard | HttpResponse | None, request: HttpRequest
    ) -> HttpResponse | None:
        """Async `_verify`."""
        if isinstance(guard, Guard):
            try:
                request.personal_agent = await guard.aauthenticate(neutral_request(request))  # type: ignore[attr-defined]
            except GUARD_REFUSALS as exc:  # a store that cannot be used too: its 503
                return to_django(refusal_response(exc))
            return None
        return guard

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        answer = self._verify(self._guard(request), request)
        return answer if answer is not None else self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> Any:
        answer = await self._averify(self._guard(request), request)
        return answer if answer is not None else await self.get_response(request)

    def _process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        return self._verify(self._routed_guard(request, view_func), request)

    async def _aprocess_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        return await self._averify(self._routed_guard(request, view_func), request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A view of the site's that needs pactmw (the admin's pages, `get_provider()`) while
        `PACTMW` does not build answers the 503 pactmw's own paths answer, not a 500; why
        the settings do not build is logged once, where they are built."""
        return refused(exception) if isinstance(exception, RequestRefused) else None


__all__ = [
    "PersonalAgentMiddleware",
]
