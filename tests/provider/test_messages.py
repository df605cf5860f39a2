"""`message:send` validation (pact-provider.md §2.4), `pageSize` (§2.6) and `is_uuid`."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from pactmw.core.errors import A2AError
from pactmw.provider.messages import SendMessage, is_uuid, parse_page_size, parse_send_message

INVALID_JSON = "Invalid JSON request body"
INVALID_BODY = "Invalid request body"
TASK_NOT_FOUND = "Task not found"
WRONG_ROLE = "Message role must be ROLE_USER"
NOT_TEXT = "Content type not supported"
BLANK = "Message text must not be blank"

TEXT = {"text": "hello"}
RAW = {"raw": "aGVsbG8="}


def body(message: Any = None, **top: Any) -> bytes:
    """A request body; `message` defaults to a valid text message."""
    if message is None:
        message = msg()
    return json.dumps({"message": message, **top}).encode()


def msg(*parts: Any, role: str = "ROLE_USER", **fields: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": "m-1",
        "role": role,
        "parts": list(parts) if parts else [dict(TEXT)],
    }
    message.update(fields)
    return message


def refused(data: bytes) -> tuple[str, str]:
    with pytest.raises(A2AError) as caught:
        parse_send_message(data)
    return caught.value.reason, caught.value.message


# -- step 1: JSON ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"{",
        b"",
        b"   ",
        b"not json",
        b"{'message': {}}",
        b'{"message": NaN}',
        b'{"message": Infinity}',
        b"\xff\xfe{}",
        b'{"message": {"messageId": "m-1"}} trailing',
        # Duplicate keys, at the top and nested.
        b'{"message": {}, "message": {}}',
        b'{"message": {"messageId": "a", "messageId": "b", "role": "ROLE_USER",'
        b' "parts": [{"text": "x"}]}}',
        b'{"message": {"messageId": "a", "role": "ROLE_USER",'
        b' "parts": [{"text": "x", "text": "y"}]}}',
        # The same name spelled with an escape, deep in a data part.
        b'{"message": {"messageId": "a", "role": "ROLE_USER", "parts": [{"text": "x"},'
        b' {"data": {"items": [{"sku": 1, "\\u0073ku": 2}]}}]}}',
    ],
)
def test_step1_invalid_json(data: bytes) -> None:
    assert refused(data) == ("INVALID_PARAMS", INVALID_JSON)


def test_step1_json_errors_win_over_everything_else() -> None:
    # A broken body that would also fail every later step is still only "Invalid JSON".
    data = b'{"message": {"taskId": "t", "role": "ROLE_AGENT", "parts": [{"raw": "x"}]'
    assert refused(data) == ("INVALID_PARAMS", INVALID_JSON)


# -- step 2: schema -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"[]",
        b'"text"',
        b"null",
        b"42",
        b"{}",
        body(message="hello"),
        body(message=[]),
        b'{"message": null}',
        body({k: v for k, v in msg().items() if k != "messageId"}),
        body(msg(messageId="")),
        body(msg(messageId=7)),
        body(msg(messageId=None)),
        body(msg(contextId=5)),
        body(msg(contextId=None)),
        body(msg(taskId=5)),
        body({k: v for k, v in msg().items() if k != "role"}),
        body(msg(role="user")),
        body(msg(role="ROLE_SYSTEM")),
        body(msg(role="")),
        body({k: v for k, v in msg().items() if k != "parts"}),
        body(msg(parts=[])),
        body(msg(parts={"text": "x"})),
        body(msg(parts="hello")),
        body(msg(metadata="x")),
        body(msg(metadata=[])),
        body(msg(extensions="x")),
        body(msg(extensions=[1])),
        body(msg(referenceTaskIds="t")),
        body(msg(referenceTaskIds=[None])),
    ],
)
def test_step2_invalid_message(data: bytes) -> None:
    assert refused(data) == ("INVALID_PARAMS", INVALID_BODY)


@pytest.mark.parametrize(
    "part",
    [
        "hello",
        None,
        ["text"],
        {},
        {"mediaType": "text/plain"},
        {"text": 5},
        {"text": None},
        {"text": ["a"]},
        {"raw": 5},
        {"url": {"href": "x"}},
        {"data": "x"},
        {"data": 5},
        {"data": None},
        # Exactly one content key.
        {"text": "a", "raw": "aGVsbG8="},
        {"text": "a", "data": {}},
        {"url": "https://x.example", "raw": "aGVsbG8="},
        # Extra keys make the part invalid.
        {"text": "a", "kind": "text"},
        {"text": "a", "mimeType": "text/plain"},
        {"raw": "aGVsbG8=", "extra": 1},
        # The optional keys have types.
        {"text": "a", "mediaType": 5},
        {"text": "a", "mediaType": None},
        {"text": "a", "filename": 5},
        {"text": "a", "metadata": "x"},
        {"text": "a", "metadata": None},
    ],
)
def test_step2_invalid_part(part: Any) -> None:
    assert refused(body(msg(part))) == ("INVALID_PARAMS", INVALID_BODY)
    # One bad part among good ones is enough.
    assert refused(body(msg(dict(TEXT), part))) == ("INVALID_PARAMS", INVALID_BODY)


@pytest.mark.parametrize(
    "part",
    [
        {"text": "hello"},
        {"text": "hello", "mediaType": "text/plain"},
        {"text": "hello", "metadata": {"k": "v"}},
        {"text": "hello", "filename": "a.txt"},
        {"text": "hello", "metadata": {}, "filename": "a.txt", "mediaType": "text/markdown"},
    ],
)
def test_valid_text_parts(part: dict[str, Any]) -> None:
    parsed = parse_send_message(body(msg(part)))
    assert parsed.text == "hello"
    assert parsed.parts == (part,)


def test_schema_failure_wins_over_task_id() -> None:
    # Step 2 before step 3: an invalid part shape is INVALID_PARAMS even with a taskId.
    data = body(msg({"text": "x", "extra": 1}, taskId="t-1"))
    assert refused(data) == ("INVALID_PARAMS", INVALID_BODY)
    data = body(msg(dict(TEXT), taskId="t-1", role="nobody"))
    assert refused(data) == ("INVALID_PARAMS", INVALID_BODY)


# -- step 3: taskId -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        msg(taskId="t-1"),
        msg(taskId=""),
        # taskId wins over every later step.
        msg(RAW, taskId="t-1"),
        msg({"url": "https://x.example/a.png"}, taskId="t-1"),
        msg(dict(TEXT), role="ROLE_AGENT", taskId="t-1"),
        msg(RAW, role="ROLE_AGENT", taskId="t-1"),
        msg({"text": "   "}, taskId="t-1"),
        msg(dict(TEXT), taskId="t-1", contextId="not-a-uuid"),
    ],
)
def test_step3_task_id(message: dict[str, Any]) -> None:
    assert refused(body(message)) == ("TASK_NOT_FOUND", TASK_NOT_FOUND)


# -- step 4: role ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["ROLE_AGENT", "ROLE_UNSPECIFIED"])
def test_step4_role(role: str) -> None:
    assert refused(body(msg(role=role))) == ("INVALID_PARAMS", WRONG_ROLE)
    # Role before content type and blank text.
    assert refused(body(msg(RAW, role=role))) == ("INVALID_PARAMS", WRONG_ROLE)
    assert refused(body(msg({"data": {"a": 1}}, role=role))) == ("INVALID_PARAMS", WRONG_ROLE)
    assert refused(body(msg({"text": " "}, role=role))) == ("INVALID_PARAMS", WRONG_ROLE)


# -- step 5: content type -------------------------------------------------------------------


@pytest.mark.parametrize(
    "part",
    [
        RAW,  # the suite's non-text case: a valid raw part
        {"raw": "aGVsbG8=", "mediaType": "text/plain", "filename": "hello.txt"},
        {"url": "https://x.example/a.png"},
        {"url": "https://x.example/a.png", "mediaType": "image/png", "metadata": {}},
        {"data": {"a": 1}},
        {"data": {}},
        {"data": [1, 2]},
    ],
)
def test_step5_non_text_part(part: dict[str, Any]) -> None:
    expected = ("CONTENT_TYPE_NOT_SUPPORTED", NOT_TEXT)
    assert refused(body(msg(part))) == expected
    # Mixed with text parts, and before the blank-text check.
    assert refused(body(msg(dict(TEXT), part))) == expected
    assert refused(body(msg({"text": ""}, part))) == expected


# -- step 6: blank text ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "parts",
    [
        [{"text": ""}],
        [{"text": "   "}],
        [{"text": "\n\t "}],
        [{"text": ""}, {"text": " "}],
        [{"text": "\u3000"}],
    ],
)
def test_step6_blank_text(parts: list[dict[str, Any]]) -> None:
    assert refused(body(msg(*parts))) == ("INVALID_PARAMS", BLANK)


def test_text_parts_are_joined_by_newlines() -> None:
    parsed = parse_send_message(body(msg({"text": "  "}, {"text": "b"}, {"text": "c"})))
    assert parsed.text == "  \nb\nc"


# -- accepted bodies ------------------------------------------------------------------------


def test_reference_client_body_is_accepted() -> None:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": "Is my order late?", "mediaType": "text/plain"}],
    }
    parsed = parse_send_message(json.dumps({"message": message}).encode())
    assert parsed == SendMessage(
        message_id=message["messageId"],
        context_id=None,
        text="Is my order late?",
        parts=(message["parts"][0],),
        message=message,
    )


def test_extra_top_level_keys_and_known_optional_fields_are_ignored() -> None:
    data = body(
        msg(
            contextId="c-1",
            metadata={"x": 1},
            extensions=["https://ext.example"],
            referenceTaskIds=["t-0"],
            kind="message",  # unknown message keys are stripped, as zod does
        ),
        configuration={"blocking": True, "acceptedOutputModes": ["text/plain"]},
        metadata={"trace": "abc"},
        tenant="whatever",
        extra=[1, 2, 3],
    )
    parsed = parse_send_message(data)
    assert parsed.message_id == "m-1"
    assert parsed.context_id == "c-1"
    assert parsed.text == "hello"


def test_context_id_is_passed_through_unchecked() -> None:
    # Whether a contextId is known (or a UUID) is decided later, in the flow.
    assert parse_send_message(body(msg(contextId=""))).context_id == ""
    assert parse_send_message(body(msg(contextId="nope"))).context_id == "nope"


def test_utf8_text() -> None:
    parsed = parse_send_message(body(msg({"text": "café ☕ 注文"})))
    assert parsed.text == "café ☕ 注文"


# -- pageSize -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "size"),
    [
        ("", 50),
        ("contextId=abc&status=TASK_STATE_WORKING", 50),
        ("pagesize=7", 50),
        ("pageSize=1", 1),
        ("pageSize=100", 100),
        ("pageSize=50", 50),
        ("pageSize=007", 7),
        ("contextId=x&pageSize=20&pageToken=", 20),
    ],
)
def test_page_size_valid(query: str, size: int) -> None:
    assert parse_page_size(query) == size


@pytest.mark.parametrize(
    "query",
    [
        "pageSize=0",
        "pageSize=101",
        "pageSize=1.5",
        "pageSize=NaN",
        "pageSize=-1",
        "pageSize=",
        "pageSize",
        "pageSize=5&pageSize=5",
        "pageSize=5&pageSize=6",
        "pageSize=+5",
        "pageSize=%205",
        "pageSize=1e2",
        "pageSize=0x10",
        "pageSize=00",
        "pageSize=99999999999999999999999",
        "pageSize=\u0663",  # ARABIC-INDIC DIGIT THREE: isdigit(), but not ASCII
        "pageSize=\u00b2",  # SUPERSCRIPT TWO
    ],
)
def test_page_size_invalid(query: str) -> None:
    with pytest.raises(A2AError) as caught:
        parse_page_size(query)
    assert (caught.value.reason, caught.value.message) == ("INVALID_PARAMS", "Invalid pageSize")


# -- is_uuid --------------------------------------------------------------------------------


def test_is_uuid() -> None:
    minted = str(uuid.uuid4())
    assert is_uuid(minted)
    assert is_uuid(str(uuid.uuid1()))
    assert is_uuid("00000000-0000-0000-0000-000000000000")
    assert not is_uuid(minted.upper())
    assert not is_uuid(minted.replace("-", ""))
    assert not is_uuid("{" + minted + "}")
    assert not is_uuid("urn:uuid:" + minted)
    assert not is_uuid(" " + minted)
    assert not is_uuid(minted + "\n")
    assert not is_uuid(minted[:-1])
    assert not is_uuid("")
    assert not is_uuid("not-a-uuid")
    assert not is_uuid("c-1")


def test_page_size_is_percent_decoded_like_url_search_params() -> None:
    assert parse_page_size("pageSize=%35") == 5
    assert parse_page_size("other=1&pageSize=100") == 100
