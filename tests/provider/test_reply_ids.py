"""Reply message ids (random version-4 UUIDs) and minted context ids (time-ordered
version-7 UUIDs), both written as `str(uuid.UUID(...))` writes them."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable

import pytest

from pactmw.core.encoding import uuid4_text, uuid7_text
from pactmw.provider.messages import is_uuid
from pactmw.store.memory import MemoryStore


@pytest.mark.parametrize(("make", "version"), [(uuid4_text, 4), (uuid7_text, 7)])
def test_ids_are_canonical_uuids(make: Callable[[], str], version: int) -> None:
    ids = [make() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        value = uuid.UUID(text)
        assert str(value) == text
        assert is_uuid(text)
        assert value.version == version
        assert value.variant == uuid.RFC_4122


def test_uuid7_text_carries_the_time_and_74_random_bits() -> None:
    before = time.time_ns() // 1_000_000
    ids = [uuid7_text() for _ in range(2000)]
    after = time.time_ns() // 1_000_000
    # RFC 9562: unix_ts_ms is the first 48 bits.
    assert all(before <= uuid.UUID(text).int >> 80 <= after for text in ids)
    # Within one millisecond the ids still differ in their random part (rand_a, rand_b).
    tails = {text[15:18] + text[20:] for text in ids}
    assert len(tails) == len(ids)


def test_uuid7_ids_of_later_milliseconds_sort_after() -> None:
    first = uuid7_text()
    start = time.monotonic()
    while time.time_ns() // 1_000_000 <= uuid.UUID(first).int >> 80:
        assert time.monotonic() - start < 5, "the wall clock did not move"
        time.sleep(0.001)
    second = uuid7_text()
    # As text too: the stores' B-tree indexes order the TEXT column, not a UUID type.
    assert first < second


def test_minted_context_ids_are_canonical_time_ordered_uuids() -> None:
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
        assert value.version == 7
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
    assert is_uuid(uuid7_text())
