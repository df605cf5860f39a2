"""`delete_empty_conversation`, on every backend: a conversation whose first message was
given up (its claim released) is deleted with the message ids it holds; one holding any
turn, claimed or answered, is kept."""

from __future__ import annotations

from pactmw.store import Store

T0 = 1_700_000_000.0
OWNER = {"brand_id": "acme", "issuer": "poppy https://pa.example/agent.json", "sub": "u1"}


def _started(store: Store, message_id: str = "m1") -> str:
    """A new conversation whose first message `message_id` is claimed (at `T0`) and holds
    its id, as a Poppy conversation starts."""
    context_id: str = store.start_conversation(
        **OWNER, account=None, message_id=message_id, text="hello", now=T0
    )
    assert store.claim_message_id(**OWNER, message_id=message_id, context_id=context_id) == (
        context_id
    )
    return context_id


def test_a_conversation_whose_first_message_was_given_up_is_deleted(store: Store) -> None:
    context_id = _started(store)
    store.release_claim(context_id=context_id, message_id="m1", claimed_at=T0)
    assert store.delete_empty_conversation(context_id=context_id)
    assert store.get_conversation(context_id) is None
    # Its message id went with it: another conversation may take it now.
    assert store.claim_message_id(**OWNER, message_id="m1", context_id="ctx-other") == "ctx-other"
    assert not store.delete_empty_conversation(context_id=context_id)  # gone already


def test_a_conversation_holding_a_turn_is_kept(store: Store) -> None:
    claimed, answered = _started(store, "m1"), _started(store, "m2")
    store.store_reply(
        context_id=answered,
        message_id="m2",
        reply_message_id="r2",
        reply_text="hi",
        reply=b"hi",
        now=T0 + 1,
    )
    for context_id, message_id in ((claimed, "m1"), (answered, "m2")):
        assert not store.delete_empty_conversation(context_id=context_id)
        assert store.get_conversation(context_id) is not None
        holder = store.claim_message_id(**OWNER, message_id=message_id, context_id="ctx-other")
        assert holder == context_id


def test_an_unknown_conversation_is_nothing_to_delete(store: Store) -> None:
    assert not store.delete_empty_conversation(context_id="00000000-0000-0000-0000-000000000000")
    assert not store.delete_empty_conversation(context_id="ctx\x00")
