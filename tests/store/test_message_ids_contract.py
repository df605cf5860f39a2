"""`claim_message_id` and `release_message_id`, on every backend: the message ids one owner
(brand, agent, user) holds across its conversations (a Poppy message id is the User's,
PAP-7.3-01), their cleanup with idle conversations, and a schema version 11 database that
upgrades in place with the ids of the Poppy conversations it already holds."""

from __future__ import annotations

import pytest

from pactmw.store import Store
from tests.store.support import Backend, all_at_once, backend_module, schema_version

T0 = 1_700_000_000.0
OWNER = {"brand_id": "acme", "issuer": "poppy https://pa.example/agent.json", "sub": "u1"}


def _claim(store: Store, mid: str, ctx: str, **owner: str) -> str:
    return store.claim_message_id(**{**OWNER, **owner}, message_id=mid, context_id=ctx)


def _release(store: Store, mid: str, ctx: str) -> None:
    store.release_message_id(**OWNER, message_id=mid, context_id=ctx)


def test_the_first_conversation_to_claim_an_id_holds_it(store: Store) -> None:
    assert _claim(store, "m1", "ctx-a") == "ctx-a"
    assert _claim(store, "m1", "ctx-a") == "ctx-a"
    assert _claim(store, "m1", "ctx-b") == "ctx-a"
    assert _claim(store, "m2", "ctx-b") == "ctx-b"


@pytest.mark.parametrize(
    "other",
    [{"brand_id": "other"}, {"issuer": "poppy https://other.example/a.json"}, {"sub": "u2"}],
)
def test_another_owners_ids_are_its_own(store: Store, other: dict[str, str]) -> None:
    assert _claim(store, "m1", "ctx-a") == "ctx-a"
    assert _claim(store, "m1", "ctx-b", **other) == "ctx-b"


def test_sixteen_conversations_claiming_one_id_have_one_winner(store: Store) -> None:
    holders = all_at_once(16, lambda i: _claim(store, "m1", f"ctx-{i}"))
    assert len(holders) == 16
    assert len(set(holders)) == 1


def test_only_the_holder_releases_an_id(store: Store) -> None:
    _claim(store, "m1", "ctx-a")
    _release(store, "m1", "ctx-b")
    assert _claim(store, "m1", "ctx-b") == "ctx-a"
    _release(store, "m1", "ctx-a")
    assert _claim(store, "m1", "ctx-b") == "ctx-b"
    _release(store, "never-claimed", "ctx-a")


def test_an_id_with_nul_is_refused(store: Store) -> None:
    with pytest.raises(ValueError):
        _claim(store, "m\x001", "ctx-a")
    _release(store, "m\x001", "ctx-a")  # nothing to release, nothing raised


def test_cleanup_frees_the_ids_of_idle_conversations(store: Store) -> None:
    idle = store.start_conversation(
        **OWNER, account=None, message_id="m1", text="hi", now=T0, context_id="ctx-idle"
    )
    live = store.start_conversation(
        **OWNER, account=None, message_id="m2", text="hi", now=T0 + 100, context_id="ctx-live"
    )
    assert _claim(store, "m1", idle) == idle
    assert _claim(store, "m2", live) == live
    store.cleanup(now=T0 + 200, conversations_idle_before=T0 + 50)
    assert store.get_conversation(idle) is None
    assert _claim(store, "m1", "ctx-new") == "ctx-new"
    assert _claim(store, "m2", "ctx-new") == live


def test_a_version_11_database_gains_the_ids_of_its_poppy_conversations(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = backend_module(persistent)
    migrations = module.MIGRATIONS
    assert len(migrations) == 12
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:11])
        old = persistent.open()
        poppy = old.start_conversation(
            **OWNER, account=None, message_id="m1", text="hi", now=T0, context_id="ctx-poppy"
        )
        old.claim_turn(context_id=poppy, message_id="m2", text="more", now=T0, lease_seconds=30)
        pact = old.start_conversation(
            brand_id="acme", issuer="https://pa.example", sub="u1", account=None,
            message_id="m3", text="hi", now=T0,
        )  # fmt: skip
        old.close()
    assert schema_version(persistent) == 11
    upgraded = persistent.open()
    try:
        assert _claim(upgraded, "m1", "ctx-other") == poppy
        assert _claim(upgraded, "m2", "ctx-other") == poppy
        pact_owner = {"issuer": "https://pa.example"}
        # Only Poppy's ids are the owner's: a PACT conversation's stay its own.
        assert _claim(upgraded, "m3", "ctx-other", **pact_owner) == "ctx-other"
        assert pact != "ctx-other"
        assert schema_version(persistent) == 12
    finally:
        upgraded.close()


def test_an_id_stays_while_its_conversation_holds_the_message(store: Store) -> None:
    """Released after a failure, an id is freed only when its conversation never received
    the message: a turn claimed (by a request still answering it) or answered keeps it, so
    a failed retry cannot free an id another request holds a turn for."""
    ctx = store.start_conversation(
        **OWNER, account=None, message_id="m1", text="hi", now=T0, context_id="ctx-a"
    )
    assert _claim(store, "m1", ctx) == ctx
    _release(store, "m1", ctx)  # the turn is claimed, unanswered
    assert _claim(store, "m1", "ctx-b") == ctx
    store.store_reply(
        context_id=ctx, message_id="m1", reply_message_id="r1", reply_text="hello",
        reply=b"{}", now=T0,
    )  # fmt: skip
    _release(store, "m1", ctx)  # answered
    assert _claim(store, "m1", "ctx-b") == ctx
    store.claim_turn(context_id=ctx, message_id="m2", text="more", now=T0, lease_seconds=30)
    assert _claim(store, "m2", ctx) == ctx
    store.release_claim(context_id=ctx, message_id="m2", claimed_at=T0)
    _release(store, "m2", ctx)  # its turn released: never received
    assert _claim(store, "m2", "ctx-b") == "ctx-b"
