"""`routes.match`: every row of pact-provider.md §2.2, both ways."""

from __future__ import annotations

import pytest

from pactmw.core.http import Response
from pactmw.provider.routes import Route, Routes, allow, for_method, match

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")

# (path below /a2a/acme/, the methods that match, operation, task id). HEAD matches every
# GET route (RFC 9110 §9.3.2), and only those.
ROUTE_TABLE = [
    (".well-known/agent-card.json", {"GET", "HEAD"}, "card", ""),
    ("message:send", {"POST"}, "send", ""),
    ("message:stream", {"POST"}, "stream", ""),
    ("tasks", {"GET", "HEAD"}, "list_tasks", ""),
    ("tasks/t-1", {"GET", "HEAD"}, "get_task", "t-1"),
    ("tasks/t-1:cancel", {"POST"}, "cancel_task", "t-1"),
    ("tasks/t-1:subscribe", {"POST"}, "subscribe", "t-1"),
    ("extendedAgentCard", {"GET", "HEAD"}, "extended_card", ""),
    # Push-config routes answer without looking at the task, so no task id is carried.
    ("tasks/t-1/pushNotificationConfigs", {"GET", "HEAD", "POST"}, "push_configs", ""),
    ("tasks/t-1/pushNotificationConfigs/c1", {"GET", "HEAD", "DELETE"}, "push_configs", ""),
]


@pytest.mark.parametrize(("rest", "methods", "operation", "task_id"), ROUTE_TABLE)
def test_route_table_matches_only_its_methods(
    rest: str, methods: set[str], operation: str, task_id: str
) -> None:
    for method in METHODS:
        route = match(method, f"/a2a/acme/{rest}")
        if method in methods:
            expected = Route(operation=operation, brand_id="acme", task_id=task_id)  # type: ignore[arg-type]
            assert route == expected, method
        else:
            assert route is None, method


@pytest.mark.parametrize(
    ("method", "rest"),
    [
        # The unmatched examples listed in pact-provider.md §2.2.
        ("GET", "unknown"),
        ("GET", "message:send"),
        ("DELETE", "message:send"),
        ("PUT", "message:send"),
        ("POST", "tasks"),
        ("GET", "tasks/x:cancel"),
        ("GET", "tasks/x:subscribe"),
        ("DELETE", "tasks/x/pushNotificationConfigs"),
        ("POST", "tasks/x/pushNotificationConfigs/c1"),
        # Near misses.
        ("GET", ""),
        ("POST", "message:send/"),
        ("POST", "message:sendx"),
        ("POST", "message"),
        ("GET", "tasks/"),
        ("GET", "tasks/x/"),
        ("POST", "tasks/x:frobnicate"),
        ("POST", "tasks/:cancel"),
        ("GET", "tasks/x/other"),
        ("GET", "tasks/x/pushNotificationConfigs/"),
        ("GET", "tasks/x/pushNotificationConfigs/c1/more"),
        ("GET", "tasks//pushNotificationConfigs"),
        ("GET", ".well-known/agent-card.json/"),
        ("GET", "agent-card.json"),
        ("GET", "tasks/x/y/z/w"),
    ],
)
def test_unmatched_routes(method: str, rest: str) -> None:
    assert match(method, f"/a2a/acme/{rest}") is None


@pytest.mark.parametrize(
    "path",
    [
        "/unknown",
        "/",
        "",
        "/a2a",
        "/a2a/",
        "/a2a//message:send",
        "/api/a2a/acme/message:send",
        "a2a/acme/message:send",
        "/A2A/acme/message:send",
    ],
)
def test_paths_outside_the_mount(path: str) -> None:
    assert match("POST", path) is None


def test_brand_without_operation_is_unmatched() -> None:
    assert match("GET", "/a2a/acme") is None
    assert match("GET", "/a2a/acme/") is None


@pytest.mark.parametrize("colon", ["%3A", "%3a"])
def test_paths_are_not_decoded_again(colon: str) -> None:
    # Servers hand over the path decoded once (RFC 3986 §2.4): a `%3A` that reaches the
    # router was `%253A` on the wire, the literal text "%3A", never a colon.
    assert match("POST", f"/a2a/acme/message{colon}send") is None
    assert match("POST", f"/a2a/acme/message{colon}stream") is None
    assert match("POST", f"/a2a/acme/tasks/t-9{colon}cancel") is None
    assert match("GET", f"/a2a/acme/tasks/t-9{colon}cancel") == Route(
        "get_task", "acme", f"t-9{colon}cancel"
    )


def test_brand_and_task_ids_are_taken_as_decoded() -> None:
    assert match("POST", "/a2a/01M3R53Q5SZQ6FQSMSDBSSREAA/message:send") == Route(
        "send", "01M3R53Q5SZQ6FQSMSDBSSREAA"
    )
    assert match("GET", "/a2a/acme co/.well-known/agent-card.json") == Route("card", "acme co")
    assert match("GET", "/a2a/café/tasks") == Route("list_tasks", "café")
    assert match("GET", "/a2a/x:y/tasks") == Route("list_tasks", "x:y")
    assert match("GET", "/a2a/acme/tasks/t 1") == Route("get_task", "acme", "t 1")
    # Escapes stay as they are: `%61cme` is not `acme`.
    assert match("POST", "/a2a/%61cme/message:send") == Route("send", "%61cme")
    assert match("GET", "/a2a/acme/tasks/t%201") == Route("get_task", "acme", "t%201")


# -- HEAD's answer and a 405's Allow ---------------------------------------------------------


def test_a_head_answer_has_no_body_and_the_gets_length() -> None:
    body = b'{"tasks": []}'
    answer = Response(200, (("Content-Type", "application/json"),), body)
    head = for_method("HEAD", answer)
    # The length a GET's body has, even where the answer did not say it (RFC 9110 §8.6).
    assert head == Response(
        200, (("Content-Type", "application/json"), ("Content-Length", str(len(body))))
    )
    told = Response(200, (("Content-Length", str(len(body))),), body)
    assert for_method("HEAD", told) == Response(200, (("Content-Length", str(len(body))),))
    assert for_method("GET", answer) is answer
    assert for_method("POST", answer) is answer


def test_allow_names_head_with_get() -> None:
    assert allow("GET") == ("Allow", "GET, HEAD")
    assert allow("GET", "POST") == ("Allow", "GET, POST, HEAD")
    assert allow("POST") == ("Allow", "POST")
    assert allow("GET", "HEAD") == ("Allow", "GET, HEAD")


# -- Routes: match, with the Provider's own Brands' routes remembered --------------------------

OAUTH_RESTS = [
    "oauth/device_authorization",
    "oauth/token",
    "oauth/.well-known/oauth-authorization-server",
    "oauth/jwks.json",
    "oauth/consent",
    "oauth/consent/decision",
    "oauth/connected",
    "oauth/agents",
]


def test_head_matches_what_get_matches_on_the_oauth_routes() -> None:
    for rest in OAUTH_RESTS:
        path = f"/a2a/acme/{rest}"
        assert match("HEAD", path) == match("GET", path), rest


def test_routes_answer_what_match_answers_every_time() -> None:
    routes = Routes(["acme"])
    rests = [rest for rest, *_ in ROUTE_TABLE] + OAUTH_RESTS + ["", "nope", "tasks/", "x/y/z"]
    for _ in range(2):  # the second pass answers from what the first one kept
        for brand in ("acme", "other"):
            for rest in rests:
                for method in METHODS:
                    path = f"/a2a/{brand}/{rest}"
                    assert routes.match(method, path) == match(method, path), (method, path)


def test_routes_keep_only_the_fixed_routes_of_their_own_brands() -> None:
    """What a client chooses (a task id, a Brand id) never grows what `Routes` keeps."""
    routes = Routes(["acme"])
    for i in range(1000):
        routes.match("GET", f"/a2a/acme/tasks/t-{i}")
        routes.match("POST", f"/a2a/acme/tasks/t-{i}:cancel")
        routes.match("GET", f"/a2a/acme/tasks/t-{i}/pushNotificationConfigs")
        routes.match("POST", f"/a2a/brand-{i}/message:send")
    assert routes._known == {}
    send = routes.match("POST", "/a2a/acme/message:send")
    assert routes.match("POST", "/a2a/acme/message:send") is send
    card = routes.match("GET", "/a2a/acme/.well-known/agent-card.json")
    assert set(routes._known.values()) == {send, card}
