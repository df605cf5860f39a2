"""Reply message ids: random version-4 UUIDs, written as `str(uuid.uuid4())` writes them."""

from __future__ import annotations

import uuid

from pactmw.provider._send import _new_message_id
from pactmw.provider.messages import is_uuid


def test_reply_ids_are_canonical_random_uuids() -> None:
    ids = [_new_message_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        value = uuid.UUID(text)
        assert str(value) == text
        assert is_uuid(text)
        assert value.version == 4
        assert value.variant == uuid.RFC_4122


def test_is_uuid_takes_only_the_canonical_form() -> None:
    text = str(uuid.uuid4())
    assert is_uuid(text)
    for other in (
        text.upper(),
        "{" + text + "}",
        text.replace("-", ""),
        text + "\n",
        "urn:uuid:" + text,
        "",
    ):
        assert not is_uuid(other), other
