"""A test-only middleware that says in which mode Django built the pactmw middleware.

It sits directly outside `PersonalAgentMiddleware`, so the handler it wraps is that middleware
(through Django's exception wrapper, which keeps its sync/async nature). Each response gets
`X-Pactmw-Mode: sync` or `async`: proof that the hybrid middleware really ran natively under
WSGI and under ASGI, not through an adapter thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

HEADER = "X-Pactmw-Mode"


class MiddlewareModeProbe:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[..., Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if self.is_async:
            return self._acall(request)
        response = self.get_response(request)
        response[HEADER] = "sync"
        return response

    async def _acall(self, request: Any) -> Any:
        response = await self.get_response(request)
        response[HEADER] = "async"
        return response
