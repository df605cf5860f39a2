"""ASGI translation: an HTTP scope to the neutral `Request`, a bounded body reader, a neutral
`Response` to ASGI messages or a Starlette response, and the endpoint wrapper the
Starlette/FastAPI decorators share (sync and async endpoints, with or without `request`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response as StarletteResponse
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from pactmw.adapters._common import declared_length
from pactmw.core.errors import RequestRefused
from pactmw.core.http import Request as NeutralRequest
from pactmw.core.http import Response, asgi_header

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])
#: `around(connection, call_endpoint)`: what a decorator does around its endpoint; the
#: connection is a `Request`, or a `WebSocket` for a WebSocket endpoint.
Around = Callable[[HTTPConnection, Callable[[], Awaitable[Any]]], Awaitable[Any]]

#: The keyword a decorated FastAPI endpoint without a `Request` parameter receives its
#: request under (added to the wrapper's signature, removed before the endpoint is called).
_INJECTED = "pactmw_request"
#: ASGI's WebSocket Denial Response extension: a handshake can be answered with a response.
_DENIAL = "websocket.http.response"
#: RFC 6455 §7.4.1: the close code of a refusal on policy (only servers see it before accept).
_POLICY_VIOLATION = 1008
#: RFC 6455 §7.4.1 "Internal Error": a server that cannot serve the connection now (a store
#: that cannot be used), as `Misconfigured` closes one; never a refusal of the caller.
_INTERNAL_ERROR = 1011


def route_path(scope: Scope) -> str:
    """The request path below the application's root (the decoded `path`, as ASGI gives it).

    Inside a Starlette `Mount`, `root_path` includes the mount point; `app_root_path` is the
    application's own root, so a Provider mounted at `/a2a` still sees `/a2a/...`.
    """
    path: str = scope["path"]
    root: str = scope.get("app_root_path", scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


def mounted_path(scope: Scope) -> str:
    """The request path below `root_path`: the path the app receiving `scope` routes on
    (Starlette's `get_route_path`). What a middleware guards: inside `Mount("/v1", app=sub)`,
    `sub` serves its `/a2a/...` routes at `/v1/a2a/...`, so judged from the outer app's root
    (`route_path`) they would not be under the prefix and would answer without a token.
    """
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("/", ""):
        return path[len(root) :] or "/"
    return path


def provider_path(scope: Scope, mount: str) -> str:
    """The request path as the Provider routes it: below the root of the app that serves it
    (`/a2a/...`), however deep that app is mounted (`site.mount("/support", app)`: the
    Provider's `/support/a2a/...` is its `/a2a/...`, as a Flask app's under a `SCRIPT_NAME`).

    `mount` is the Provider's own (`/a2a`): reached through the `Mount` that `a2a_routes` and
    `a2a_mount` make, `root_path` ends with it, and the app's root is what comes before. Not
    `route_path`: `app_root_path` is the outermost app's root, which is not the root of an app
    mounted in it.
    """
    root: str = scope.get("root_path", "")
    if root.endswith(mount):
        root = root[: -len(mount)]
    return mounted_path({"path": scope["path"], "root_path": root})


def neutral_request(scope: Scope, path: str | None = None) -> NeutralRequest:
    """An ASGI HTTP or WebSocket scope as the neutral `Request`; `path` in place of
    `route_path(scope)` for the Provider (`provider_path`)."""
    client = scope.get("client")
    return NeutralRequest(
        # A WebSocket handshake is a GET (RFC 6455 §4.1); its scope has no method.
        method=scope.get("method", "GET"),
        path=route_path(scope) if path is None else path,
        query=scope.get("query_string", b"").decode("latin-1"),
        # A list comprehension, then the tuple: a generator into `tuple` costs twice as much.
        headers=tuple(
            [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        ),
        client=client[0] if client else None,
    )


def body_reader(scope: Scope, receive: Receive) -> Callable[[int], Awaitable[bytes | None]]:
    """Read the request body on demand, refusing (None) anything longer than `limit`,
    declared or not (a chunked body stops being read at the limit)."""

    async def read(limit: int) -> bytes | None:
        # The WSGI readers' rule: framing that is not ASCII digits is a 400 (uvicorn refuses
        # it before us; other ASGI servers may pass it on).
        declared = declared_length(asgi_header(scope["headers"], b"content-length"))
        if declared is not None and declared > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise RequestRefused(400)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    return read


def request_body_reader(request: Request) -> Callable[[int], Awaitable[bytes | None]]:
    """`body_reader` for a Starlette request whose endpoint reads the body again: what was
    read is kept where `request.body()` finds it."""
    read = body_reader(request.scope, request.receive)

    async def keep(limit: int) -> bytes | None:
        body = await read(limit)
        if body is not None:
            request._body = body  # Starlette's own cache of `await request.body()`
        return body

    return keep


def raw_headers(response: Response) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]


async def send_response(response: Response, send: Send) -> None:
    """Send a neutral `Response` over ASGI."""
    headers = raw_headers(response)
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


async def refuse(scope: Scope, response: StarletteResponse, receive: Receive, send: Send) -> None:
    """Refuse an HTTP request, or a WebSocket handshake before it is accepted, with `response`.

    A handshake gets the response itself where the server offers ASGI's WebSocket Denial
    Response extension (uvicorn, Hypercorn; Starlette sends a response to a handshake so);
    elsewhere a refused caller's is closed unaccepted, which the server answers with 403: ASGI
    has no other way to refuse it. A server that cannot answer now (a 5xx `response`: a store
    that cannot be used) is no refusal of the caller: its handshake is accepted, then closed
    with 1011 ("Internal Error"), as `Misconfigured` closes one, so that it never reads as a
    credential refused.
    """
    if scope["type"] == "websocket" and _DENIAL not in scope.get("extensions", {}):
        if response.status_code < 500:
            await send({"type": "websocket.close", "code": _POLICY_VIOLATION, "reason": ""})
        elif (await receive())["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": _INTERNAL_ERROR, "reason": ""})
    else:
        await response(scope, receive, send)


def to_starlette(response: Response) -> StarletteResponse:
    """A neutral `Response` as a Starlette response (headers kept exactly)."""
    result = StarletteResponse(content=response.body, status_code=response.status)
    result.raw_headers = raw_headers(response)
    return result


def wrap_endpoint(endpoint: Endpoint, around: Around) -> Endpoint:
    """Decorate a Starlette or FastAPI endpoint, sync or async, HTTP or WebSocket, with
    `around`.

    The request (or WebSocket) is found among the endpoint's arguments (Starlette passes it
    positionally, FastAPI by name); a FastAPI endpoint that declares neither gets the request
    injected under a private keyword. A sync endpoint runs in Starlette's thread pool, as it
    would undecorated. A response `around` returns for a WebSocket refuses its handshake
    (`refuse`): a WebSocket endpoint itself returns nothing.
    """
    signature = _signature(endpoint)
    injected = not any(
        parameter.name in ("request", "websocket")
        or parameter.annotation in (Request, WebSocket, HTTPConnection)
        for parameter in signature.parameters.values()
    )
    is_async = inspect.iscoroutinefunction(endpoint)

    @functools.wraps(endpoint)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        connection = kwargs.pop(_INJECTED, None) if injected else None
        if connection is None:
            connection = _find_connection(args, kwargs)

        async def call() -> Any:
            if is_async:
                return await endpoint(*args, **kwargs)
            return await run_in_threadpool(endpoint, *args, **kwargs)

        result = await around(connection, call)
        if isinstance(connection, WebSocket) and isinstance(result, StarletteResponse):
            await refuse(connection.scope, result, connection.receive, connection.send)
            return None
        return result

    if injected:
        extra = inspect.Parameter(_INJECTED, inspect.Parameter.KEYWORD_ONLY, annotation=Request)
        parameters = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
        tail = [p for p in signature.parameters.values() if p.kind == p.VAR_KEYWORD]
        signature = signature.replace(parameters=[*parameters, extra, *tail])
    # FastAPI reads the wrapper's signature and resolves string annotations in the wrapper's
    # module: give it the endpoint's own, already resolved in the endpoint's module.
    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def _signature(endpoint: Callable[..., Any]) -> inspect.Signature:
    try:
        return inspect.signature(endpoint, eval_str=True)
    except (NameError, TypeError, SyntaxError):  # a name only the endpoint's closure knows
        return inspect.signature(endpoint)


def _find_connection(args: tuple[Any, ...], kwargs: dict[str, Any]) -> HTTPConnection:
    for value in (*args, *kwargs.values()):
        if isinstance(value, HTTPConnection):
            return value
    raise TypeError(
        "a pactmw decorator found no Request or WebSocket among the endpoint's arguments: "
        "decorate a Starlette endpoint (request or websocket) or a FastAPI path operation"
    )


__all__ = [
    "Around",
    "body_reader",
    "mounted_path",
    "neutral_request",
    "provider_path",
    "raw_headers",
    "refuse",
    "request_body_reader",
    "route_path",
    "send_response",
    "to_starlette",
    "wrap_endpoint",
]
