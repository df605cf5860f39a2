"""`A2AClient` and `AsyncA2AClient` against pactmw's Provider on a real uvicorn server."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pactmw.client import (
    A2AClient,
    A2AErrorResponse,
    AgentCredentials,
    AgentSigner,
    AsyncA2AClient,
    ContentTypeNotSupported,
    DelegationTokenRejected,
    HTTPError,
    HttpRequest,
    IdentityRejected,
    InternalError,
    InvalidParams,
    JwksHost,
    MessageReply,
    NetworkError,
    PushNotificationNotSupported,
    RateLimited,
    ResponseInvalid,
    RetryPolicy,
    StepUp,
    SyncTransport,
    TaskNotFound,
    UnsupportedOperation,
)
from pactmw.client.a2a import a2a_headers
from pactmw.client.responses import raise_for_status
from pactmw.provider import RateLimit
from tests.client.support import DroppingProxy, Provided, Route, StaticServer, run_provider
from tests.support.clock import OffsetClock
from tests.support.parties import AUDIENCE, ISSUER


def unique(text: str) -> str:
    return f"{text} {uuid.uuid4().hex[:8]}"


def message(result: Any) -> MessageReply:
    assert isinstance(result, MessageReply), result
    return result


def test_a_token_string_is_refused_where_the_client_is_made() -> None:
    """A JWT lasts minutes and each request needs a fresh one: the clients take a callable,
    and a string (a token from `pactmw token`) is refused at once, not as "'str' object is
    not callable" at the first send."""
    url = "http://127.0.0.1:9/a2a/acme"
    for make in (A2AClient, AsyncA2AClient):
        with pytest.raises(TypeError, match=r"for_user\(") as caught:
            make(url, "eyJhbGciOiJFUzI1NiJ9.e30.sig")  # type: ignore[arg-type]
        assert "eyJ" not in str(caught.value)


# -- conversations ------------------------------------------------------------------------------


def test_multi_turn_conversation(provided: Provided, me: AgentCredentials) -> None:
    client = A2AClient(provided.interface("plain"), me)
    first = message(client.send("hello"))
    assert first.text == "turn 1: hello"
    assert first.receipt is None
    assert first.message["role"] == "ROLE_AGENT"
    second = message(client.send("and then", context_id=first.context_id))
    third = message(client.send("finally", context_id=second.context_id))
    assert (second.text, third.text) == ("turn 2: and then", "turn 3: finally")
    assert len({first.context_id, second.context_id, third.context_id}) == 1
    assert len({first.message_id, second.message_id, third.message_id}) == 3
    # a new conversation for the same user starts over
    assert message(client.send("again")).context_id != first.context_id


def test_multi_turn_conversation_async(provided: Provided, me: AgentCredentials) -> None:
    async def run() -> list[str]:
        client = AsyncA2AClient(provided.interface("plain"), me)
        first = message(await client.send("hello"))
        second = message(await client.send("more", context_id=first.context_id))
        turns = await asyncio.gather(
            *(client.send(f"parallel {i}") for i in range(5))  # five new conversations at once
        )
        assert len({message(t).context_id for t in turns}) == 5
        return [first.text, second.text]

    assert asyncio.run(run()) == ["turn 1: hello", "turn 2: more"]


def test_same_message_id_returns_the_stored_reply(provided: Provided, me: AgentCredentials) -> None:
    client = A2AClient(provided.interface("plain"), me)
    context = message(client.send("start")).context_id
    text = unique("once")
    first = message(client.send(text, context_id=context, message_id="m-fixed"))
    again = message(client.send(text, context_id=context, message_id="m-fixed"))
    assert again.message == first.message
    assert provided.ran(text) == 1


# -- resending after a lost answer --------------------------------------------------------------


@pytest.fixture
def proxy(provided: Provided) -> Iterator[DroppingProxy]:
    dropping = DroppingProxy(provided.base, drop=1)
    yield dropping
    dropping.close()


def test_lost_answer_is_recovered_with_the_same_message_id(
    provided: Provided, proxy: DroppingProxy, me: AgentCredentials
) -> None:
    context = message(A2AClient(provided.interface("plain"), me).send("start")).context_id
    slept: list[float] = []
    client = A2AClient(f"{proxy.base}/a2a/plain", me, sleep=slept.append)
    text = unique("lost answer")
    reply = message(client.send(text, context_id=context, message_id="m-lost"))
    assert (proxy.dropped, proxy.connections) == (1, 2)
    assert slept == [0.5]
    assert provided.ran(text) == 1  # the bot ran once; the resend got the stored reply
    stored = A2AClient(provided.interface("plain"), me).send(
        text, context_id=context, message_id="m-lost"
    )
    assert message(stored).message == reply.message


def test_lost_answer_is_recovered_async(
    provided: Provided, proxy: DroppingProxy, me: AgentCredentials
) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def run() -> tuple[str, MessageReply]:
        direct = AsyncA2AClient(provided.interface("plain"), me)
        context = message(await direct.send("start")).context_id
        client = AsyncA2AClient(f"{proxy.base}/a2a/plain", me, sleep=sleep)
        text = unique("lost async")
        return text, message(await client.send(text, context_id=context))

    text, reply = asyncio.run(run())
    assert reply.text.endswith(text)
    assert (proxy.dropped, proxy.connections, slept) == (1, 2, [0.5])
    assert provided.ran(text) == 1


def test_a_first_message_is_not_resent_after_a_lost_answer(
    provided: Provided, proxy: DroppingProxy, me: AgentCredentials
) -> None:
    """Resending it would open a second conversation and run the bot twice (§4.3)."""
    client = A2AClient(f"{proxy.base}/a2a/plain", me, sleep=lambda s: None)
    text = unique("first message")
    with pytest.raises(NetworkError) as caught:
        client.send(text)
    assert caught.value.maybe_delivered
    assert proxy.connections == 1
    assert provided.ran(text) == 1


# -- rate limits --------------------------------------------------------------------------------

WINDOW = 10.0  # seconds of the test Provider's rate-limit window: one request per user in it


@pytest.fixture(scope="module")
def limited(signer: AgentSigner, jwks_host: JwksHost) -> Iterator[tuple[Provided, OffsetClock]]:
    clock = OffsetClock()
    with run_provider(
        signer, jwks_host.url, rate_limit=RateLimit(per_user=1, window=WINDOW), clock=clock
    ) as running:
        yield running, clock


def _at_a_window_start(clock: OffsetClock) -> None:
    """Move the Provider's clock just past the start of a rate-limit window. The windows are
    fixed, so two requests a moment apart near a window's end would be counted in two windows
    and the second would not be limited (CI saw it once, on a loaded machine)."""
    clock.offset += WINDOW - clock() % WINDOW + 0.01


def test_429_retry_after_is_honoured(
    limited: tuple[Provided, OffsetClock], me: AgentCredentials
) -> None:
    provided, clock = limited
    _at_a_window_start(clock)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.offset += seconds

    client = A2AClient(provided.interface("plain"), me, sleep=sleep)
    first = message(client.send("one"))
    text = unique("two")
    second = message(client.send(text, context_id=first.context_id))
    assert second.text == f"turn 2: {text}"
    assert len(slept) == 1
    assert 1 <= slept[0] <= WINDOW
    assert provided.ran(text) == 1


def test_429_async_and_too_long_retry_after(
    limited: tuple[Provided, OffsetClock], me: AgentCredentials
) -> None:
    provided, clock = limited
    _at_a_window_start(clock)

    async def sleep(seconds: float) -> None:
        clock.offset += seconds

    async def run() -> None:
        client = AsyncA2AClient(provided.interface("plain"), me, sleep=sleep)
        message(await client.send("one"))
        message(await client.send("two"))  # waited out
        impatient = AsyncA2AClient(
            provided.interface("plain"), me, retry=RetryPolicy(max_retry_after=0.5), sleep=sleep
        )
        with pytest.raises(RateLimited) as caught:
            await impatient.send("three")
        assert caught.value.retry_after is not None
        assert caught.value.retry_after >= 1
        assert caught.value.header("retry-after") is not None

    asyncio.run(run())


# -- typed errors -------------------------------------------------------------------------------


def check(error: A2AErrorResponse, reason: str, status: int, rpc_status: str, text: str) -> None:
    assert (error.reason, error.status, error.rpc_status) == (reason, status, rpc_status)
    assert error.message == text
    assert error.details[0]["domain"] == "a2a-protocol.org"


def test_every_a2a_error_is_typed(provided: Provided, me: AgentCredentials) -> None:
    client = A2AClient(provided.interface("plain"), me)
    with pytest.raises(InvalidParams) as invalid:
        client.send("hi", context_id=str(uuid.uuid4()))
    check(invalid.value, "INVALID_PARAMS", 400, "INVALID_ARGUMENT", "Unknown contextId")
    with pytest.raises(InvalidParams, match="pageSize"):
        client.list_tasks(page_size=0)
    assert client.list_tasks(page_size=3) == {
        "tasks": [],
        "nextPageToken": "",
        "pageSize": 3,
        "totalSize": 0,
    }

    with pytest.raises(ContentTypeNotSupported) as content:
        client.send("see attached", extra_parts=[{"raw": "aGVsbG8=", "mediaType": "text/x"}])
    check(
        content.value,
        "CONTENT_TYPE_NOT_SUPPORTED",
        400,
        "INVALID_ARGUMENT",
        "Content type not supported",
    )

    with pytest.raises(TaskNotFound) as missing:
        client.get_task("t-404")
    check(missing.value, "TASK_NOT_FOUND", 404, "NOT_FOUND", "Task not found: t-404")
    with pytest.raises(TaskNotFound, match="t-405"):
        client.cancel_task("t-405")

    closing = message(client.send("goodbye"))
    assert closing.text == "bye"
    with pytest.raises(UnsupportedOperation) as closed:
        client.send("are you there?", context_id=closing.context_id)
    assert closed.value.rpc_status == "FAILED_PRECONDITION"

    text = unique("boom")
    with pytest.raises(InternalError) as internal:
        client.send(text)
    check(internal.value, "INTERNAL", 500, "INTERNAL", "Internal error")
    assert provided.ran(text) == 1  # a 500 is an answer: not resent

    push = HttpRequest(
        "GET", f"{client.url}/tasks/t-1/pushNotificationConfigs", headers=a2a_headers(me())
    )
    with pytest.raises(PushNotificationNotSupported) as no_push:
        raise_for_status(SyncTransport().send(push))
    assert no_push.value.reason == "PUSH_NOTIFICATION_NOT_SUPPORTED"

    with pytest.raises(HTTPError) as unknown:
        A2AClient(provided.interface("nobody"), me).send("hi")
    assert type(unknown.value) is HTTPError
    assert (unknown.value.status, unknown.value.body) == (404, b"")


def test_typed_errors_async(provided: Provided, me: AgentCredentials) -> None:
    async def run() -> None:
        client = AsyncA2AClient(provided.interface("plain"), me)
        with pytest.raises(InvalidParams):
            await client.send("hi", context_id="not-a-uuid")
        with pytest.raises(TaskNotFound):
            await client.get_task("t-1")
        with pytest.raises(TaskNotFound):
            await client.cancel_task("t-1")
        assert (await client.list_tasks())["pageSize"] == 50

    asyncio.run(run())


def test_identity_401_versus_delegation_401(provided: Provided, me: AgentCredentials) -> None:
    impostor = AgentSigner.generate(issuer=ISSUER, kid="pa-1")  # same kid, unpublished key
    with pytest.raises(IdentityRejected) as identity:
        A2AClient(provided.interface("plain"), impostor.for_user("u", AUDIENCE)).send("hi")
    assert identity.value.status == 401
    assert identity.value.header("www-authenticate") == 'Bearer realm="a2a"'
    with pytest.raises(IdentityRejected) as audience:
        A2AClient(provided.interface("plain"), me.signer.for_user("u", "wrong-aud")).send("hi")
    # The 401 says nothing more (PACT §3.4): the text names what the agent can check itself.
    assert str(audience.value) == (
        f"{provided.interface('plain')}/message:send: the personal-agent JWT was refused (is "
        "its issuer registered, its key published at the registered jwks_uri, its audience "
        "the one the Provider assigned, and the clock right?)"
    )

    client = A2AClient(provided.interface("acme"), me)
    with pytest.raises(DelegationTokenRejected) as delegation:
        client.send("show my orders", delegation_token="not.a.token")
    assert delegation.value.status == 401
    assert not isinstance(delegation.value, IdentityRejected)

    async def run() -> None:
        aclient = AsyncA2AClient(provided.interface("acme"), me)
        with pytest.raises(DelegationTokenRejected):
            await aclient.send("hi", delegation_token="x.y.z")

    asyncio.run(run())


def test_headers_on_the_wire(provided: Provided, me: AgentCredentials) -> None:
    """What the client sends, seen by a transport that records and forwards."""
    seen: list[HttpRequest] = []

    class Recording(SyncTransport):
        def send(self, request: HttpRequest) -> Any:
            seen.append(request)
            return super().send(request)

    client = A2AClient(provided.interface("acme"), me, transport=Recording())
    step = client.send("show my orders")
    assert isinstance(step, StepUp)
    request = seen[0]
    assert request.url == provided.interface("acme") + "/message:send"
    assert request.header("a2a-version") == "1.0"
    assert request.header("content-type") == "application/json"
    assert (request.header("authorization") or "").startswith("Bearer ey")
    body = json.loads(request.body)
    assert body["message"]["role"] == "ROLE_USER"
    assert body["message"]["parts"] == [{"text": "show my orders", "mediaType": "text/plain"}]
    assert "contextId" not in body["message"]
    uuid.UUID(body["message"]["messageId"])


# -- a misbehaving Provider (a fixed answer on a static server) ---------------------------------

#: An HTTP-date whose year no `datetime` holds.
BEYOND_ANY_CALENDAR = "Fri, 31 Dec 99999999999 23:59:59 GMT"


def test_a_retry_after_date_past_any_calendar_is_unreadable(
    static: StaticServer, me: AgentCredentials
) -> None:
    """Read like any other unreadable `Retry-After`: the policy's default wait, then
    `RateLimited` without a value. It escaped both clients as a bare OverflowError."""
    static.route("/a2a/message:send", Route(429, b"", {"Retry-After": BEYOND_ANY_CALENDAR}))
    policy = RetryPolicy(rate_limit_retries=1)
    slept: list[float] = []
    client = A2AClient(static.url("/a2a"), me, retry=policy, sleep=slept.append)
    with pytest.raises(RateLimited) as caught:
        client.send("hello", context_id="ctx-1")
    assert caught.value.retry_after is None

    async def asleep(seconds: float) -> None:
        slept.append(seconds)

    async def run() -> None:
        aclient = AsyncA2AClient(static.url("/a2a"), me, retry=policy, sleep=asleep)
        with pytest.raises(RateLimited) as acaught:
            await aclient.send("hello", context_id="ctx-1")
        assert acaught.value.retry_after is None

    asyncio.run(run())
    assert slept == [policy.default_retry_after] * 2


@pytest.mark.parametrize("parts", ["not a list", 5, None, [1, "text"], [{"text": 7}]])
def test_a_step_up_whose_status_message_has_odd_parts(
    static: StaticServer, me: AgentCredentials, parts: Any
) -> None:
    """The status message only carries text to show: odd parts give none, as a status message
    that is not an object already did, and the step-up stands. They raised a bare
    AttributeError or TypeError."""
    task = {
        "id": "task-1",
        "contextId": "ctx-1",
        "status": {
            "state": "TASK_STATE_AUTH_REQUIRED",
            "message": {"messageId": "s-1", "role": "ROLE_AGENT", "parts": parts},
        },
        "metadata": {
            "pact.missingScopes": ["orders:read"],
            "pact.verificationUriComplete": "https://shop.example/device?user_code=ABCD",
        },
    }
    static.json("/a2a/message:send", {"task": task})
    step_up = A2AClient(static.url("/a2a"), me).send("my orders?", context_id="ctx-1")
    assert isinstance(step_up, StepUp)
    assert (step_up.text, step_up.missing_scopes) == ("", ("orders:read",))

    async def run() -> Any:
        return await AsyncA2AClient(static.url("/a2a"), me).send("orders?", context_id="ctx-1")

    async_step_up = asyncio.run(run())
    assert isinstance(async_step_up, StepUp)
    assert (async_step_up.text, async_step_up.task_id) == ("", "task-1")


def test_a_reply_with_a_lone_surrogate_is_refused(
    static: StaticServer, me: AgentCredentials
) -> None:
    """JSON's `\\ud800` escape decodes to a string with no UTF-8 form. A reply whose
    `contextId` held one was returned, and continuing the conversation raised a bare
    UnicodeEncodeError while writing the next request; the answer is refused instead."""
    reply = {
        "messageId": "r-1",
        "contextId": "ctx-\ud800",
        "role": "ROLE_AGENT",
        "parts": [{"text": "hi"}],
    }
    static.json("/a2a/message:send", {"message": reply})
    with pytest.raises(ResponseInvalid, match="surrogate"):
        A2AClient(static.url("/a2a"), me).send("hello")

    async def run() -> Any:
        return await AsyncA2AClient(static.url("/a2a"), me).send("hello")

    with pytest.raises(ResponseInvalid, match="surrogate"):
        asyncio.run(run())
    # A pair of surrogate escapes is one character (an emoji), and a number past a double's
    # range beside the escape is no surrogate: both are fine.
    paired = json.dumps({"message": {**reply, "contextId": "ctx-\U0001f600", "metadata": {}}})
    body = paired.replace('"metadata": {}', '"metadata": {"n": 1e400}').encode()
    static.route("/a2a/message:send", Route(200, body))
    assert message(A2AClient(static.url("/a2a"), me).send("hello")).context_id == "ctx-😀"
