"""Reply message ids and minted context ids: random version-4 UUIDs, written as
`str(uuid.uuid4())` writes them."""

from __future__ import annotations

import os
import uuid

import pytest

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


def test_ids_never_come_from_os_urandom(monkeypatch: pytest.MonkeyPatch) -> None:
    # `os.urandom` lets go of the GIL for its system call: on every turn's path that handed
    # the GIL to a waiting worker thread and back (docs/performance.md, issue 16, 4th pass).
    def refuse(size: int) -> bytes:
        raise AssertionError("os.urandom called")

    monkeypatch.setattr(os, "urandom", refuse)
    store = MemoryStore()
    context_id = store.start_conversation(
        brand_id="acme", issuer="i", sub="u", account=None, message_id="m", text="hi", now=1.0
    )
    assert is_uuid(context_id)
    assert is_uuid(uuid4_text())
