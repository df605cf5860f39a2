"""The Provider's request flow, in-process, through both drivers and both embedded stores.

pact-provider.md §2.1 (processing order), §2.3 (error envelope), §2.4-2.7, §4 (contexts);
spec §4.2-4.3 (closed contexts, retries), §6 (429).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from typing import Any

import pytest

from pactmw.core.http import Request, Response
from pactmw.provider import Brand, RateLimit, Reply
from pactmw.provider.app import Provider
from pactmw.provider.messages import is_uuid
from pactmw.store.base import StoredTurn
from tests.provider import (
    A2A,
    DISABLED_ISSUER,
    OTHER_ISSUER,
    BodyReader,
    Bot,
    Drive,
    Kit,
    assert_a2a,
    assert_bare,
    assert_error,
    header,
    message_body,
    must_not_aread,
    sync_drive,
)
from tests.support.a2a import PENDING
from tests.support.parties import ISSUER

UNKNOWN_CONTEXT = "Unknown contextId"
IN_USE = "messageId is already in use in this context"
CLOSED = "Conversation is closed"
CHALLENGE = 'Bearer realm="a2a"'


def send(
    kit: Kit,
    provider: Provider,
    drive: Drive,
    text: str = "hello",
    *,
    brand: str = "acme",
    sub: str = "user-1",
    issuer: str = ISSUER,
    context_id: str | None = None,
    message_id: str | None = None,
    headers: tuple[tuple[str, str], ...] = (),
) -> Response:
    body = message_body(text, message_id=message_id, context_id=context_id)
    request = kit.request(
        "POST", f"/a2a/{brand}/message:send", token=kit.token(sub, issuer), headers=headers
    )
    return drive(provider, request, body)


def reply(response: Response, text: str | None = None) -> dict[str, Any]:
    """The agent message of a successful reply, after checking its exact shape."""
    data = assert_a2a(response, 200)
    assert list(data) == ["message"]
    message: dict[str, Any] = data["message"]
    assert list(message) == ["messageId", "contextId", "role", "parts"]
    assert message["role"] == "ROLE_AGENT"
    assert is_uuid(message["messageId"])
    assert is_uuid(message["contextId"])
    assert isinstance(message["parts"], list)
    assert len(message["parts"]) >= 1
    assert list(message["parts"][0]) == ["text"]
    if text is not None:
        assert message["parts"] == [{"text": text}]
    return message


def acme(handler: Any = None, brand_id: str = "acme") -> Brand:
    return Brand(id=brand_id, name=brand_id.title(), handler=handler or Bot())


# -- processing order (§2.1) ----------------------------------------------------------------

UNMATCHED = [
    ("GET", "/unknown"),
    ("GET", "/a2a/acme/unknown"),
    ("GET", "/a2a/acme/message:send"),
    ("DELETE", "/a2a/acme/message:send"),
    ("PUT", "/a2a/acme/message:send"),
    ("POST", "/a2a/acme/tasks"),
    ("GET", "/a2a/acme/tasks/x:cancel"),
    ("GET", "/a2a/acme/tasks/x:subscribe"),
    ("DELETE", "/a2a/acme/tasks/x/pushNotificationConfigs"),
    ("POST", "/a2a/acme/tasks/x/pushNotificationConfigs/c1"),
    ("POST", "/a2a/nobody/tasks"),
    ("POST", "/a2a/acme/.well-known/agent-card.json"),
]


@pytest.mark.parametrize(("method", "path"), UNMATCHED)
def test_unmatched_routes_are_404_before_authentication(
    memory_kit: Kit, drive: Drive, method: str, path: str
) -> None:
    provider = memory_kit.provider()
    for token in (None, "Bearer garbage", memory_kit.token()):
        response = drive(provider, memory_kit.request(method, path, token=token))
        assert_bare(response, 404)
        assert header(response, "WWW-Authenticate") == []


def test_unknown_brand_is_401_without_token_and_404_with_one(memory_kit: Kit, drive: Drive) -> None:
    provider = memory_kit.provider()
    for method, path in [
        ("POST", "/a2a/nobody/message:send"),
        ("GET", "/a2a/nobody/tasks"),
        ("GET", "/a2a/nobody/tasks/t-1"),
        ("POST", "/a2a/nobody/message:stream"),
    ]:
        # The body is never read: drive() fails the test if read_body is called.
        unauthenticated = drive(provider, memory_kit.request(method, path))
        assert_bare(unauthenticated, 401)
        assert header(unauthenticated, "WWW-Authenticate") == [CHALLENGE]
        authenticated = drive(provider, memory_kit.request(method, path, token=memory_kit.token()))
        assert_bare(authenticated, 404)
        assert header(authenticated, "WWW-Authenticate") == []


def test_unknown_brand_card_is_404_and_known_card_needs_no_token(
    memory_kit: Kit, drive: Drive
) -> None:
    provider = memory_kit.provider()
    assert_bare(
        drive(provider, memory_kit.request("GET", "/a2a/nobody/.well-known/agent-card.json")),
        404,
    )
    card = assert_a2a(
        drive(provider, memory_kit.request("GET", "/a2a/acme/.well-known/agent-card.json")), 200
    )
    assert card["name"] == "Acme Support"


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer not-a-jwt",
        "Basic dXNlcjpwYXNz",
        "expired",
        "wrong-audience",
        "disabled",
        "unknown-issuer",
        "future-iat",
        "too-long",
    ],
)
def test_unauthenticated_send_is_401_and_the_body_is_never_read(
    memory_kit: Kit, drive: Drive, authorization: str | None
) -> None:
    kit = memory_kit
    now = int(kit.clock())
    tokens = {
        "expired": kit.token(iat=now - 200, exp=now - 100),
        "wrong-audience": kit.token(aud="https://provider.example/a2a/acme"),
        "disabled": kit.token(issuer=DISABLED_ISSUER),
        "unknown-issuer": kit.token(iss="https://stranger.example"),
        "future-iat": kit.token(iat=now + 31, exp=now + 151),
        "too-long": kit.token(iat=now, exp=now + 301),
    }
    token = tokens.get(authorization or "", authorization)
    bot = Bot()
    provider = kit.provider(acme(bot))
    # drive() without a body passes a read_body that fails the test when called: `{` is never read.
    response = drive(provider, kit.request("POST", "/a2a/acme/message:send", token=token))
    assert_bare(response, 401)
    assert header(response, "WWW-Authenticate") == [CHALLENGE]
    assert bot.calls == 0


def test_two_authorization_headers_are_refused(memory_kit: Kit, drive: Drive) -> None:
    provider = memory_kit.provider()
    token = memory_kit.token()
    request = memory_kit.request(
        "GET", "/a2a/acme/tasks", token=token, headers=(("authorization", token),)
    )
    assert_bare(drive(provider, request), 401)


def test_authenticated_broken_body_is_invalid_json(memory_kit: Kit, drive: Drive) -> None:
    provider = memory_kit.provider()
    request = memory_kit.request("POST", "/a2a/acme/message:send", token=memory_kit.token())
    assert_error(drive(provider, request, b"{"), "INVALID_PARAMS", "Invalid JSON request body")


def test_token_reuse_is_accepted_across_brands(memory_kit: Kit, drive: Drive) -> None:
    provider = memory_kit.provider(acme(), acme(brand_id="globex"))
    token = memory_kit.token()
    for brand in ("acme", "globex"):
        request = memory_kit.request("POST", f"/a2a/{brand}/message:send", token=token)
        reply(drive(provider, request, message_body("hi")))
    request = memory_kit.request("POST", "/a2a/nobody/message:send", token=token)
    assert_bare(drive(provider, request, message_body("hi")), 404)


# -- message:send through the flow -----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason", "message"),
    [
        (b"{", "INVALID_PARAMS", "Invalid JSON request body"),
        (
            b'{"message": {"messageId": "m", "role": "ROLE_USER"}}',
            "INVALID_PARAMS",
            "Invalid request body",
        ),
        (
            message_body(parts=[{"raw": "aGVsbG8="}], taskId="t-1"),
            "TASK_NOT_FOUND",
            "Task not found",
        ),
        (
            message_body(parts=[{"raw": "aGVsbG8="}], role="ROLE_AGENT"),
            "INVALID_PARAMS",
            "Message role must be ROLE_USER",
        ),
        (
            message_body(parts=[{"raw": "aGVsbG8="}]),
            "CONTENT_TYPE_NOT_SUPPORTED",
            "Content type not supported",
        ),
        (message_body(" \n "), "INVALID_PARAMS", "Message text must not be blank"),
        (message_body("hi", context_id="not-a-uuid"), "INVALID_PARAMS", UNKNOWN_CONTEXT),
    ],
)
def test_send_errors_use_the_exact_envelope(
    kit: Kit, drive: Drive, body: bytes, reason: str, message: str
) -> None:
    bot = Bot()
    provider = kit.provider(acme(bot))
    request = kit.request("POST", "/a2a/acme/message:send", token=kit.token())
    assert_error(drive(provider, request, body), reason, message)
    assert bot.calls == 0


def test_reply_shape(kit: Kit, drive: Drive) -> None:
    bot = Bot(lambda turn: "Sure, what is the order number?")
    provider = kit.provider(acme(bot))
    response = send(kit, provider, drive, "I need help with my order.", message_id="m-001")
    message = reply(response, "Sure, what is the order number?")
    assert message["messageId"] != "m-001"
    assert "taskId" not in message
    assert header(response, "Content-Length") == [str(len(response.body))]
    assert bot.calls == 1


def test_reply_with_data_parts(kit: Kit, drive: Drive) -> None:
    data = ({"order": "A-1001", "status": "shipped"}, {"items": [1, 2]})
    provider = kit.provider(acme(Bot(lambda turn: Reply(text="Here it is.", data=data))))
    message = reply(send(kit, provider, drive))
    assert message["parts"] == [
        {"text": "Here it is."},
        {"data": {"order": "A-1001", "status": "shipped"}},
        {"data": {"items": [1, 2]}},
    ]


def test_multi_turn_conversation_and_history(kit: Kit, drive: Drive) -> None:
    bot = Bot(lambda turn: f"reply {len(turn.history) + 1}")
    provider = kit.provider(acme(bot))
    first = reply(send(kit, provider, drive, "one", message_id="m1"), "reply 1")
    context_id = first["contextId"]
    second = reply(
        send(kit, provider, drive, "two", message_id="m2", context_id=context_id), "reply 2"
    )
    assert second["contextId"] == context_id
    kit.clock.advance(5)
    third = reply(
        send(kit, provider, drive, "three", message_id="m3", context_id=context_id), "reply 3"
    )
    assert third["contextId"] == context_id
    assert len({first["messageId"], second["messageId"], third["messageId"]}) == 3

    assert bot.calls == 3
    turn = bot.turns[2]
    assert turn.text == "three"
    assert turn.parts == ({"text": "three", "mediaType": "text/plain"},)
    assert turn.context_id == context_id
    assert turn.message_id == "m3"
    assert turn.caller.issuer == ISSUER
    assert turn.caller.sub == "user-1"
    assert turn.caller.actor_id.startswith("pa:")
    assert turn.brand.id == "acme"
    assert bot.turns[0].history == ()
    assert turn.history == (
        StoredTurn("m1", "one", first["messageId"], "reply 1"),
        StoredTurn("m2", "two", second["messageId"], "reply 2"),
    )


def test_foreign_contexts_are_unknown(kit: Kit, drive: Drive) -> None:
    bot = Bot()
    provider = kit.provider(acme(bot), acme(brand_id="globex"))
    context_id = reply(send(kit, provider, drive, "mine"))["contextId"]
    calls = bot.calls
    for options in [
        {"sub": "user-2"},
        {"issuer": OTHER_ISSUER},
        {"brand": "globex"},
        {"context_id": context_id.upper()},
        {"context_id": context_id.replace("-", "")},
        {"context_id": "not-a-uuid"},
        {"context_id": ""},
        {"context_id": str(uuid.uuid4())},
    ]:
        options.setdefault("context_id", context_id)
        response = send(kit, provider, drive, "hijack", **options)
        assert_error(response, "INVALID_PARAMS", UNKNOWN_CONTEXT)
    assert bot.calls == calls
    # The owner still continues.
    assert reply(send(kit, provider, drive, "again", context_id=context_id))["contextId"] == (
        context_id
    )


def test_retry_returns_the_identical_reply_without_running_the_bot(kit: Kit, drive: Drive) -> None:
    bot = Bot(lambda turn: f"answer to {turn.text} #{uuid.uuid4()}")
    provider = kit.provider(acme(bot))
    first = send(kit, provider, drive, "first", message_id="m1")
    context_id = reply(first)["contextId"]
    second = send(kit, provider, drive, "second", message_id="m2", context_id=context_id)
    reply(second)
    assert bot.calls == 2
    kit.clock.advance(30)
    for _ in range(3):
        again = send(kit, provider, drive, "second", message_id="m2", context_id=context_id)
        assert again.status == 200
        assert again.body == second.body
        assert header(again, "Content-Type") == [A2A]
    # A retry with other text is still the same message.
    changed = send(kit, provider, drive, "other", message_id="m2", context_id=context_id)
    assert changed.body == second.body
    # The first message (sent without a contextId) can be retried inside its context.
    retried_first = send(kit, provider, drive, "first", message_id="m1", context_id=context_id)
    assert retried_first.body == first.body
    assert bot.calls == 2


def test_retry_without_context_starts_a_new_conversation(kit: Kit, drive: Drive) -> None:
    bot = Bot()
    provider = kit.provider(acme(bot))
    one = reply(send(kit, provider, drive, message_id="m1"))
    two = reply(send(kit, provider, drive, message_id="m1"))
    assert one["contextId"] != two["contextId"]
    assert bot.calls == 2


def test_message_id_of_an_agent_reply_is_in_use(kit: Kit, drive: Drive) -> None:
    bot = Bot()
    provider = kit.provider(acme(bot))
    first = reply(send(kit, provider, drive, message_id="m1"))
    response = send(
        kit, provider, drive, message_id=first["messageId"], context_id=first["contextId"]
    )
    assert_error(response, "INVALID_PARAMS", IN_USE)
    assert bot.calls == 1


# -- concurrent duplicates --------------------------------------------------------------------

DUPLICATES = 6


def test_concurrent_duplicates_sync_driver(kit: Kit) -> None:
    release = threading.Event()
    calls: list[str] = []

    def slow(turn: Any) -> str:
        calls.append(turn.message_id)
        if turn.message_id == "dup":
            assert release.wait(10), "never released"
        return f"answer {turn.message_id}"

    provider = kit.provider(acme(slow))
    context_id = reply(provider.handle(_send_request(kit), BodyReader(message_body())))["contextId"]
    body = message_body("dup", message_id="dup", context_id=context_id)
    results: list[Response] = []
    lock = threading.Lock()
    barrier = threading.Barrier(DUPLICATES)

    def worker() -> None:
        request = _send_request(kit)
        barrier.wait(10)
        response = provider.handle(request, BodyReader(body))
        with lock:
            results.append(response)

    threads = [threading.Thread(target=worker) for _ in range(DUPLICATES)]
    for thread in threads:
        thread.start()
    # Everyone but the owner of the turn comes back while the bot is still running.
    deadline = time.monotonic() + 10
    while len(results) < DUPLICATES - 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(results) == DUPLICATES - 1
    release.set()
    for thread in threads:
        thread.join(10)
    _check_duplicates(kit, provider, results, calls, context_id, body)


def test_concurrent_duplicates_async_driver(kit: Kit) -> None:
    calls: list[str] = []

    async def main() -> tuple[list[Response], str, Provider, bytes]:
        release = asyncio.Event()

        async def slow(turn: Any) -> str:
            calls.append(turn.message_id)
            if turn.message_id == "dup":
                await asyncio.wait_for(release.wait(), 10)
            return f"answer {turn.message_id}"

        provider = kit.provider(acme(slow))
        first = await provider.ahandle(_send_request(kit), BodyReader(message_body()).aread)
        context_id = reply(first)["contextId"]
        body = message_body("dup", message_id="dup", context_id=context_id)
        tasks = [
            asyncio.create_task(provider.ahandle(_send_request(kit), BodyReader(body).aread))
            for _ in range(DUPLICATES)
        ]
        deadline = time.monotonic() + 10
        while sum(task.done() for task in tasks) < DUPLICATES - 1:
            assert time.monotonic() < deadline, "duplicates did not come back"
            await asyncio.sleep(0.005)
        release.set()
        return list(await asyncio.gather(*tasks)), context_id, provider, body

    results, context_id, provider, body = asyncio.run(main())
    _check_duplicates(kit, provider, results, calls, context_id, body)


def _send_request(kit: Kit) -> Request:
    return kit.request("POST", "/a2a/acme/message:send", token=kit.token())


def _check_duplicates(
    kit: Kit,
    provider: Provider,
    results: list[Response],
    calls: list[str],
    context_id: str,
    body: bytes,
) -> None:
    assert calls.count("dup") == 1
    answered = [r for r in results if r.status == 200]
    assert len(answered) == 1
    assert reply(answered[0], "answer dup")["contextId"] == context_id
    for response in results:
        if response.status != 200:
            assert_error(response, "INVALID_PARAMS", PENDING)
    assert len(results) == DUPLICATES
    # Once answered, a duplicate gets the stored reply.
    again = provider.handle(_send_request(kit), BodyReader(body))
    assert again.body == answered[0].body
    assert calls.count("dup") == 1


def test_concurrent_duplicates_get_stored_reply_or_pending(kit: Kit) -> None:
    """Without holding the bot, each duplicate gets the reply or "no reply yet", never a rerun."""

    async def slow(turn: Any) -> str:
        calls.append(turn.message_id)
        await asyncio.sleep(0.05)
        return "done"

    calls: list[str] = []
    provider = kit.provider(acme(slow))
    context_id = reply(provider.handle(_send_request(kit), BodyReader(message_body())))["contextId"]
    body = message_body("dup", message_id="dup", context_id=context_id)

    async def main() -> list[Response]:
        async def one(delay: float) -> Response:
            await asyncio.sleep(delay)
            return await provider.ahandle(_send_request(kit), BodyReader(body).aread)

        return list(await asyncio.gather(*(one(i * 0.02) for i in range(8))))

    results = asyncio.run(main())
    assert calls.count("dup") == 1
    bodies = {r.body for r in results if r.status == 200}
    assert len(bodies) == 1
    for response in results:
        if response.status != 200:
            assert_error(response, "INVALID_PARAMS", PENDING)


# -- failing bots ---------------------------------------------------------------------------


def test_bot_exception_is_internal_and_retry_runs_again(
    kit: Kit, drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[tuple[str, list[str]]] = []

    def flaky(turn: Any) -> str:
        attempts.append((turn.message_id, [t.message_id for t in turn.history]))
        if len(attempts) == 2:
            raise RuntimeError("database password is hunter2")
        return "fine"

    provider = kit.provider(acme(flaky))
    context_id = reply(send(kit, provider, drive, message_id="m1"))["contextId"]
    with caplog.at_level("ERROR", logger="pactmw.provider"):
        failed = send(kit, provider, drive, message_id="m2", context_id=context_id)
    assert_error(failed, "INTERNAL", "Internal error")
    assert b"hunter2" not in failed.body
    assert b"RuntimeError" not in failed.body
    assert any(record.exc_info for record in caplog.records)
    # The claim was released: the retry runs the bot again (not "no reply yet").
    reply(send(kit, provider, drive, message_id="m2", context_id=context_id), "fine")
    reply(send(kit, provider, drive, message_id="m3", context_id=context_id), "fine")
    assert attempts == [
        ("m1", []),
        ("m2", ["m1"]),
        ("m2", ["m1"]),  # the failed attempt left nothing in the history
        ("m3", ["m1", "m2"]),
    ]


@pytest.mark.parametrize("result", [None, 42, b"bytes", {"text": "hi"}, ["hi"]])
def test_bot_returning_a_wrong_type_is_internal(kit: Kit, drive: Drive, result: Any) -> None:
    bot = Bot(lambda turn: "ok" if turn.message_id == "m1" else result)
    provider = kit.provider(acme(bot))
    context_id = reply(send(kit, provider, drive, message_id="m1"))["contextId"]
    for _ in range(2):
        response = send(kit, provider, drive, message_id="m2", context_id=context_id)
        assert_error(response, "INTERNAL", "Internal error")
    # Each retry ran the bot again: the claim is released after a bad result too.
    assert bot.calls == 3


@pytest.mark.parametrize(
    "bad",
    [
        Reply(text="x", data=({"v": float("nan")},)),
        Reply(text="x", data=({"v": object()},)),
        Reply(text=5),  # type: ignore[arg-type]
        Reply(text=None),  # type: ignore[arg-type]
        Reply(text="nul \x00 inside"),
        "nul \x00 inside",
    ],
)
def test_bot_reply_that_cannot_be_sent_is_internal_and_released(
    kit: Kit, drive: Drive, bad: Any
) -> None:
    bot = Bot(lambda turn: "ok" if turn.message_id == "m1" else bad)
    provider = kit.provider(acme(bot))
    context_id = reply(send(kit, provider, drive, message_id="m1"))["contextId"]
    for _ in range(2):
        response = send(kit, provider, drive, message_id="m2", context_id=context_id)
        assert_error(response, "INTERNAL", "Internal error")
    assert bot.calls == 3


def test_async_bot_exception_is_internal(kit: Kit, drive: Drive) -> None:
    async def broken(turn: Any) -> str:
        raise ValueError("secret")

    provider = kit.provider(acme(broken))
    response = send(kit, provider, drive)
    assert_error(response, "INTERNAL", "Internal error")
    assert b"secret" not in response.body


class _AsyncCallable:
    async def __call__(self, turn: Any) -> str:
        await asyncio.sleep(0)
        return f"callable {turn.text}"


def _sync_handler(turn: Any) -> str:
    return f"sync {turn.text}"


async def _async_handler(turn: Any) -> Reply:
    await asyncio.sleep(0)
    return Reply(text=f"async {turn.text}")


def _returns_coroutine(turn: Any) -> Any:
    return _async_handler(turn)


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (_sync_handler, "sync hi"),
        (_async_handler, "async hi"),
        (_returns_coroutine, "async hi"),
        (_AsyncCallable(), "callable hi"),
    ],
)
def test_sync_and_async_handlers_through_both_drivers(
    kit: Kit, drive: Drive, handler: Any, expected: str
) -> None:
    provider = kit.provider(acme(handler))
    first = reply(send(kit, provider, drive, "hi"), expected)
    reply(send(kit, provider, drive, "hi", context_id=first["contextId"]), expected)


# -- closed conversations ---------------------------------------------------------------------


def test_reply_close_ends_the_conversation(kit: Kit, drive: Drive) -> None:
    bot = Bot(lambda turn: Reply(text="Bye.", close=True) if "bye" in turn.text else "ok")
    provider = kit.provider(acme(bot))
    context_id = reply(send(kit, provider, drive, "hello"), "ok")["contextId"]
    reply(send(kit, provider, drive, "bye", message_id="m-bye", context_id=context_id), "Bye.")
    response = send(kit, provider, drive, "hello again", context_id=context_id)
    assert_error(response, "UNSUPPORTED_OPERATION", CLOSED)
    assert bot.calls == 2
    # A new conversation works.
    assert reply(send(kit, provider, drive, "hello"), "ok")["contextId"] != context_id


def test_a_message_a_closed_conversation_refused_was_never_received(kit: Kit) -> None:
    """Its claim is released at once, not left for its lease to lapse: the store holds no
    unanswered turn of it (the same rule as Poppy's `conversation_closed`)."""
    bot = Bot(lambda turn: Reply(text="Bye.", close=True))
    provider = kit.provider(acme(bot))
    context_id = reply(send(kit, provider, sync_drive, "bye"), "Bye.")["contextId"]
    refused = send(kit, provider, sync_drive, "hello?", message_id="m-late", context_id=context_id)
    assert_error(refused, "UNSUPPORTED_OPERATION", CLOSED)
    # Within the refused claim's lease: only a released claim is `new` again.
    claim = provider.store.claim_message(
        context_id=context_id, message_id="m-late", text="hello?", now=kit.clock(), lease_seconds=60
    )
    assert claim.kind == "new"
    assert bot.calls == 1


def test_retry_of_the_closing_message_gets_the_stored_reply(memory_kit: Kit) -> None:
    kit, drive = memory_kit, sync_drive
    provider = kit.provider(acme(Bot(lambda turn: Reply(text="Bye.", close=True))))
    first = send(kit, provider, drive, "bye", message_id="m1")
    context_id = reply(first)["contextId"]
    again = send(kit, provider, drive, "bye", message_id="m1", context_id=context_id)
    assert again.body == first.body


def test_idle_conversations_close(kit: Kit, drive: Drive) -> None:
    bot = Bot()
    provider = kit.provider(acme(bot), conversation_idle_timeout=60)
    context_id = reply(send(kit, provider, drive))["contextId"]
    kit.clock.advance(60)  # exactly the timeout is still open
    reply(send(kit, provider, drive, context_id=context_id))
    kit.clock.advance(60.5)
    assert_error(send(kit, provider, drive, context_id=context_id), "UNSUPPORTED_OPERATION", CLOSED)
    # Closed for good, even for a caller that comes back at once.
    assert_error(send(kit, provider, drive, context_id=context_id), "UNSUPPORTED_OPERATION", CLOSED)
    assert bot.calls == 2
    # A foreign caller still cannot tell the context exists.
    assert_error(
        send(kit, provider, drive, sub="user-2", context_id=context_id),
        "INVALID_PARAMS",
        UNKNOWN_CONTEXT,
    )
    reply(send(kit, provider, drive))


def test_no_idle_timeout_by_default(kit: Kit, drive: Drive) -> None:
    provider = kit.provider()
    context_id = reply(send(kit, provider, drive))["contextId"]
    kit.clock.advance(30 * 24 * 3600)
    reply(send(kit, provider, drive, context_id=context_id))


# -- body size -------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_body_over_the_limit_is_413(kit: Kit, driver: str) -> None:
    bot = Bot()
    limit = 300
    provider = kit.provider(acme(bot), max_body_bytes=limit)
    base = message_body("", message_id="m1")
    exact = message_body("x" * (limit - len(base)), message_id="m1")
    over = message_body("x" * (limit - len(base) + 1), message_id="m1")
    assert (len(exact), len(over)) == (limit, limit + 1)

    def run(body: bytes) -> tuple[Response, list[int]]:
        reader = BodyReader(body)
        if driver == "sync":
            return provider.handle(_send_request(kit), reader), reader.limits
        return asyncio.run(provider.ahandle(_send_request(kit), reader.aread)), reader.limits

    response, limits = run(over)
    assert_bare(response, 413)
    assert header(response, "Content-Length") == ["0"]
    assert limits == [limit]
    assert bot.calls == 0
    response, limits = run(exact)
    reply(response)
    assert limits == [limit]
    assert bot.calls == 1


# -- rate limits -----------------------------------------------------------------------------


def test_rate_limit_per_agent(memory_kit: Kit, drive: Drive) -> None:
    kit = memory_kit
    bot = Bot()
    provider = kit.provider(acme(bot), rate_limit=RateLimit(per_agent=3, window=60))
    for sub in ("a", "b"):
        reply(send(kit, provider, drive, sub=sub))
    assert_a2a(drive(provider, kit.request("GET", "/a2a/acme/tasks", token=kit.token("c"))), 200)
    limited = send(kit, provider, drive, sub="d")
    assert_bare(limited, 429)
    assert header(limited, "Retry-After") == ["60"]
    kit.clock.advance(15.5)
    limited = drive(provider, kit.request("GET", "/a2a/acme/tasks", token=kit.token("e")))
    assert_bare(limited, 429)
    assert header(limited, "Retry-After") == ["45"]
    assert bot.calls == 2
    # Another personal agent has its own count.
    reply(send(kit, provider, drive, issuer=OTHER_ISSUER))
    # Unauthenticated requests are refused as such, not counted; the card is never limited.
    assert_bare(drive(provider, kit.request("GET", "/a2a/acme/tasks")), 401)
    card = kit.request("GET", "/a2a/acme/.well-known/agent-card.json")
    assert drive(provider, card).status == 200
    # The next window starts afresh.
    kit.clock.advance(45)
    reply(send(kit, provider, drive, sub="d"))


def test_rate_limit_per_user(memory_kit: Kit, drive: Drive) -> None:
    kit = memory_kit
    provider = kit.provider(rate_limit=RateLimit(per_user=2, window=10))
    reply(send(kit, provider, drive, sub="a"))
    reply(send(kit, provider, drive, sub="a"))
    limited = send(kit, provider, drive, sub="a")
    assert_bare(limited, 429)
    assert header(limited, "Retry-After") == ["10"]
    reply(send(kit, provider, drive, sub="b"))
    reply(send(kit, provider, drive, sub="a", issuer=OTHER_ISSUER))
    kit.clock.advance(9.9)
    limited = send(kit, provider, drive, sub="a")
    assert header(limited, "Retry-After") == ["1"]  # at least one second
    kit.clock.advance(0.1)
    reply(send(kit, provider, drive, sub="a"))


def test_rate_limit_refusals_are_logged_once_then_once_a_minute(
    memory_kit: Kit, drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    # Found in a deployment trial: a 429 was logged nowhere, so an operator could not see an
    # agent throttled. Now one INFO line, and while it goes on one summary a minute, not one
    # line a request (an agent that retries at once would flood the log).
    kit = memory_kit
    provider = kit.provider(rate_limit=RateLimit(per_agent=1, window=600))
    caplog.set_level(logging.INFO, logger="pactmw")
    reply(send(kit, provider, drive, sub="a"))
    for _ in range(5):
        assert_bare(send(kit, provider, drive, sub="b"), 429)
        kit.clock.advance(12)
    assert_bare(send(kit, provider, drive, sub="a"), 429)  # a minute after the first line
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [
        (
            "pactmw.provider",
            logging.INFO,
            f"rate limit refused: limit=a2a issuer={ISSUER} retry_after=600",
        ),
        (
            "pactmw.provider",
            logging.INFO,
            f"rate limit refused: limit=a2a issuer={ISSUER}: 5 more requests refused "
            "in the 60 s since the last line",
        ),
    ]
    assert kit.token("a") not in caplog.text


def test_a_request_refused_by_one_limit_is_not_counted_by_the_other(
    memory_kit: Kit, drive: Drive
) -> None:
    kit = memory_kit
    provider = kit.provider(rate_limit=RateLimit(per_agent=3, per_user=1, window=60))
    reply(send(kit, provider, drive, sub="a"))
    for _ in range(5):  # refused per user: must not use up the agent's allowance
        assert_bare(send(kit, provider, drive, sub="a"), 429)
    reply(send(kit, provider, drive, sub="b"))
    reply(send(kit, provider, drive, sub="c"))
    assert_bare(send(kit, provider, drive, sub="d"), 429)


def test_nul_in_a_message_is_invalid_params_and_leaves_nothing_behind(
    memory_kit: Kit, drive: Drive
) -> None:
    kit = memory_kit
    bot = Bot()
    provider = kit.provider(acme(bot))
    for text, message_id in (("hi \x00", "m1"), ("hi", "m\x00")):
        response = send(kit, provider, drive, text, message_id=message_id)
        assert_error(response, "INVALID_PARAMS", "Invalid request body")
    assert bot.calls == 0
    # A NUL sub in the JWT is refused at authentication.
    assert_bare(send(kit, provider, drive, sub="user\x00"), 401)


def test_no_rate_limit_by_default(memory_kit: Kit, drive: Drive) -> None:
    provider = memory_kit.provider()
    for _ in range(30):
        assert (
            drive(
                provider, memory_kit.request("GET", "/a2a/acme/tasks", token=memory_kit.token())
            ).status
            == 200
        )


# -- the fixed-answer operations -------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "size"),
    [
        ("", 50),
        ("pageSize=1", 1),
        ("pageSize=100", 100),
        ("contextId=abc&status=TASK_STATE_COMPLETED&pageSize=7", 7),
    ],
)
def test_list_tasks(memory_kit: Kit, drive: Drive, query: str, size: int) -> None:
    provider = memory_kit.provider()
    request = memory_kit.request("GET", "/a2a/acme/tasks", token=memory_kit.token(), query=query)
    response = drive(provider, request)
    assert assert_a2a(response, 200) == {
        "tasks": [],
        "nextPageToken": "",
        "pageSize": size,
        "totalSize": 0,
    }
    assert response.body == (b'{"tasks":[],"nextPageToken":"","pageSize":%d,"totalSize":0}' % size)


@pytest.mark.parametrize(
    "query", ["pageSize=0", "pageSize=101", "pageSize=1.5", "pageSize=NaN", "pageSize=5&pageSize=5"]
)
def test_list_tasks_invalid_page_size(memory_kit: Kit, drive: Drive, query: str) -> None:
    provider = memory_kit.provider()
    request = memory_kit.request("GET", "/a2a/acme/tasks", token=memory_kit.token(), query=query)
    assert_error(drive(provider, request), "INVALID_PARAMS", "Invalid pageSize")


@pytest.mark.parametrize(
    ("method", "rest", "reason", "message"),
    [
        ("GET", "tasks/t-123", "TASK_NOT_FOUND", "Task not found: t-123"),
        ("POST", "tasks/t-123:cancel", "TASK_NOT_FOUND", "Task not found: t-123"),
        ("POST", "message:stream", "UNSUPPORTED_OPERATION", "Unsupported operation"),
        ("POST", "tasks/t-1:subscribe", "UNSUPPORTED_OPERATION", "Unsupported operation"),
        ("GET", "extendedAgentCard", "UNSUPPORTED_OPERATION", "Unsupported operation"),
        (
            "GET",
            "tasks/t-1/pushNotificationConfigs",
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "Push notifications are not supported",
        ),
        (
            "POST",
            "tasks/t-1/pushNotificationConfigs",
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "Push notifications are not supported",
        ),
        (
            "GET",
            "tasks/t-1/pushNotificationConfigs/c1",
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "Push notifications are not supported",
        ),
        (
            "DELETE",
            "tasks/t-1/pushNotificationConfigs/c1",
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "Push notifications are not supported",
        ),
    ],
)
def test_fixed_answer_operations(
    memory_kit: Kit, drive: Drive, method: str, rest: str, reason: str, message: str
) -> None:
    provider = memory_kit.provider()
    path = f"/a2a/acme/{rest}"
    # The body is never read (drive() fails the test otherwise).
    assert_error(
        drive(provider, memory_kit.request(method, path, token=memory_kit.token())), reason, message
    )
    assert_bare(drive(provider, memory_kit.request(method, path)), 401)


# -- header tolerance (§2.7) -------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("a2a-version", "1.0"),),
        (("a2a-version", "2.0"),),
        (("a2a-version", "0.3"), ("a2a-version", "garbage")),
        (("content-type", "application/json"),),
        (("content-type", "application/a2a+json"),),
        (("content-type", "text/plain"),),
        (("content-type", "application/x-www-form-urlencoded"), ("a2a-version", "2.0")),
        (("accept", "text/html"),),
    ],
)
def test_version_and_content_type_headers_are_ignored(
    memory_kit: Kit, drive: Drive, headers: tuple[tuple[str, str], ...]
) -> None:
    provider = memory_kit.provider()
    context_id = reply(send(memory_kit, provider, drive, headers=headers))["contextId"]
    reply(send(memory_kit, provider, drive, headers=headers, context_id=context_id))
    request = memory_kit.request(
        "GET", "/a2a/acme/tasks", token=memory_kit.token(), headers=headers
    )
    assert_a2a(drive(provider, request), 200)


# -- misc ------------------------------------------------------------------------------------


def test_async_driver_never_reads_the_body_for_get(memory_kit: Kit) -> None:
    provider = memory_kit.provider()
    request = memory_kit.request("GET", "/a2a/acme/tasks", token=memory_kit.token())
    assert asyncio.run(provider.ahandle(request, must_not_aread)).status == 200


def test_replies_are_json_with_utf8_text(kit: Kit, drive: Drive) -> None:
    provider = kit.provider(acme(Bot(lambda turn: f"{turn.text} → ☕ café")))
    response = send(kit, provider, drive, "注文")
    assert reply(response, "注文 → ☕ café")
    assert "☕".encode() in response.body
    assert json.loads(response.body)["message"]["parts"][0]["text"] == "注文 → ☕ café"
