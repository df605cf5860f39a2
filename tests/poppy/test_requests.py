"""What a personal agent sends, read tolerantly but strictly where it matters: duplicate JSON
members and form parameters, tokens in URLs, repeated or Bearer credentials, messages."""

from __future__ import annotations

from typing import Any

import pytest

from pactmw.core.encoding import json_dumps
from pactmw.core.http import Request
from pactmw.protocols.poppy import (
    DEVICE_CODE_GRANT,
    JWT_BEARER_GRANT,
    REFRESH_TOKEN_GRANT,
    PoppyError,
    parse_confirmation,
    parse_conversation_start,
    parse_feedback,
    parse_form,
    parse_json_object,
    parse_message,
    parse_message_post,
    parse_scope,
    parse_token_request,
    session_credentials,
)
from tests.poppy.conftest import conformance_cases, sdk_fixture

TOKEN = "sat_Zm9vYmFy-_baz"


def refused(status: int, error: str, call: Any, *args: Any) -> PoppyError:
    with pytest.raises(PoppyError) as caught:
        call(*args)
    assert (caught.value.status, caught.value.error) == (status, error)
    return caught.value


# -- JSON and forms -----------------------------------------------------------------------


def test_security_duplicate_json_members() -> None:
    case = conformance_cases("security", id="security.duplicate-json-members")[0]
    assert len(case["input"]) == 4
    for document in case["input"]:
        err = refused(400, "invalid_request", parse_json_object, document.encode())
        assert "duplicate" in err.detail


@pytest.mark.parametrize("body", [b"[]", b"1", b'"x"', b"\xff", b"{", b'{"a": NaN}', b""])
def test_bodies_must_be_strict_json_objects(body: bytes) -> None:
    refused(400, "invalid_request", parse_json_object, body)


def test_forms_refuse_repeated_parameters() -> None:
    assert parse_form(b"a=1&b=&c=%20x") == {"a": "1", "b": "", "c": " x"}
    assert parse_form(b"") == {}
    refused(400, "invalid_request", parse_form, b"grant_type=a&grant_type=b")
    refused(400, "invalid_request", parse_form, b"a=%00")
    refused(400, "invalid_request", parse_form, b"a=%ff")
    refused(400, "invalid_request", parse_form, b"&".join([b"a%d=1" % i for i in range(101)]))


# -- credentials (PAP-4.3-11/12/17) -------------------------------------------------------


def request(*headers: tuple[str, str], query: str = "") -> Request:
    return Request(method="GET", path="/api/orders", query=query, headers=headers)


def test_a_dpop_session_token_and_its_proofs() -> None:
    found = session_credentials(request(("authorization", f"DPoP {TOKEN}"), ("dpop", "p.r.f")))
    assert found.token == TOKEN
    assert found.proofs == ("p.r.f",)
    assert session_credentials(request(("authorization", f"dpop {TOKEN}"))).proofs == ()
    twice = request(("authorization", f"DPoP {TOKEN}"), ("dpop", "a.b.c"), ("dpop", "d.e.f"))
    assert session_credentials(twice).proofs == ("a.b.c", "d.e.f")  # core.dpop refuses both


def test_security_authorization_header_without_cookies() -> None:
    # A request with Authorization and DPoP only, no cookie, is all it takes.
    headers = (("authorization", f"DPoP {TOKEN}"), ("dpop", "a.b.c"))
    assert session_credentials(request(*headers)).token == TOKEN


def test_security_dpop_token_as_bearer() -> None:
    refused(
        401, "invalid_token", session_credentials, request(("authorization", f"Bearer {TOKEN}"))
    )


@pytest.mark.parametrize("value", ["DPoP", "DPoP ", "DPoP a b", "Basic dXNlcg==", TOKEN, "DPoP ä"])
def test_malformed_authorization_is_invalid_token(value: str) -> None:
    refused(401, "invalid_token", session_credentials, request(("authorization", value)))


def test_no_session_token_is_401() -> None:
    refused(401, "invalid_token", session_credentials, request(("cookie", f"session={TOKEN}")))


def test_a_repeated_authorization_header_is_400() -> None:
    twice = request(("authorization", f"DPoP {TOKEN}"), ("authorization", f"DPoP {TOKEN}"))
    refused(400, "invalid_request", session_credentials, twice)


@pytest.mark.parametrize("value", [f"DPoP {TOKEN}, DPoP {TOKEN}", f"Bearer x, DPoP {TOKEN}"])
def test_a_repeated_authorization_header_joined_by_a_wsgi_server_is_400(value: str) -> None:
    # Found by tests/advisories/test_generated_requests.py: a WSGI server joins repeated
    # header lines with ", " (PEP 3333), so the same request was 400 invalid_request on the
    # ASGI adapters and 401 invalid_token on the WSGI ones.
    refused(400, "invalid_request", session_credentials, request(("authorization", value)))


@pytest.mark.parametrize(
    "query", [f"access_token={TOKEN}", f"x=1&access_token={TOKEN}", "access_token="]
)
def test_security_token_in_url_refused(query: str) -> None:
    # Refused even beside an Authorization header that would be accepted (PAP-4.3-17).
    with_header = request(("authorization", f"DPoP {TOKEN}"), query=query)
    err = refused(400, "invalid_request", session_credentials, with_header)
    assert TOKEN not in str(err)
    refused(400, "invalid_request", session_credentials, request(query=query))


# -- the token endpoint -------------------------------------------------------------------


def test_token_requests_by_grant() -> None:
    start = parse_token_request({"grant_type": JWT_BEARER_GRANT, "assertion": "a.b.c"})
    assert (start.assertion, start.session_id) == ("a.b.c", None)
    renew = parse_token_request(
        {"grant_type": JWT_BEARER_GRANT, "assertion": "a.b.c", "session_id": "ses_1"}
    )
    assert renew.session_id == "ses_1"
    poll = parse_token_request(
        {"grant_type": DEVICE_CODE_GRANT, "device_code": "dc", "session_id": "ses_1"}
    )
    assert poll.device_code == "dc"
    refresh = parse_token_request(
        {
            "grant_type": REFRESH_TOKEN_GRANT,
            "refresh_token": "rt",
            "session_id": "s",
            "scope": "a b",
        }
    )
    assert parse_scope(refresh.scope) == ("a", "b")
    assert "rt" not in repr(refresh)  # secrets stay out of reprs and logs


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({}, "invalid_request"),
        ({"grant_type": "password"}, "unsupported_grant_type"),
        ({"grant_type": JWT_BEARER_GRANT}, "invalid_request"),
        ({"grant_type": DEVICE_CODE_GRANT, "device_code": "dc"}, "invalid_request"),
        ({"grant_type": REFRESH_TOKEN_GRANT, "refresh_token": "rt"}, "invalid_request"),
        (
            {"grant_type": JWT_BEARER_GRANT, "assertion": "x", "session_id": "a b"},
            "invalid_session",
        ),
    ],
)
def test_token_request_refusals(form: dict[str, str], error: str) -> None:
    refused(400, error, parse_token_request, form)


def test_scopes_are_distinct_tokens_in_order() -> None:
    assert parse_scope("b a  b ") == ("b", "a")
    assert parse_scope(None) == parse_scope("") == ()


# -- conversations (§7.4), operations, feedback (§8) --------------------------------------


def test_pap_7_4_01_a_message_needs_text_data_or_context() -> None:
    for content in ({"text": "hi"}, {"data": {"a": 1}}, {"context": {"locale": "en-US"}}):
        message = parse_message({"id": "msg_1", "sender": "agent", **content})
        assert message.content() == {"id": "msg_1", "sender": "agent", **content}
    refused(400, "invalid_request", parse_message, {"id": "msg_1", "sender": "agent"})


def test_pap_3_3_03_unknown_members_and_the_agents_role_are_ignored() -> None:
    message = parse_message(
        {"id": "msg_1", "sender": "human", "text": "hi", "role": "company", "mood": "calm"}
    )
    assert message.content() == {"id": "msg_1", "sender": "human", "text": "hi"}


def test_context_facts_are_kept_as_sent() -> None:
    case = conformance_cases("protocol", id="protocol.message-context-fields")[0]
    # The company is tolerant: even facts a personal agent should not send are kept as data
    # (PAP-7.4-03 is the agent's duty), and never break the message.
    for context in case["input"]["valid"] + case["input"]["invalid"]:
        assert parse_message({"id": "m", "sender": "agent", "context": context}).context == context


@pytest.mark.parametrize(
    "message",
    [
        None,
        [],
        {"sender": "agent", "text": "x"},
        {"id": "bad id", "sender": "agent", "text": "x"},
        {"id": "m" * 257, "sender": "agent", "text": "x"},
        {"id": "m", "sender": "company", "text": "x"},
        {"id": "m", "sender": "agent", "text": 5},
        {"id": "m", "sender": "agent", "text": "\x00"},
        {"id": "m", "sender": "agent", "data": "x"},
        {"id": "m", "sender": "agent", "context": ["x"]},
    ],
)
def test_malformed_messages(message: Any) -> None:
    refused(400, "invalid_request", parse_message, message)


def test_conversation_bodies() -> None:
    first = {"message": {"id": "msg_1", "sender": "agent", "text": "Where is my order?"}}
    message, parent = parse_conversation_start(json_dumps(first))
    assert (message.text, parent) == ("Where is my order?", None)
    child = {**first, "parent_conversation_id": "cnv_8f3Kd2"}
    assert parse_conversation_start(json_dumps(child))[1] == "cnv_8f3Kd2"
    assert parse_message_post(json_dumps(first)).id == "msg_1"
    refused(
        400,
        "invalid_request",
        parse_conversation_start,
        json_dumps({**first, "parent_conversation_id": 3}),
    )
    refused(400, "invalid_request", parse_message_post, b"{}")


def test_messages_from_the_sdk_fixture_parse() -> None:
    # The fixture's messages are company ones; read as if sent by an agent, their extra
    # members (role, operation) are ignored, and their content is kept.
    page = sdk_fixture("conversation-events-valid.json")
    sent = page["events"][0]["message"]
    message = parse_message(sent)
    assert message.text == sent["text"]
    assert message.data == sent["data"]


def test_confirmations() -> None:
    confirmation = parse_confirmation(b'{"revision": 2, "approved_by": "standing_permission"}')
    assert (confirmation.revision, confirmation.approved_by) == (2, "standing_permission")
    for body in (
        b'{"revision": 0, "approved_by": "user"}',
        b'{"revision": true, "approved_by": "user"}',
        b'{"revision": "1", "approved_by": "user"}',
        b'{"revision": 1, "approved_by": "agent"}',
        b'{"revision": 1, "revision": 2, "approved_by": "user"}',
    ):
        refused(400, "invalid_request", parse_confirmation, body)


def test_protocol_feedback_report() -> None:
    report = parse_feedback(b'{"kind":"praise","task":"Pay with a gift card","description":"x"}')
    assert report.kind == "praise"  # PAP-8-06: a kind the company doesn't know is accepted
    assert parse_feedback(b'{"task":"t","description":"d"}').kind == "missing"
    long_task = json_dumps({"kind": "missing", "task": "t" * 201, "description": "d"})
    refused(400, "invalid_request", parse_feedback, long_task)
    long_description = json_dumps({"kind": "missing", "task": "t", "description": "d" * 2001})
    refused(400, "invalid_request", parse_feedback, long_description)
    refused(400, "invalid_request", parse_feedback, b'{"kind":"missing","description":"d"}')
