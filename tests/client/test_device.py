"""The Delegated profile from the personal agent's side, against pactmw's Provider.

The person approves on the Provider's consent page, driven with `urllib` and a `sid` cookie;
the client runs with fake time (no real 5 s waits), so `slow_down` handling is exact.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from pactmw.client import (
    A2AClient,
    AgentCredentials,
    AsyncA2AClient,
    AsyncDeviceCodeClient,
    ClientError,
    DelegationScheme,
    DelegationTokenRejected,
    DeviceCodeClient,
    HTTPError,
    MessageReply,
    NetworkError,
    OAuthErrorResponse,
    PollStatus,
    Receipt,
    ReceiptInvalid,
    ResponseInvalid,
    ScopesNotOffered,
    StepUp,
    SyncTransport,
    TokenResponse,
    averify_receipt,
    delegation_scheme,
    fetch_authorization_server_metadata,
    fetch_card,
    fetch_receipt_keys,
    verify_receipt,
)
from pactmw.client.device import MAX_USER_CODE_CHARS, MAX_VERIFICATION_URI_CHARS
from pactmw.protocols.delegation import args_hash
from tests.client.support import (
    CANCEL_ARGS,
    DEVICE_AUTHORIZATION,
    FakeTime,
    Person,
    Provided,
    Route,
    StaticServer,
    static_scheme,
)


@pytest.fixture(scope="module")
def scheme(provided: Provided) -> DelegationScheme:
    found = delegation_scheme(fetch_card(provided.card_url("acme")))
    assert found is not None
    return found


def device_client(
    scheme: DelegationScheme, me: AgentCredentials, time: FakeTime
) -> DeviceCodeClient:
    return DeviceCodeClient(scheme, me, sleep=time.sleep, clock=time.clock)


def connect(
    scheme: DelegationScheme, me: AgentCredentials, requested: list[str], **decision: Any
) -> tuple[TokenResponse, FakeTime]:
    """Start, let the person decide during the client's first wait, and wait for the token."""
    time = FakeTime()
    device = device_client(scheme, me, time)
    authorization = device.start(requested)

    def decide_once(seconds: float) -> None:
        if len(time.slept) == 1:
            Person().decide(authorization.verification_uri_complete, **decision)

    time.on_sleep = decide_once
    return device.wait_for_token(authorization), time


def test_full_device_flow_then_a_delegated_send_with_a_verified_receipt(
    provided: Provided, scheme: DelegationScheme, me: AgentCredentials
) -> None:
    time = FakeTime()
    device = device_client(scheme, me, time)
    authorization = device.start(["orders:read", "orders:cancel", "orders:read"])
    assert authorization.scopes == ("orders:read", "orders:cancel")
    assert authorization.interval == 1
    assert authorization.verification_uri_complete.startswith(provided.interface("acme"))
    assert device.poll(authorization) is PollStatus.PENDING

    location = Person().decide(authorization.verification_uri_complete)
    assert "status=approved" in location
    tokens = device.wait_for_token(authorization)
    assert set(tokens.scopes) == {"orders:read", "orders:cancel"}
    assert tokens.token_type == "Bearer"
    assert tokens.refresh_token is not None
    with pytest.raises(OAuthErrorResponse) as spent:  # the device code is single-use
        device.poll(authorization)
    assert spent.value.error == "invalid_grant"

    client = A2AClient(provided.interface("acme"), me)
    reply = client.send("cancel my order", delegation_token=tokens.access_token)
    assert isinstance(reply, MessageReply)
    assert reply.text == "cancelled A-1001 for acct-alice"
    assert reply.receipt is not None
    verified = verify_receipt(
        reply.receipt,
        metadata_url=scheme.metadata_url,
        expected_pa=me.issuer,
        expected_brand=client.url,
    )
    assert (verified.user, verified.pa, verified.brand) == ("acct-alice", me.issuer, client.url)
    assert verified.scopes_used == ("orders:cancel",)
    assert verified.actions[0].tool == "cancel_order"
    assert verified.actions[0].args_hash == args_hash(CANCEL_ARGS)
    assert verified.grant_id.startswith("a2agrant_")
    assert verified.ts.tzinfo is not None

    metadata = fetch_authorization_server_metadata(str(scheme.metadata_url))
    assert metadata.token_endpoint == scheme.token_url
    keys = fetch_receipt_keys(jwks_uri=metadata.jwks_uri)
    assert (
        verify_receipt(reply.receipt, jwks=keys, expected_pa=me.issuer, expected_brand=client.url)
        == verified
    )

    # the same token continues a conversation; every delegated reply has a receipt
    again = client.send(
        "show my orders", context_id=reply.context_id, delegation_token=tokens.access_token
    )
    assert isinstance(again, MessageReply)
    assert again.receipt is not None
    assert again.receipt.claims["scopesUsed"] == ["orders:read"]


def tampered(receipt: Receipt, **changes: Any) -> dict[str, Any]:
    return {"jws": receipt.jws, "claims": {**receipt.claims, **changes}}


def test_tampered_receipts_are_rejected(
    provided: Provided, scheme: DelegationScheme, me: AgentCredentials
) -> None:
    tokens, _ = connect(scheme, me, ["orders:read"])
    client = A2AClient(provided.interface("acme"), me)
    reply = client.send("show my orders", delegation_token=tokens.access_token)
    assert isinstance(reply, MessageReply)
    assert reply.receipt is not None
    keys = fetch_receipt_keys(metadata_url=scheme.metadata_url)
    expected = {"expected_pa": me.issuer, "expected_brand": client.url}

    def reason(receipt: Any, **overrides: Any) -> str:
        with pytest.raises(ReceiptInvalid) as caught:
            verify_receipt(receipt, jwks=keys, **{**expected, **overrides})
        return caught.value.reason

    assert reason(tampered(reply.receipt, scopesUsed=["orders:cancel"])) == "claims_mismatch"
    assert reason(tampered(reply.receipt, note="unsigned")) == "claims_mismatch"
    header, payload, signature = reply.receipt.jws.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["scopesUsed"] = ["orders:cancel"]
    forged_payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    forged = {"jws": f"{header}.{forged_payload}.{signature}", "claims": claims}
    assert reason(forged) == "bad_signature"
    assert reason(reply.receipt, expected_pa="https://other-pa.example") == "wrong_pa"
    assert reason(reply.receipt, expected_brand=provided.interface("plain")) == "wrong_brand"
    assert reason(reply.receipt.__class__(jws=reply.receipt.jws, claims={})) == "claims_mismatch"
    with pytest.raises(ReceiptInvalid) as unknown:
        verify_receipt(
            reply.receipt, jwks={"keys": []}, expected_pa=me.issuer, expected_brand=client.url
        )
    assert unknown.value.reason == "unknown_key"


def test_slow_down_adds_five_seconds_against_the_provider(
    provided: Provided, scheme: DelegationScheme, me: AgentCredentials
) -> None:
    """Fake sleeps take no real time, so the second poll comes too soon: `slow_down`, then
    the interval is 1 + 5 s; the person approves during that wait."""
    time = FakeTime()
    device = device_client(scheme, me, time)
    authorization = device.start(["orders:read"])

    def decide_after_slow_down(seconds: float) -> None:
        if seconds == 6:
            Person().decide(authorization.verification_uri_complete)

    time.on_sleep = decide_after_slow_down
    tokens = device.wait_for_token(authorization)
    assert time.slept == [1, 1, 6]
    assert tokens.scopes == ("orders:read",)


def test_refresh(provided: Provided, scheme: DelegationScheme, me: AgentCredentials) -> None:
    tokens, time = connect(scheme, me, ["orders:read"])
    device = device_client(scheme, me, time)
    assert tokens.refresh_token is not None
    renewed = device.refresh(tokens.refresh_token)
    assert renewed.scopes == tokens.scopes
    assert renewed.refresh_token not in (None, tokens.refresh_token)
    reply = A2AClient(provided.interface("acme"), me).send(
        "show my orders", delegation_token=renewed.access_token
    )
    assert isinstance(reply, MessageReply)
    # A refresh repeated within the Brand's reuse interval (a lost answer) gets the same
    # pair; after it, refresh tokens are single-use (tests/delegated/test_refresh_reuse.py).
    repeated = device.refresh(tokens.refresh_token)
    assert (repeated.access_token, repeated.refresh_token) == (
        renewed.access_token,
        renewed.refresh_token,
    )


def test_denied_and_narrowed(
    provided: Provided, scheme: DelegationScheme, me: AgentCredentials
) -> None:
    with pytest.raises(OAuthErrorResponse) as denied:
        connect(scheme, me, ["orders:read"], allow=False)
    assert denied.value.error == "access_denied"
    tokens, _ = connect(scheme, me, ["orders:read", "orders:cancel"], scopes=["orders:read"])
    assert tokens.scopes == ("orders:read",)  # what the person ticked, not what was asked


def test_scopes_are_checked_against_the_card(
    scheme: DelegationScheme, me: AgentCredentials
) -> None:
    device = device_client(scheme, me, FakeTime())
    with pytest.raises(ValueError, match="not on the card"):
        device.start(["orders:read", "admin"])
    # A step-up's missing scopes are the Provider's text: one its card does not offer (a card
    # the agent fetched before the Brand added the scope) is a ClientError like any other
    # failure of the Brand's answers, still a ValueError, and its text is escaped.
    with pytest.raises(ScopesNotOffered) as not_offered:
        device.start(["orders:read", "admin", "\x1b[2Jwipe"])
    assert isinstance(not_offered.value, ClientError)
    assert not_offered.value.scopes == ("admin", "\x1b[2Jwipe")
    assert str(not_offered.value) == (
        "scopes not on the card: admin, \\x1b[2Jwipe (a card fetched before the Brand added"
        " them? fetch it again)"
    )
    with pytest.raises(ValueError, match="at least one"):
        device.start([])
    wrong_client = DeviceCodeClient(scheme, me, client_id="https://someone-else.example")
    with pytest.raises(HTTPError) as caught:  # 401 invalid_client: transport-level, as reference
        wrong_client.start(["orders:read"])
    assert caught.value.status == 401
    assert not isinstance(caught.value, OAuthErrorResponse)


def test_step_up_then_approval_then_resend(
    provided: Provided, scheme: DelegationScheme, me: AgentCredentials
) -> None:
    client = A2AClient(provided.interface("acme"), me)
    step = client.send("cancel my order")  # no delegation token at all
    assert isinstance(step, StepUp)
    assert step.missing_scopes == ("orders:cancel",)
    assert step.verification_uri_complete.startswith(provided.interface("acme"))
    assert "orders:cancel" in step.text
    assert step.task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"

    read_only, _ = connect(scheme, me, ["orders:read"])
    again = client.send(
        "cancel my order", context_id=step.context_id, delegation_token=read_only.access_token
    )
    assert isinstance(again, StepUp)
    assert again.context_id == step.context_id
    assert again.missing_scopes == ("orders:cancel",)

    # the personal agent runs its own device flow for the missing scopes (PACT §5.5)
    tokens, _ = connect(scheme, me, list(again.missing_scopes))
    done = client.send(
        "cancel my order",
        context_id=again.context_id,
        message_id=again.sent_message_id,
        delegation_token=tokens.access_token,
    )
    assert isinstance(done, MessageReply)
    assert done.context_id == step.context_id
    assert done.text.startswith("cancelled A-1001")


def test_device_flow_async(
    provided: Provided, scheme: DelegationScheme, me: AgentCredentials
) -> None:
    time = FakeTime()

    async def run() -> MessageReply:
        device = AsyncDeviceCodeClient(scheme, me, sleep=time.asleep, clock=time.clock)
        authorization = await device.start(["orders:read"])
        assert await device.poll(authorization.device_code) is PollStatus.PENDING
        assert await device.poll(authorization) is PollStatus.SLOW_DOWN
        await asyncio.to_thread(Person().decide, authorization.verification_uri_complete)
        tokens = await device.wait_for_token(authorization)
        assert tokens.refresh_token is not None
        tokens = await device.refresh(tokens.refresh_token)
        client = AsyncA2AClient(provided.interface("acme"), me)
        step = await client.send("cancel my order", delegation_token=tokens.access_token)
        assert isinstance(step, StepUp)
        reply = await client.send(
            "show my orders", context_id=step.context_id, delegation_token=tokens.access_token
        )
        assert isinstance(reply, MessageReply)
        assert reply.receipt is not None
        verified = await averify_receipt(
            reply.receipt,
            metadata_url=scheme.metadata_url,
            expected_pa=me.issuer,
            expected_brand=client.url,
        )
        assert verified.scopes_used == ("orders:read",)
        with pytest.raises(DelegationTokenRejected):
            await client.send("show my orders", delegation_token=tokens.access_token + "x")
        return reply

    assert asyncio.run(run()).text == "Your orders: A-1001, A-1002"
    assert time.slept == [1]


# -- a misbehaving authorization server (fixed answers on a static server) ----------------------


@pytest.mark.parametrize(
    "numbers",
    [
        {"expires_in": 10**400},  # wait_for_token: OverflowError adding it to the clock
        {"expires_in": 10**13, "interval": 10**12},  # OverflowError from time.sleep
        {"interval": 2**31},
    ],
)
def test_device_code_lifetimes_past_any_real_one_are_refused(
    static: StaticServer, me: AgentCredentials, numbers: dict[str, int]
) -> None:
    """`expires_in` and `interval` are seconds; past 2**31 - 1 (68 years) they are no real
    device code's, and far past it they overflowed the float arithmetic and the sleep of
    `wait_for_token` as a bare OverflowError. Refused at `start`, like any other bad one."""
    static.json("/oauth/device_authorization", {**DEVICE_AUTHORIZATION, **numbers})
    client = DeviceCodeClient(static_scheme(static), me, client_id="https://pa.example")
    with pytest.raises(ResponseInvalid, match="expires_in and interval"):
        client.start(["orders:read"])
    aclient = AsyncDeviceCodeClient(static_scheme(static), me, client_id="https://pa.example")
    with pytest.raises(ResponseInvalid, match="expires_in and interval"):
        asyncio.run(aclient.start(["orders:read"]))


def test_the_largest_device_code_lifetime_is_taken(
    static: StaticServer, me: AgentCredentials
) -> None:
    static.json("/oauth/device_authorization", {**DEVICE_AUTHORIZATION, "expires_in": 2**31 - 1})
    client = DeviceCodeClient(static_scheme(static), me, client_id="https://pa.example")
    assert client.start(["orders:read"]).expires_in == 2**31 - 1


@pytest.mark.parametrize("access_token", ["tok\r\nX-Injected: 1", "tok\x00", "jeton-€"])
def test_an_access_token_no_header_can_carry_is_refused(
    static: StaticServer, me: AgentCredentials, access_token: str
) -> None:
    """RFC 6749 A.12: an access token is visible ASCII (and space). One with CR, LF, NUL or
    non-ASCII text was returned, and every `send` with it then raised a bare ValueError or
    UnicodeEncodeError while writing the delegation header."""
    token = {"access_token": access_token, "token_type": "Bearer", "expires_in": 60}
    static.json("/oauth/token", {**token, "scope": "orders:read", "refresh_token": "rt-2"})
    client = DeviceCodeClient(static_scheme(static), me, client_id="https://pa.example")
    with pytest.raises(ResponseInvalid, match="access_token"):
        client.refresh("rt-1")
    aclient = AsyncDeviceCodeClient(static_scheme(static), me, client_id="https://pa.example")
    with pytest.raises(ResponseInvalid, match="access_token"):
        asyncio.run(aclient.poll("dc-1"))


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"user_code": "A" * 1_000_000}, "user_code"),
        ({"user_code": ""}, "user_code"),
        ({"user_code": "ABCD\nEFGH"}, "user_code"),
        (
            {"verification_uri_complete": "https://shop.example/d?c=" + "A" * 1_000_000},
            "verification_uri",
        ),
        ({"verification_uri": "https://shop.example/" + "d" * 5000}, "verification_uri"),
    ],
)
def test_a_device_authorization_with_absurd_text_is_refused(
    static: StaticServer, me: AgentCredentials, fields: dict[str, str], named: str
) -> None:
    """The user code and the link are shown to a person (`pactmw check --delegated` printed a
    1 MB user_code whole): a code nobody can type or a link no browser takes is refused at
    `start`, in a bounded error."""
    static.json("/oauth/device_authorization", {**DEVICE_AUTHORIZATION, **fields})
    client = DeviceCodeClient(static_scheme(static), me, client_id="https://pa.example")
    with pytest.raises(ResponseInvalid, match=named) as caught:
        client.start(["orders:read"])
    assert len(str(caught.value)) < 300
    aclient = AsyncDeviceCodeClient(static_scheme(static), me, client_id="https://pa.example")
    with pytest.raises(ResponseInvalid, match=named):
        asyncio.run(aclient.start(["orders:read"]))


def test_the_longest_device_authorization_text_is_taken(
    static: StaticServer, me: AgentCredentials
) -> None:
    code = "A" * MAX_USER_CODE_CHARS
    link = "https://shop.example/d?c=" + "x" * (MAX_VERIFICATION_URI_CHARS - 25)
    fields = {"user_code": code, "verification_uri_complete": link}
    static.json("/oauth/device_authorization", {**DEVICE_AUTHORIZATION, **fields})
    client = DeviceCodeClient(static_scheme(static), me, client_id="https://pa.example")
    started = client.start(["orders:read"])
    assert (started.user_code, started.verification_uri_complete) == (code, link)


def test_polling_stops_at_a_token_answer_over_the_body_cap(
    static: StaticServer, me: AgentCredentials
) -> None:
    """A token endpoint answering more than the client reads does so on every poll: polling
    on (downloading it each time) until the code expires helps nobody."""
    static.json("/oauth/device_authorization", DEVICE_AUTHORIZATION)
    static.route("/oauth/token", Route(200, b"x" * 4096))
    time = FakeTime()
    client = DeviceCodeClient(
        static_scheme(static),
        me,
        client_id="https://pa.example",
        transport=SyncTransport(max_body=1024),
        sleep=time.sleep,
        clock=time.clock,
    )
    authorization = client.start(["orders:read"])
    with pytest.raises(NetworkError, match="too large"):
        client.wait_for_token(authorization)
    assert time.slept == [5]
    assert static.hits.count("/oauth/token") == 1


def test_a_token_string_or_no_scheme_is_refused_where_the_client_is_made(
    me: AgentCredentials,
) -> None:
    """The device flow signs a fresh JWT per call, as the A2A clients do: a string is refused at
    once (without quoting it), and so is the `None` that `delegation_scheme(card)` returns for
    a Brand without delegation, instead of an AttributeError from inside the client."""
    some = DelegationScheme(
        name="userDelegation",
        identity_scheme="platformJwt",
        device_authorization_url="http://127.0.0.1:9/oauth/device_authorization",
        token_url="http://127.0.0.1:9/oauth/token",
        refresh_url="http://127.0.0.1:9/oauth/token",
        metadata_url=None,
        scopes=(),
    )
    for make in (DeviceCodeClient, AsyncDeviceCodeClient):
        with pytest.raises(TypeError, match=r"for_user\(") as caught:
            make(some, "eyJhbGciOiJFUzI1NiJ9.e30.sig", client_id="https://pa.example")  # type: ignore[arg-type]
        assert "eyJ" not in str(caught.value)
        with pytest.raises(TypeError, match=r"delegation_scheme\(card\) is None"):
            make(None, me)  # type: ignore[arg-type]
