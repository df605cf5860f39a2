"""Routing for `{base}/a2a/{brand}/...` (PACT §2.2 and the reference's route table).

Pure: a method and a path in, a `Route` or `None` out. Routing runs before authentication,
so an unknown route or a wrong method is refused without looking at credentials.

`HEAD` is routed as `GET` (RFC 9110 §9.3.2): every GET route answers it, with the GET's
status and header fields and no body (`for_method`), and a route that needs a personal-agent
JWT on GET needs it on HEAD too. Every router of the Provider (this one and Poppy's) matches
`routed_method`, so no adapter has a rule of its own.

`OPTIONS` on a path some route serves is answered before authentication with 204 and its
`Allow` (RFC 9110 §9.3.7; `options_response`); on the public documents (the Agent Card, the
authorization server's metadata and JWKS, Poppy's documents), which carry
`Access-Control-Allow-Origin: *`, it is also a CORS preflight's answer, so a browser-based
agent may read them with a header of its own. Pages, token endpoints and authenticated
routes get no CORS header: a browser keeps other sites' scripts away from them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

import attrs
from attrs import frozen

from pactmw.core.http import PROVIDER_MOUNT, Response

#: The Delegated profile's pages a person opens in a browser (consent and connected agents):
#: a person carries no personal-agent JWT, so they are public operations.
_PersonPage = Literal["consent", "consent_decision", "consent_result", "connected_agents"]

Operation = Literal[
    "card",
    "send",
    "stream",
    "list_tasks",
    "get_task",
    "cancel_task",
    "subscribe",
    "extended_card",
    "push_configs",
    # The Delegated profile's authorization server, under `{interface}/oauth/`.
    "oauth_device_authorization",
    "oauth_token",
    "oauth_metadata",
    "oauth_jwks",
    _PersonPage,
]

#: Operations that need no personal-agent JWT (the card, the authorization server's public
#: documents, and the consent pages a person opens in a browser).
PUBLIC_OPERATIONS: frozenset[Operation] = frozenset(
    {"card", "oauth_metadata", "oauth_jwks", *get_args(_PersonPage)}
)

#: The public documents, readable from any origin (CORS): no credential, nothing personal.
PUBLIC_DOCUMENTS: frozenset[Operation] = frozenset({"card", "oauth_metadata", "oauth_jwks"})

#: `{interface}/oauth/...` path -> (operation, methods).
_OAUTH_ROUTES: dict[str, tuple[Operation, tuple[str, ...]]] = {
    "oauth/device_authorization": ("oauth_device_authorization", ("POST",)),
    "oauth/token": ("oauth_token", ("POST",)),
    "oauth/.well-known/oauth-authorization-server": ("oauth_metadata", ("GET",)),
    "oauth/jwks.json": ("oauth_jwks", ("GET",)),
    "oauth/consent": ("consent", ("GET", "POST")),
    "oauth/consent/decision": ("consent_decision", ("POST",)),
    "oauth/connected": ("consent_result", ("GET",)),
    "oauth/agents": ("connected_agents", ("GET", "POST")),
}

#: The operations of a Brand's authorization server (404 where the Brand offers none).
DELEGATED_OPERATIONS: frozenset[Operation] = frozenset(op for op, _ in _OAUTH_ROUTES.values())

MOUNT = PROVIDER_MOUNT

#: The methods routes take, besides HEAD (with GET) and OPTIONS (on every routed path).
ROUTE_METHODS = ("GET", "POST", "DELETE")
#: How long a browser may keep a public document's preflight answer (Chromium caps it at 2 h).
_PREFLIGHT_MAX_AGE = "86400"

#: The operations on one task, whose paths hold a task id the caller chose.
_PER_TASK = frozenset({"get_task", "cancel_task", "subscribe", "push_configs"})


def routed_method(method: str) -> str:
    """The method a request is routed by: `HEAD` as `GET` (RFC 9110 §9.3.2), any other as
    itself (so PUT, unknown methods... stay unmatched where no route names them: 404; OPTIONS
    is answered from the routes of its path, `options_response`)."""
    return "GET" if method == "HEAD" else method


def allow(*methods: str) -> tuple[str, str]:
    """The `Allow` header of a 405 from a resource that takes `methods` (RFC 9110 §10.2.1):
    HEAD goes with GET, as `routed_method` routes it."""
    allowed = [*methods, "HEAD"] if "GET" in methods and "HEAD" not in methods else methods
    return ("Allow", ", ".join(allowed))


def options_response(methods: Iterable[str], *, public: bool) -> Response:
    """The answer to OPTIONS on a path whose routes take `methods` (RFC 9110 §9.3.7): 204,
    `Allow` naming them, HEAD with GET and OPTIONS itself. `public` (a public document): the
    CORS preflight's answer too (any origin, GET and HEAD, any request header; no
    credentials, so `*` means what it says)."""
    taken = list(methods)
    if "GET" in taken:
        taken.append("HEAD")
    headers = [("Allow", ", ".join([*taken, "OPTIONS"]))]
    if public:
        headers += [
            ("Access-Control-Allow-Origin", "*"),
            ("Access-Control-Allow-Methods", "GET, HEAD"),
            ("Access-Control-Allow-Headers", "*"),
            ("Access-Control-Max-Age", _PREFLIGHT_MAX_AGE),
        ]
    return Response(status=204, headers=tuple(headers))


def for_method(method: str, response: Response) -> Response:
    """`response` as sent to a request of `method`: to HEAD, without its body but with the
    `Content-Length` the GET's body has (RFC 9110 §9.3.2 and §8.6). Not every server leaves
    the body out itself (Werkzeug's development server writes what it is given)."""
    if method != "HEAD" or not response.body:
        return response
    headers = response.headers
    if not any(name.lower() == "content-length" for name, _ in headers):
        headers = (*headers, ("Content-Length", str(len(response.body))))
    return attrs.evolve(response, headers=headers, body=b"")


@frozen
class Route:
    """A matched route: the operation, the Brand id and, for task routes, the task id."""

    operation: Operation
    brand_id: str
    task_id: str = ""


def match(method: str, path: str) -> Route | None:
    """Match an A2A route; None means 404 with no body.

    `path` is the request path below the site root, percent-decoded once by the server (as
    ASGI's `path`, WSGI's `PATH_INFO` and Django's `path_info` are): it is not decoded
    again (RFC 3986 §2.4), so `message%253Asend` is the literal `message%3Asend`, no route.
    HEAD matches what GET matches (`routed_method`).
    """
    method = routed_method(method)
    if not path.startswith(MOUNT):
        return None
    brand_id, _, rest = path[len(MOUNT) :].partition("/")
    if not brand_id:
        return None
    segments = rest.split("/")
    operation: Operation | None = None
    task_id = ""
    if rest in _OAUTH_ROUTES:
        oauth_operation, methods = _OAUTH_ROUTES[rest]
        operation = oauth_operation if method in methods else None
    elif rest == ".well-known/agent-card.json":
        operation = "card" if method == "GET" else None
    elif rest == "message:send":
        operation = "send" if method == "POST" else None
    elif rest == "message:stream":
        operation = "stream" if method == "POST" else None
    elif rest == "tasks":
        operation = "list_tasks" if method == "GET" else None
    elif rest == "extendedAgentCard":
        operation = "extended_card" if method == "GET" else None
    elif len(segments) == 2 and segments[0] == "tasks" and segments[1]:
        task, _, verb = segments[1].partition(":")
        task_id = task
        if not task_id:
            return None
        if verb == "" and method == "GET":
            operation = "get_task"
        elif verb == "cancel" and method == "POST":
            operation = "cancel_task"
        elif verb == "subscribe" and method == "POST":
            operation = "subscribe"
    elif len(segments) in (3, 4) and segments[0] == "tasks" and all(segments):
        # tasks/{id}/pushNotificationConfigs[/{configId}]: GET/POST on the list, GET/DELETE
        # on one config; anything else there is unmatched.
        methods = ("GET", "POST") if len(segments) == 3 else ("GET", "DELETE")
        if segments[2] == "pushNotificationConfigs" and method in methods:
            operation = "push_configs"
    if operation is None:
        return None
    return Route(operation=operation, brand_id=brand_id, task_id=task_id)


class Routes:
    """`match` for one Provider, remembering the routes of its own Brands.

    Every request of a Brand asks for the same few routes (`message:send` above all): each
    is matched once and its `Route` reused. Only the fixed routes of the Brands given are
    kept (a task's routes carry a caller-chosen id, and other Brand ids are the caller's too),
    so what is kept is bounded by the Brands, not by what clients send. Thread-safe.
    """

    def __init__(self, brand_ids: Iterable[str]) -> None:
        self._brand_ids = frozenset(brand_ids)
        self._known: dict[tuple[str, str], Route] = {}

    def match(self, method: str, path: str) -> Route | None:
        """`match(method, path)`."""
        route = self._known.get((method, path))
        if route is None:
            route = match(method, path)
            if (
                route is not None
                and route.operation not in _PER_TASK
                and route.brand_id in self._brand_ids
            ):
                self._known[method, path] = route
        return route


__all__ = [
    "DELEGATED_OPERATIONS",
    "MOUNT",
    "PUBLIC_DOCUMENTS",
    "PUBLIC_OPERATIONS",
    "ROUTE_METHODS",
    "Operation",
    "Route",
    "Routes",
    "allow",
    "for_method",
    "match",
    "options_response",
    "routed_method",
]
