"""Reply message ids and minted context ids: random version-4 UUIDs, written as
`str(uuid.uuid4())` writes them."""

from __future__ import annotations

import uuid

from pactmw.core.encoding import uuid4_text
from pactmw.provider.messages import is_uuid
from pactmw.store.memory import MemoryStore


def test_reply_ids_are_canonical_random_uuids() -> None:
    ids = [uuid4_text() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        value = uuid.UUID(text)
        assert str(value) == text
        assert is_uuid(text)
        assert value.version == 4
        assert value.variant == uuid.RFC_4122


def test_minted_context_ids_are_canonical_random_uuids() -> None:
    store = MemoryStore()
    ids = [
        store.start_conversation(
            brand_id="acme",
            issuer="https://agent.example",
            sub="u",
            account=None,
            message_id=f"m{i}",
            text="hi",
            now=1.0,
        )
        for i in range(200)
    ] + [store.create_conversation(brand_id="acme", issuer="i", sub="u", now=1.0)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        value = uuid.UUID(text)
        assert str(value) == text
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
