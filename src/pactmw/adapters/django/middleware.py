"""`PersonalAgentMiddleware`: works under WSGI and ASGI; every request gets
`request.personal_agent` (the verified caller, or None)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

from pactmw.adapters.django._config import configured, protect_prefix
from pactmw.adapters.django._http import neutral_request, refused, to_django
from pactmw.config import in_protected_path
from pactmw.core.errors import AuthenticationFailed, RequestRefused
from pactmw.provider.guard import Guard, refusal_response


class PersonalAgentMiddleware:
    """Verify personal agents on `PACTMW["protect_prefix"]` (default `/a2a/`; the Provider's
    own routes authenticate themselves). Other paths pass untouched, even when the settings
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

    def _guard(self, request: HttpRequest) -> Guard | HttpResponse | None:
        """The guard when this path is guarded, a 503 when it is but cannot be, else None."""
        request.personal_agent = None  # type: ignore[attr-defined]
        path = request.path_info
        if not in_protected_path(path, protect_prefix()):
            return None
        try:
            guard = configured.guard()
        except RequestRefused as exc:
            return refused(exc)
        return guard if guard.protects(path) else None

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        guard = self._guard(request)
        if isinstance(guard, Guard):
            try:
                request.personal_agent = guard.authenticate(neutral_request(request))  # type: ignore[attr-defined]
            except AuthenticationFailed as exc:
                return to_django(refusal_response(exc))
        elif guard is not None:
            return guard
        return self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> Any:
        guard = self._guard(request)
        if isinstance(guard, Guard):
            try:
                request.personal_agent = await guard.aauthenticate(neutral_request(request))  # type: ignore[attr-defined]
            except AuthenticationFailed as exc:
                return to_django(refusal_response(exc))
        elif guard is not None:
            return guard
        return await self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A view of the site's that needs pactmw (the admin's pages, `get_provider()`) while
        `PACTMW` does not build answers the 503 pactmw's own paths answer, not a 500; why
        the settings do not build is logged once, where they are built."""
        return refused(exception) if isinstance(exception, RequestRefused) else None


__all__ = [
    "PersonalAgentMiddleware",
]
