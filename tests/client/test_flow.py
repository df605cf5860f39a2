"""The flows driven by scripted answers and fake time: no sockets, exact expectations.

Retry rules, `Retry-After`, redirects and RFC 8628 polling are decided in the flows, so they
are tested here exhaustively; the server tests check the same behaviour end to end.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, TypeVar

import pytest

from pactmw.client import (
    DeviceFlowTimeout,
    HttpRequest,
    HttpResponse,
    MessageReply,
    NetworkError,
    OAuthErrorResponse,
    RateLimited,
    RetryPolicy,
    TokenResponse,
    TooManyRedirects,
    URLRefused,
)
from pactmw.client.a2a import send_flow
from pactmw.client.card import DelegationScheme, Scope, card_flow
from pactmw.client.device import DeviceAuthorizationResponse, poll_flow, wait_flow
from pactmw.client.flow import Flow, run_async, run_sync
from tests.support.clock import FakeClock

T = TypeVar("T")
URL = "https://provider.example/a2a/acme"
SCHEME = DelegationScheme(
    name="userDelegation",
    identity_scheme="platformJwt",
    device_authorization_url=URL + "/oauth/device_authorization",
    token_url=URL + "/oauth/token",
    refresh_url=URL + "/oauth/token",
    metadata_url=None,
    scopes=(Scope("orders:read", "Read"),),
)
CARD = {
    "name": "Acme",
    "description": "",
    "version": "1",
    "supportedInterfaces": [{"url": URL, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
    "capabilities": {},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [],
}


def answer(status: int, body: Any = None, **headers: str) -> HttpResponse:
    raw = b"" if body is None else json.dumps(body).encode()
    return HttpResponse(status, tuple((k.replace("_", "-"), v) for k, v in headers.items()), raw)


def reply(context_id: str = "ctx-1", text: str = "hi") -> HttpResponse:
    message = {
        "messageId": "r-1",
        "contextId": context_id,
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    }
    return answer(200, {"message": message})


class Script:
    """A transport that answers from a list (a `NetworkError` in it is raised instead)."""

    def __init__(self, answers: Sequence[HttpResponse | NetworkError]) -> None:
        self.answers = list(answers)
        self.requests: list[HttpRequest] = []

    def send(self, request: HttpRequest) -> HttpResponse:
        self.requests.append(request)
        item = self.answers.pop(0)
        if isinstance(item, NetworkError):
            raise item
        return item


class AsyncScript(Script):
    async def send(self, request: HttpRequest) -> HttpResponse:  # type: ignore[override]
        return Script.send(self, request)


def drive(
    flow: Flow[T], answers: Sequence[HttpResponse | NetworkError]
) -> tuple[T, Script, list[float]]:
    script, slept = Script(answers), list[float]()
    result = run_sync(flow, script, slept.append)
    assert not script.answers, "the flow stopped early"
    return result, script, slept


LOST = NetworkError("cut off", maybe_delivered=True)
REFUSED = NetworkError("refused", maybe_delivered=False)


def message_id(request: HttpRequest) -> str:
    return str(json.loads(request.body)["message"]["messageId"])


def token_counter() -> Any:
    count = iter(range(1, 100))
    return lambda: f"jwt-{next(count)}"


def send(context_id: str | None, policy: RetryPolicy | None = None) -> Flow[Any]:
    return send_flow(
        URL,
        token_counter(),
        "hello",
        context_id=context_id,
        message_id=None,
        delegation_token=None,
        extra_parts=(),
        policy=policy or RetryPolicy(),
    )


# -- resending ----------------------------------------------------------------------------------


def test_lost_answer_is_resent_with_the_same_message_id_and_a_fresh_token() -> None:
    result, script, slept = drive(send("ctx-1"), [LOST, LOST, reply()])
    assert isinstance(result, MessageReply)
    assert len({message_id(r) for r in script.requests}) == 1
    assert [r.header("authorization") for r in script.requests] == [
        "Bearer jwt-1",
        "Bearer jwt-2",
        "Bearer jwt-3",
    ]
    assert slept == [0.5, 1.0]


def test_retries_are_bounded() -> None:
    with pytest.raises(NetworkError):
        drive(send("ctx-1"), [LOST, LOST, LOST])


def test_the_last_failure_says_how_many_attempts_were_made() -> None:
    """Each attempt is bounded by the transport's timeout: a caller who waited three of them
    reads why (a hanging card URL under `pactmw card --timeout 10` took 31 s)."""
    with pytest.raises(NetworkError) as caught:
        drive(card_flow(URL, RetryPolicy()), [LOST, LOST, LOST])
    assert str(caught.value) == "cut off (3 attempts)"
    assert caught.value.maybe_delivered
    assert caught.value.retryable
    with pytest.raises(NetworkError) as once:
        drive(card_flow(URL, RetryPolicy(network_retries=0)), [LOST])
    assert str(once.value) == "cut off"


def test_a_new_conversation_is_not_resent_after_a_possible_delivery() -> None:
    """Without contextId a resend would open a second conversation and run the agent twice."""
    with pytest.raises(NetworkError) as caught:
        drive(send(None), [LOST])
    assert caught.value.maybe_delivered
    result, _, _ = drive(send(None, RetryPolicy(retry_new_conversations=True)), [LOST, reply()])
    assert isinstance(result, MessageReply)


def test_a_request_that_never_left_is_always_resent() -> None:
    result, script, _ = drive(send(None), [REFUSED, reply()])
    assert isinstance(result, MessageReply)
    assert len(script.requests) == 2


def test_reply_for_another_context_is_refused() -> None:
    from pactmw.client import ResponseInvalid

    with pytest.raises(ResponseInvalid, match="another contextId"):
        drive(send("ctx-1"), [reply(context_id="ctx-2")])


def test_extensions_and_metadata_go_with_the_message_and_every_resend() -> None:
    uri = "https://ext.example/v1"
    flow = send_flow(
        URL,
        token_counter(),
        "hello",
        context_id="ctx-1",
        message_id="m-1",
        delegation_token=None,
        extra_parts=(),
        policy=RetryPolicy(),
        metadata={uri: {"consent": {"token": "t"}}},
        extensions=(uri, "https://other.example/v2"),
    )
    result, script, _ = drive(flow, [LOST, reply()])
    assert isinstance(result, MessageReply)
    first, resend = script.requests
    assert first.body == resend.body
    message = json.loads(first.body)["message"]
    assert message["metadata"] == {uri: {"consent": {"token": "t"}}}
    assert message["extensions"] == [uri, "https://other.example/v2"]
    assert first.header("a2a-extensions") == f"{uri}, https://other.example/v2"
    assert resend.header("a2a-extensions") == first.header("a2a-extensions")


def test_no_extensions_no_metadata_by_default() -> None:
    _, script, _ = drive(send("ctx-1"), [reply()])
    (request,) = script.requests
    message = json.loads(request.body)["message"]
    assert "metadata" not in message
    assert "extensions" not in message
    assert request.header("a2a-extensions") is None


# -- 429 ----------------------------------------------------------------------------------------


def test_retry_after_seconds_is_waited() -> None:
    result, script, slept = drive(send(None), [answer(429, Retry_After="3"), reply()])
    assert isinstance(result, MessageReply)
    assert slept == [3.0]
    assert message_id(script.requests[0]) == message_id(script.requests[1])


def test_retry_after_http_date_uses_the_servers_date() -> None:
    response = answer(
        429,
        Retry_After="Wed, 21 Oct 2026 07:28:07 GMT",
        Date="Wed, 21 Oct 2026 07:28:00 GMT",
    )
    assert response.retry_after() == 7.0
    assert answer(429).retry_after() is None
    assert answer(429, Retry_After="soon").retry_after() is None


def test_dates_past_any_calendar_are_unreadable() -> None:
    """A year no `datetime` holds raised OverflowError; it is unreadable like a bad date (the
    `Date` one falls back on the client's clock)."""
    beyond = "Fri, 31 Dec 99999999999 23:59:59 GMT"
    assert answer(429, Retry_After=beyond).retry_after() is None
    response = answer(429, Retry_After="Wed, 21 Oct 2026 07:28:07 GMT", Date=beyond)
    assert response.retry_after(now=1_792_567_680.0) == 7.0


def test_too_long_retry_after_raises_at_once() -> None:
    with pytest.raises(RateLimited) as caught:
        drive(send(None), [answer(429, Retry_After="120")])
    assert caught.value.retry_after == 120.0
    assert caught.value.status == 429


def test_429_retries_are_bounded() -> None:
    with pytest.raises(RateLimited):
        drive(send(None), [answer(429, Retry_After="1")] * 3)
    _, _, slept = drive(send(None), [answer(429), reply()])
    assert slept == [1.0]  # no Retry-After: the policy's default


# -- redirects ----------------------------------------------------------------------------------


def test_card_follows_relative_and_absolute_redirects() -> None:
    card, script, _ = drive(
        card_flow("https://shop.example/.well-known/agent-card.json", RetryPolicy()),
        [
            answer(301, Location="/moved"),
            answer(307, Location="https://provider.example/a2a/acme/.well-known/agent-card.json"),
            answer(200, CARD),
        ],
    )
    assert [r.url for r in script.requests] == [
        "https://shop.example/.well-known/agent-card.json",
        "https://shop.example/moved",
        "https://provider.example/a2a/acme/.well-known/agent-card.json",
    ]
    assert card.url == script.requests[-1].url
    assert all(r.header("authorization") is None for r in script.requests)


def test_card_redirects_are_bounded() -> None:
    hops = [answer(302, Location=f"/hop{i}") for i in range(6)]
    with pytest.raises(TooManyRedirects):
        drive(card_flow("https://shop.example/card", RetryPolicy()), hops)
    card, _, _ = drive(
        card_flow("https://shop.example/card", RetryPolicy()), [*hops[:5], answer(200, CARD)]
    )
    assert card.name == "Acme"


def test_card_redirect_to_clear_text_is_refused() -> None:
    with pytest.raises(URLRefused):
        drive(
            card_flow("https://shop.example/card", RetryPolicy()),
            [answer(302, Location="http://evil.example/card")],
        )


# -- RFC 8628 polling ---------------------------------------------------------------------------


def authorization(expires_in: int = 600, interval: int = 5) -> DeviceAuthorizationResponse:
    return DeviceAuthorizationResponse(
        device_code="dc",
        user_code="BCDF-GHJK",
        verification_uri=URL + "/oauth/consent",
        verification_uri_complete=URL + "/oauth/consent?user_code=BCDF-GHJK",
        expires_in=expires_in,
        interval=interval,
        scopes=("orders:read",),
        received_at=0.0,
    )


TOKEN = {"token_type": "bearer", "access_token": "at", "expires_in": 3600, "scope": "orders:read"}


def oauth(error: str, status: int = 400) -> HttpResponse:
    return answer(status, {"error": error, "error_description": "..."})


def wait(
    clock: FakeClock, auth: DeviceAuthorizationResponse, timeout: float | None = None
) -> Flow[TokenResponse]:
    return wait_flow(
        SCHEME,
        token_counter(),
        "https://pa.example",
        auth,
        clock=clock,
        timeout=timeout,
        policy=RetryPolicy(),
    )


def test_slow_down_adds_five_seconds_for_good() -> None:
    clock = FakeClock()
    script = Script(
        [
            oauth("authorization_pending"),
            oauth("slow_down"),
            oauth("authorization_pending"),
            oauth("slow_down"),
            answer(200, TOKEN),
        ]
    )
    token = run_sync(wait(clock, authorization()), script, clock.sleep)
    assert token.scopes == ("orders:read",)
    assert clock.slept == [5, 5, 10, 10, 15]
    form = script.requests[0].body.decode()
    assert "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code" in form
    assert "device_code=dc" in form
    assert "client_id=https%3A%2F%2Fpa.example" in form


def test_network_failures_double_the_interval() -> None:
    clock = FakeClock()
    script = Script([LOST, REFUSED, REFUSED, REFUSED, answer(200, TOKEN)])
    run_sync(wait(clock, authorization()), script, clock.sleep)
    # LOST: the poll is not resent (the code may be consumed), the wait doubles; REFUSED x3:
    # resent twice within the policy (0.5 s, 1 s), then the wait doubles again.
    assert clock.slept == [5, 10, 0.5, 1.0, 20]


def test_polling_stops_when_the_code_expires_or_the_timeout_passes() -> None:
    clock = FakeClock()
    with pytest.raises(DeviceFlowTimeout):
        run_sync(
            wait(clock, authorization(expires_in=12)),
            Script([oauth("authorization_pending")] * 2),
            clock.sleep,
        )
    assert clock.slept == [5, 5]
    clock = FakeClock()
    with pytest.raises(DeviceFlowTimeout):
        run_sync(
            wait(clock, authorization(), timeout=7),
            Script([oauth("authorization_pending")]),
            clock.sleep,
        )
    assert clock.slept == [5]


def test_the_timeout_is_not_reported_as_the_code_expiring() -> None:
    """`wait_for_token(timeout=...)` ending before the code does is the caller's bound: saying
    the code expired would send the person for a new link while theirs still works."""
    clock = FakeClock()
    with pytest.raises(DeviceFlowTimeout) as caught:
        run_sync(
            wait(clock, authorization(), timeout=7),
            Script([oauth("authorization_pending")]),
            clock.sleep,
        )
    assert str(caught.value) == (
        "no decision within the timeout of 7 s (user code BCDF-GHJK; the code is valid for"
        " 595 s more: wait_for_token again to keep waiting)"
    )
    clock = FakeClock()
    with pytest.raises(DeviceFlowTimeout) as expired:
        run_sync(
            wait(clock, authorization(expires_in=12), timeout=60),
            Script([oauth("authorization_pending")] * 2),
            clock.sleep,
        )
    assert str(expired.value) == "no decision before the device code expired (user code BCDF-GHJK)"


@pytest.mark.parametrize("error", ["access_denied", "expired_token", "invalid_grant"])
def test_final_oauth_errors_end_the_wait(error: str) -> None:
    clock = FakeClock()
    with pytest.raises(OAuthErrorResponse) as caught:
        run_sync(wait(clock, authorization()), Script([oauth(error)]), clock.sleep)
    assert (caught.value.error, caught.value.status, caught.value.description) == (
        error,
        400,
        "...",
    )


def test_401_from_the_token_endpoint_is_not_an_oauth_error() -> None:
    from pactmw.client import HTTPError, IdentityRejected

    flow = poll_flow(SCHEME, token_counter(), "https://pa.example", "dc", policy=RetryPolicy())
    with pytest.raises(HTTPError) as caught:
        drive(flow, [oauth("invalid_client", 401)])
    assert not isinstance(caught.value, (OAuthErrorResponse, IdentityRejected))
    flow = poll_flow(SCHEME, token_counter(), "https://pa.example", "dc", policy=RetryPolicy())
    with pytest.raises(IdentityRejected):
        drive(flow, [answer(401, WWW_Authenticate='Bearer realm="a2a"')])


@pytest.mark.parametrize(
    "body",
    [
        {**TOKEN, "token_type": "mac"},
        {**TOKEN, "expires_in": 0},
        {**TOKEN, "expires_in": "3600"},
        {**TOKEN, "expires_in": True},
        {k: v for k, v in TOKEN.items() if k != "scope"},
        {k: v for k, v in TOKEN.items() if k != "access_token"},
    ],
)
def test_token_responses_are_validated(body: dict[str, Any]) -> None:
    from pactmw.client import ResponseInvalid

    flow = poll_flow(SCHEME, token_counter(), "https://pa.example", "dc", policy=RetryPolicy())
    with pytest.raises(ResponseInvalid):
        drive(flow, [answer(200, body)])


def test_the_async_driver_runs_the_same_flow() -> None:
    clock = FakeClock()

    async def asleep(seconds: float) -> None:
        clock.sleep(seconds)

    script = AsyncScript([oauth("slow_down"), answer(200, {**TOKEN, "token_type": "Bearer"})])
    token = asyncio.run(run_async(wait(clock, authorization()), script, asleep))
    assert token.token_type == "Bearer"
    assert clock.slept == [5, 10]
