"""Reading Parafé data from A2A messages (parafe-verifier.md §4a, §11, §13 "Message shape"),
activation, and the reply builders."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pactmw.protocols.parafe import (
    EXTENSION_URI,
    MALFORMED_PARAFE_DATA,
    MISSING_PARAFE_EXTENSION,
    Consent,
    ErrorMember,
    HandshakeChallenge,
    HandshakeComplete,
    ParafeError,
    SessionClosed,
    activation_headers,
    consent_data,
    error_reply_data,
    is_activated,
    parse_parafe_data,
    read_consent,
    read_parafe,
    requested_extensions,
    with_action_receipts,
    with_parafe,
)

RECEIPT = "aaa.bbb.ccc"
CONSENT = {"token": "t.o.k", "session_id": "sess_1"}


def msg(data: Any) -> dict[str, Any]:
    return {"messageId": "m", "metadata": {EXTENSION_URI: data}}


def code_of(message: Any) -> str:
    with pytest.raises(ParafeError) as caught:
        read_consent(message)
    return caught.value.code


# -- §13 "Message shape" -------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {},  # no metadata
        {"metadata": {}},
        {"metadata": {EXTENSION_URI: None}},
        {"metadata": "not an object"},
        {"metadata": ["a", "list"]},
        "not a message",
        None,
        msg({"future_member": {"x": 1}}),  # only unknown members
        msg({"action_receipts": [RECEIPT]}),  # receipts only
        msg({"action_receipts": [RECEIPT], "future": 1}),
        msg(  # a handshake_challenge instead of consent
            {
                "handshake_challenge": {
                    "handshake_id": "hs_1",
                    "challenge": "9f" * 32,
                    "initiator_agent_id": "prf_agent_a",
                    "broker_url": "https://api.parafe.ai",
                    "requested_scope": "s",
                }
            }
        ),
        msg({"error": {"code": "SCOPE_VIOLATION", "message": "no"}}),
        msg({"session_closed": {"session_id": "s", "receipt": RECEIPT}}),
        msg({"handshake_complete": {"handshake_id": "h", "status": "rejected"}}),
        {
            "metadata": {
                "https://github.com/getparafe/parafe-a2a-extension/v1": {"consent": CONSENT}
            }
        },
    ],
)
def test_missing(message: Any) -> None:
    assert code_of(message) == MISSING_PARAFE_EXTENSION


@pytest.mark.parametrize(
    "data",
    [
        {},  # zero keys at all
        {"consent": CONSENT, "error": {"code": "x", "message": "y"}},  # two members
        {"consent": {"token": 5, "session_id": "s"}},
        {"consent": {"token": "t", "session_id": None}},
        {"consent": {"token": "t"}},
        {"consent": {"token": "t", "session_id": "s", "proof": 7}},
        {"consent": {"token": "t", "session_id": "s", "proof": None}},  # present means present
        {"consent": None},
        {"consent": ["t", "s"]},
        {"consent": "t"},
        {"consent": CONSENT, "action_receipts": [RECEIPT] * 51},  # 51 receipts
        {"consent": CONSENT, "action_receipts": []},  # 0 receipts
        {"consent": CONSENT, "action_receipts": ["nope"]},
        {"consent": CONSENT, "action_receipts": [RECEIPT, 5]},
        {"consent": CONSENT, "action_receipts": RECEIPT},
        {"consent": CONSENT, "action_receipts": None},
        {"action_receipts": ["a.b"]},
        ["an", "array"],  # metadata value an array
        "a string",
        5,
        True,
        {"handshake_challenge": {"handshake_id": "h", "challenge": "zz"}},
        {
            "handshake_challenge": {
                "handshake_id": "h",
                "challenge": "9f" * 31,  # 62 hex characters
                "initiator_agent_id": "a",
                "broker_url": "b",
                "requested_scope": "s",
            }
        },
        {"handshake_complete": {"handshake_id": "h", "status": "done"}},
        {"handshake_complete": {"handshake_id": "h", "status": "authenticated"}},
        {"session_closed": {"session_id": "s", "receipt": "nope"}},
        {"error": {"code": "X"}},
    ],
)
def test_malformed(data: Any) -> None:
    assert code_of(msg(data)) == MALFORMED_PARAFE_DATA


def test_receipts_are_checked_before_the_member() -> None:
    # Even beside a valid consent, a bad list spoils the whole message.
    assert code_of(msg({"consent": CONSENT, "action_receipts": ["x"]})) == MALFORMED_PARAFE_DATA


def test_consent_is_read_and_unknown_keys_ignored() -> None:
    data = {"consent": {**CONSENT, "proof": "p.r.f", "extra": 1}, "future": {"a": 1}}
    consent = read_consent(msg(data))
    assert consent == Consent(token="t.o.k", session_id="sess_1", proof="p.r.f")
    assert read_consent(msg({"consent": CONSENT})).proof is None


def test_fifty_receipts_fit() -> None:
    parsed = read_parafe(msg({"consent": CONSENT, "action_receipts": [RECEIPT] * 50}))
    assert parsed is not None
    assert len(parsed.action_receipts) == 50


def test_every_member_reads() -> None:
    challenge = {
        "handshake_id": "hs_abc123",
        "challenge": "9F4A" * 16,  # case-insensitive hex
        "initiator_agent_id": "prf_agent_sofia01",
        "broker_url": "https://api.parafe.ai",
        "requested_scope": "order-donuts",
        "requested_permissions": ["read_menu", "create_order"],
    }
    parsed = parse_parafe_data({"handshake_challenge": challenge})
    assert parsed is not None
    assert isinstance(parsed.member, HandshakeChallenge)
    assert parsed.member.requested_permissions == ("read_menu", "create_order")
    complete = parse_parafe_data(
        {
            "handshake_complete": {
                "handshake_id": "hs_abc123",
                "status": "authenticated",
                "session_id": "sess_7d2",
                "consent_token": "a.b.c",
            }
        }
    )
    assert complete is not None
    assert complete.member == HandshakeComplete("hs_abc123", "authenticated", "a.b.c", "sess_7d2")
    closed = parse_parafe_data({"session_closed": {"session_id": "s", "receipt": RECEIPT}})
    assert closed is not None
    assert closed.member == SessionClosed("s", RECEIPT)
    error = parse_parafe_data(
        {"error": {"code": "SCOPE_VIOLATION", "message": "m"}, "action_receipts": [RECEIPT]}
    )
    assert error is not None
    assert error.member == ErrorMember("SCOPE_VIOLATION", "m")
    assert error.action_receipts == (RECEIPT,)
    assert parse_parafe_data({"action_receipts": [RECEIPT]}) is not None
    assert parse_parafe_data({"later": 1}) is None
    assert parse_parafe_data(None) is None


# -- property: any JSON value -> a result or a documented error ------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
member_names = st.sampled_from(
    [
        "consent",
        "handshake_challenge",
        "handshake_complete",
        "session_closed",
        "error",
        "action_receipts",
        "other",
    ]
)
inner_names = st.sampled_from(
    [
        "token",
        "session_id",
        "proof",
        "handshake_id",
        "challenge",
        "status",
        "consent_token",
        "receipt",
        "code",
        "message",
        "initiator_agent_id",
        "broker_url",
        "requested_scope",
        "requested_permissions",
    ]
)
jws_like = st.sampled_from(["a.b.c", "x.y", "", "9f" * 32, "authenticated", "rejected"])
inner_values = jws_like | json_values | st.lists(jws_like, max_size=3)
member_values = st.dictionaries(inner_names, inner_values, max_size=6) | json_values
shaped = st.dictionaries(
    member_names, member_values | st.lists(jws_like, min_size=0, max_size=52), max_size=3
)


def _code(call: Any) -> str:
    try:
        call()
    except ParafeError as exc:
        return exc.code
    return "ok"


def _total(value: Any) -> None:
    assert _code(lambda: parse_parafe_data(value)) in ("ok", MALFORMED_PARAFE_DATA)
    for message in (value, {"metadata": value}, msg(value)):
        outcome = _code(lambda m=message: read_consent(m))
        assert outcome in ("ok", MISSING_PARAFE_EXTENSION, MALFORMED_PARAFE_DATA)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_any_json_value_reads_or_fails_with_a_documented_code(value: Any) -> None:
    _total(value)


@settings(max_examples=600, deadline=None)
@given(shaped)
def test_parafe_shaped_values_read_or_fail_with_a_documented_code(value: Any) -> None:
    _total(value)


# -- activation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "active"),
    [
        ({"A2A-Extensions": EXTENSION_URI}, True),
        ({"a2a-extensions": f"https://other.example/ext, {EXTENSION_URI} "}, True),
        ({"X-A2A-Extensions": EXTENSION_URI}, True),  # A2A 0.3
        ([("x-a2a-extensions", "a"), ("A2A-EXTENSIONS", EXTENSION_URI)], True),
        ({"A2A-Extensions": ["https://a", EXTENSION_URI]}, True),
        ({"A2A-Extensions": EXTENSION_URI + "/"}, False),  # exact match only
        ({"A2A-Extensions": "https://github.com/getparafe/parafe-a2a-extension/v1"}, False),
        ({"Extensions": EXTENSION_URI}, False),
        ({}, False),
    ],
)
def test_activation_headers(headers: Any, active: bool) -> None:
    assert is_activated(headers) is active


def test_activation_by_message_extensions() -> None:
    assert is_activated((), {"extensions": [EXTENSION_URI]})
    assert not is_activated((), {"extensions": EXTENSION_URI})  # not a list
    assert not is_activated((), {"extensions": ["https://other"]})
    assert requested_extensions({"A2A-Extensions": " a , ,b"}) == ("a", "b")


def test_activation_headers_for_clients() -> None:
    assert activation_headers() == {"A2A-Version": "1.0", "A2A-Extensions": EXTENSION_URI}
    assert activation_headers("0.3", ["https://x", EXTENSION_URI]) == {
        "X-A2A-Extensions": f"{EXTENSION_URI},https://x"
    }


# -- writing ---------------------------------------------------------------------------------


def test_with_parafe_keeps_metadata_and_receipts() -> None:
    base = {"messageId": "m", "metadata": {"other": 1}, "extensions": ["https://x"]}
    first = with_action_receipts(with_parafe(base, consent_data("t", "s")), [RECEIPT, RECEIPT])
    assert first["extensions"] == ["https://x", EXTENSION_URI]
    assert first["metadata"]["other"] == 1
    assert first["metadata"][EXTENSION_URI] == {
        "consent": {"token": "t", "session_id": "s"},
        "action_receipts": [RECEIPT],
    }
    second = with_parafe(first, {"error": {"code": "c", "message": "m"}})
    assert second["metadata"][EXTENSION_URI]["action_receipts"] == [RECEIPT]
    assert base == {"messageId": "m", "metadata": {"other": 1}, "extensions": ["https://x"]}
    assert read_parafe(second) is not None


def test_at_most_fifty_receipts_are_written() -> None:
    receipts = [f"a.b.{i}" for i in range(51)]
    with pytest.raises(ValueError, match="50"):
        with_action_receipts({}, receipts)
    with pytest.raises(ValueError, match="50"):
        error_reply_data(ParafeError("SCOPE_VIOLATION", "no"), receipts)
    assert with_action_receipts({}, []) == {}


def test_error_reply_data() -> None:
    data = error_reply_data(ParafeError("SCOPE_VIOLATION", "no"), [RECEIPT])
    assert data == {
        "error": {"code": "SCOPE_VIOLATION", "message": "no"},
        "action_receipts": [RECEIPT],
    }
    # Anything else is reported without its text, as the reference does.
    assert error_reply_data(RuntimeError("db password leaked")) == {
        "error": {
            "code": "INVALID_CONSENT_TOKEN",
            "message": "Parafe consent could not be verified.",
        }
    }
    assert parse_parafe_data(data) is not None


def test_task_states() -> None:
    for code in ("MISSING_PARAFE_EXTENSION", "EXPIRED_CONSENT_TOKEN", "SCOPE_VIOLATION"):
        assert ParafeError(code, "m").task_state == "TASK_STATE_AUTH_REQUIRED"
    for code in (
        "INVALID_CONSENT_TOKEN",
        "WRONG_AUDIENCE",
        "INVALID_PROOF",
        "MALFORMED_PARAFE_DATA",
    ):
        assert ParafeError(code, "m").task_state == "TASK_STATE_REJECTED"
