"""`message:send` request validation, in the reference order (pact-provider.md §2.4).

Pure: bytes in, a `SendMessage` out or an `A2AError` with the reference's exact message.
The steps that need the conversation (contextId ownership, retries) run later, in the flow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from attrs import frozen

from pactmw.core.encoding import is_ascii_digits, is_storable_text, json_loads
from pactmw.core.errors import A2AError, MalformedInput

_ROLES = frozenset({"ROLE_UNSPECIFIED", "ROLE_USER", "ROLE_AGENT"})
_CONTENT_KEYS = frozenset({"text", "raw", "url", "data"})
_PART_EXTRA_KEYS = frozenset({"metadata", "filename", "mediaType"})
#: What `str(uuid.UUID(...))` writes; a regex match costs a fifth of parsing and rewriting.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@frozen
class SendMessage:
    """A validated `message:send` request."""

    message_id: str
    context_id: str | None
    text: str  # every text part joined by newlines
    parts: tuple[Mapping[str, Any], ...]
    message: Mapping[str, Any]  # the whole message object, for extensions (Parafé metadata)


def _invalid(message: str) -> A2AError:
    return A2AError("INVALID_PARAMS", message)


def _part_kind(part: Any) -> str | None:
    """The content key of a valid part, None for an invalid one.

    Valid: exactly one of `{text}`, `{raw}`, `{url}`, `{data}` (`data` an object or array, the
    others strings), plus optional `metadata` (an object), `filename` and `mediaType`
    (strings). One walk over the part's keys: most parts are a lone `{"text": ...}`.
    """
    if not isinstance(part, dict):
        return None
    kind: str | None = None
    for key in part:
        if key in _CONTENT_KEYS:
            if kind is not None:
                return None
            kind = key
        elif key not in _PART_EXTRA_KEYS:
            return None
    if kind is None:
        return None
    value = part[kind]
    if not (isinstance(value, (dict, list)) if kind == "data" else isinstance(value, str)):
        return None
    if len(part) > 1:
        if "metadata" in part and not isinstance(part["metadata"], dict):
            return None
        if not all(isinstance(part.get(k, ""), str) for k in ("filename", "mediaType")):
            return None
    return kind


def _valid_message(message: dict[str, Any]) -> bool:
    """The message object's own members (its parts are checked by `parse_send_message`)."""
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        return False
    for key in ("contextId", "taskId"):
        if key in message and not isinstance(message[key], str):
            return False
    role = message.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        return False
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        return False
    if "metadata" in message and not isinstance(message["metadata"], dict):
        return False
    for key in ("extensions", "referenceTaskIds"):
        if key in message and not (
            isinstance(message[key], list) and all(isinstance(v, str) for v in message[key])
        ):
            return False
    return True


def _accepted_data(part: Mapping[str, Any], data_keys: frozenset[str]) -> bool:
    data = part.get("data")
    return isinstance(data, dict) and bool(data) and set(data) <= data_keys


def parse_send_message(body: bytes, *, data_keys: frozenset[str] = frozenset()) -> SendMessage:
    """Validate a `message:send` body through step 6 of the reference order.

    `data_keys` are the keys of the data parts an extension the Brand declares carries (the
    AP2 artifacts, spec §5.3 of Parafé): a data part holding only such keys is accepted
    beside the text. Raises `A2AError`: INVALID_PARAMS (bad JSON, bad schema, wrong role,
    blank text), TASK_NOT_FOUND (`taskId` present), CONTENT_TYPE_NOT_SUPPORTED (any other
    non-text part).
    """
    try:
        data = json_loads(body)
    except MalformedInput as exc:
        raise _invalid("Invalid JSON request body") from exc
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, dict) or not _valid_message(message):
        raise _invalid("Invalid request body")
    # One walk over the parts collects what the steps below check in the reference's order.
    parts: list[dict[str, Any]] = message["parts"]
    texts: list[str] = []
    unsupported = False
    for part in parts:
        kind = _part_kind(part)
        if kind is None:
            raise _invalid("Invalid request body")
        if kind == "text":
            texts.append(part["text"])
        elif not unsupported and not _accepted_data(part, data_keys):
            unsupported = True
    # NUL or lone surrogates in ids or text: valid JSON, but no store can keep them.
    if not (
        is_storable_text(message["messageId"])
        and is_storable_text(message.get("contextId", ""))
        and all(is_storable_text(text) for text in texts)
    ):
        raise _invalid("Invalid request body")
    if "taskId" in message:
        raise A2AError("TASK_NOT_FOUND", "Task not found")
    if message["role"] != "ROLE_USER":
        raise _invalid("Message role must be ROLE_USER")
    if unsupported:
        raise A2AError("CONTENT_TYPE_NOT_SUPPORTED", "Content type not supported")
    text = texts[0] if len(texts) == 1 else "\n".join(texts)
    if not text.strip():
        raise _invalid("Message text must not be blank")
    return SendMessage(message["messageId"], message.get("contextId"), text, tuple(parts), message)


def is_uuid(value: str) -> bool:
    """Tell whether `value` is a canonical UUID string (minted context ids are): lower-case
    hex in the 8-4-4-4-12 form, exactly what `str(uuid.UUID(...))` writes."""
    return _CANONICAL_UUID.fullmatch(value) is not None


def parse_page_size(query: str) -> int:
    """`pageSize` of ListTasks: all digits, 1-100, default 50, given at most once.

    The query is decoded as a browser's URLSearchParams would (the reference reads it so).
    """
    values = [
        value for name, value in parse_qsl(query, keep_blank_values=True) if name == "pageSize"
    ]
    if not values:
        return 50
    value = values[0] if len(values) == 1 else ""
    if not (is_ascii_digits(value) and len(value) <= 3):
        raise _invalid("Invalid pageSize")
    size = int(value)
    if not 1 <= size <= 100:
        raise _invalid("Invalid pageSize")
    return size


__all__ = [
    "SendMessage",
    "is_uuid",
    "parse_page_size",
    "parse_send_message",
]
