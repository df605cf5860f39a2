"""A pactmw ASGI middleware given a wrong argument stops the app at startup, naming it, even
where Starlette builds it on the app's first call.

Starlette (and FastAPI) build the entries of `Middleware(...)` and `add_middleware(...)`
lazily, in `build_middleware_stack`, on the app's first call: a `ConfigError` raised there
(or the `TypeError` of a keyword the middleware does not take) escapes the server's lifespan
call, which uvicorn's default `--lifespan auto` takes for "lifespan unsupported" (logged at
INFO): it starts anyway, and every request is a 500. So a middleware refused while such a
stack is built is replaced in it by `Misconfigured`, which fails the startup the protocol's
way (`lifespan.startup.failed` with the message: uvicorn and Hypercorn exit under any
lifespan mode, Starlette's `TestClient` raises), and, under a server that runs no lifespan,
answers each request 503 (a WebSocket: closed with 1011), the cause said once at ERROR.
Built anywhere else (the app wrapped directly, a `Route`'s or `Mount`'s middleware, built
with the routes), the middleware raises at once, as before.
"""

from __future__ import annotations

import inspect
import logging
import re
from types import FrameType
from typing import Any

from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from pactmw.adapters._asgi_http import to_starlette
from pactmw.adapters._common import Once
from pactmw.config import ConfigError
from pactmw.core.http import Response
from pactmw.provider.delegated import OAuthError
from pactmw.provider.errors import error_response

__all__ = ["Misconfigured", "StartupChecked", "misconfigured_response"]

logger = logging.getLogger("pactmw.adapters")

#: The WebSocket close code of a server that cannot serve (RFC 6455 §7.4.1: "Internal Error").
_INTERNAL_ERROR = 1011

#: The method of a Starlette app (FastAPI's overrides it) that builds its middleware.
_BUILDER = "build_middleware_stack"


def misconfigured_response(what: str) -> Response:
    """The answer to every request of an app whose `what` (a middleware's class name) was
    refused its arguments: 503, the RFC 6749-shaped body of pactmw's other 503s, not
    cacheable. It names no argument and no value (a caller has no use for them, and a value
    can be anything put in the wrong place): the log says which. ASCII only."""
    return error_response(
        OAuthError(
            "temporarily_unavailable",
            f"This server cannot serve requests: its {what} was given a wrong argument "
            "(the server's log says which)",
            503,
        )
    )


class Misconfigured:
    """The ASGI app standing, in a Starlette app's middleware stack, for a middleware (`what`,
    its class name) that refused its arguments (`error`): it fails the lifespan startup with
    the message naming the argument, and answers each request without reaching the app
    behind (whose guard is unknown): HTTP 503 (`misconfigured_response`), a WebSocket
    closed with 1011; the first request logs the message at ERROR, once for the app (its
    stack is built once, so this object lives as long as the app)."""

    def __init__(self, what: str, error: Exception) -> None:
        self.error = error
        #: What the server's startup failure and the log say: the middleware, the argument.
        self.message = f"{what} refused its arguments: {error}"
        self._response = to_starlette(misconfigured_response(what))
        self._once = Once()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            if (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.failed", "message": self.message})
            # Raised after the message, as Starlette's router does when a startup handler
            # fails: uvicorn is silent about it once the startup failed, and `TestClient`
            # raises it out of `with TestClient(app)`, which without it would go on as if
            # the app had started.
            raise self.error
        if self._once.first():
            logger.error("%s; every request is answered 503", self.message)
        if kind == "http":
            await self._response(scope, receive, send)
        elif kind == "websocket":
            # Accepted to be closed with a code that says why: a close before the accept
            # reaches the client as a 403, which would read as its credential refused.
            if (await receive())["type"] == "websocket.connect":
                await send({"type": "websocket.accept"})
                await send({"type": "websocket.close", "code": _INTERNAL_ERROR, "reason": ""})
        else:
            raise self.error


def _building_a_starlette_stack() -> bool:
    """Whether a Starlette app (FastAPI's too) is building its middleware stack below this
    call: a frame of a `build_middleware_stack` method of a Starlette app, Starlette's own or
    an override (FastAPI's), also where instrumentation wraps it."""
    frame: FrameType | None = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == _BUILDER and isinstance(
                frame.f_locals.get("self"), Starlette
            ):
                return True
            frame = frame.f_back
        return False
    finally:
        del frame  # a frame held here would keep every caller's locals alive


class StartupChecked(type):
    """The metaclass of pactmw's ASGI classes an app may add as Starlette middleware
    (`PersonalAgentMiddleware`; `A2AProviderApp`, which takes an `app` too): made while a
    Starlette app builds its middleware stack on its first call, one that refuses its
    arguments (`ConfigError`, or the `TypeError` of an argument it does not take) is
    `Misconfigured` in the stack, not an exception there (see the module's docstring).

    Made anywhere else it raises, as any class does. Why not defer always: the app wrapped
    directly, `app = PersonalAgentMiddleware(app, ...)`, is built at import, where raising
    stops the server before it starts (under every lifespan mode) and shows the line at
    fault; only inside Starlette's lazy build does raising lose the error. The build is
    recognised by its frame, the one place that knows it: Starlette calls the class with the
    same arguments either way and marks the build nowhere else. A metaclass, not `__init__`:
    a keyword the class does not take fails before `__init__` runs, and the class keeps its
    own typed signature (type checkers read `__init__`, and `Middleware(...)` checks its
    arguments against it)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except (ConfigError, TypeError) as exc:
            error = _naming_the_class(cls, exc, args, kwargs)
            if not _building_a_starlette_stack():
                if error is exc:
                    raise
                raise error.with_traceback(exc.__traceback__) from None
            return Misconfigured(cls.__name__, error)


#: The callable Python names in the `TypeError` of arguments it does not take.
_CALLED = re.compile(r"[\w.]+\(\) ")


def _naming_the_class(
    cls: type, exc: Exception, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Exception:
    """`exc`, or for arguments `cls` does not take, the same `TypeError` naming `cls`, the class
    the app wrote: Python names the `__init__` that refused them, an internal base class's
    (`GuardedMiddleware.__init__() got an unexpected keyword argument 'prefix'`). Whether the
    arguments are at fault is asked of the signature, so a `TypeError` raised inside the
    constructor keeps its own words."""
    if not isinstance(exc, TypeError):
        return exc
    try:
        inspect.signature(cls.__init__).bind(None, *args, **kwargs)  # type: ignore[misc]
    except TypeError:
        message = str(exc)
        if _CALLED.match(message):
            return TypeError(_CALLED.sub(f"{cls.__name__}() ", message, count=1))
    return exc
