"""`renew_claim` and `release_claim` on every backend: only the holder of a claim extends
its lease or gives it up.

A worker whose bot is slower than `claim_lease_seconds` renews its claim while the bot runs,
so a retry of the same message stays `pending`; a crashed worker stops renewing and its
claim is taken over at the end of the lease, after which its renewals are refused.
"""

from __future__ import annotations

import uuid

from pactmw.store import Claim, Store
from tests.store.support import all_at_once

LEASE = 30.0
T0 = 1_700_000_000.0


def _conversation(store: Store) -> str:
    return store.create_conversation(brand_id="acme", issuer="https://pa.example", sub="u1", now=T0)


def _claim(store: Store, ctx: str, mid: str, now: float) -> Claim:
    return store.claim_message(
        context_id=ctx, message_id=mid, text="hi", now=now, lease_seconds=LEASE
    )


def _renew(store: Store, ctx: str, mid: str, claimed_at: float, now: float) -> bool:
    return store.renew_claim(context_id=ctx, message_id=mid, claimed_at=claimed_at, now=now)


def _release(store: Store, ctx: str, mid: str, claimed_at: float) -> None:
    store.release_claim(context_id=ctx, message_id=mid, claimed_at=claimed_at)


def test_renewal_keeps_the_turn_past_the_first_lease(store: Store) -> None:
    ctx = _conversation(store)
    assert _claim(store, ctx, "m1", T0).kind == "new"
    assert _renew(store, ctx, "m1", claimed_at=T0, now=T0 + LEASE / 2)
    # Past the first lease, a retry is still told the message is being answered...
    assert _claim(store, ctx, "m1", T0 + LEASE + 1).kind == "pending"
    # ...and the holder renews again from its last renewal.
    assert _renew(store, ctx, "m1", claimed_at=T0 + LEASE / 2, now=T0 + LEASE)
    assert _claim(store, ctx, "m1", T0 + 2 * LEASE - 1).kind == "pending"
    # Renewals stop (the worker crashed): one lease after the last one, the turn is taken over.
    assert _claim(store, ctx, "m1", T0 + 2 * LEASE).kind == "new"


def test_renewal_with_a_stale_mark_is_refused(store: Store) -> None:
    ctx = _conversation(store)
    _claim(store, ctx, "m1", T0)
    assert _renew(store, ctx, "m1", claimed_at=T0, now=T0 + 1)
    # The first mark is spent: the holder must present the lease it last set.
    assert not _renew(store, ctx, "m1", claimed_at=T0, now=T0 + 2)
    assert _claim(store, ctx, "m1", T0 + 1 + LEASE - 0.001).kind == "pending"


def test_taken_over_claim_cannot_be_renewed_by_its_old_holder(store: Store) -> None:
    ctx = _conversation(store)
    _claim(store, ctx, "m1", T0)
    taken_at = T0 + LEASE
    assert _claim(store, ctx, "m1", taken_at).kind == "new"
    # The old worker wakes up: its renewal is refused and changes nothing...
    assert not _renew(store, ctx, "m1", claimed_at=T0, now=taken_at + 1)
    assert _claim(store, ctx, "m1", taken_at + LEASE).kind == "new"  # the taker's lease ran out
    # ...while the new holder's lease is its own.
    assert not _renew(store, ctx, "m1", claimed_at=taken_at, now=taken_at + 2)
    assert _renew(store, ctx, "m1", claimed_at=taken_at + LEASE, now=taken_at + LEASE + 1)


def test_answered_released_and_unknown_claims_are_not_renewed(store: Store) -> None:
    ctx = _conversation(store)
    _claim(store, ctx, "m1", T0)
    store.store_reply(
        context_id=ctx, message_id="m1", reply_message_id="r1", reply_text="ok", reply=b"ok", now=T0
    )
    assert not _renew(store, ctx, "m1", claimed_at=T0, now=T0 + 1)
    assert _claim(store, ctx, "m1", T0 + 2).reply == b"ok"
    _claim(store, ctx, "m2", T0)
    _release(store, ctx, "m2", claimed_at=T0)
    assert not _renew(store, ctx, "m2", claimed_at=T0, now=T0 + 1)
    assert _claim(store, ctx, "m2", T0 + 2).kind == "new"  # the release stands
    assert not _renew(store, ctx, "never", claimed_at=T0, now=T0 + 1)
    assert not _renew(store, str(uuid.uuid4()), "m1", claimed_at=T0, now=T0 + 1)
    assert not _renew(store, ctx, "m\x00", claimed_at=T0, now=T0 + 1)


def test_renewal_racing_takeovers_leaves_one_holder(store: Store) -> None:
    """The holder renews just as its lease ends while 15 retries try to take the turn over:
    either the renewal wins and every retry is `pending`, or one retry wins and the renewal
    is refused; never both."""
    ctx = _conversation(store)
    _claim(store, ctx, "m1", T0)
    at = T0 + LEASE

    def race(i: int) -> str:
        if i == 0:
            return "renewed" if _renew(store, ctx, "m1", claimed_at=T0, now=at) else "lost"
        return _claim(store, ctx, "m1", at).kind

    outcomes = sorted(all_at_once(16, race))
    assert outcomes in (["pending"] * 15 + ["renewed"], ["lost", "new"] + ["pending"] * 14)


def test_a_release_frees_only_the_claim_its_caller_holds(store: Store) -> None:
    ctx = _conversation(store)
    _claim(store, ctx, "m1", T0)
    taken_at = T0 + LEASE
    assert _claim(store, ctx, "m1", taken_at).kind == "new"  # the first worker's lease ran out
    # The first worker's bot fails late: its release leaves the taker's claim alone...
    _release(store, ctx, "m1", claimed_at=T0)
    assert _claim(store, ctx, "m1", taken_at + 1).kind == "pending"
    assert _renew(store, ctx, "m1", claimed_at=taken_at, now=taken_at + 2)
    # ...and the holder releases it, from its last renewal (a stale mark frees nothing).
    _release(store, ctx, "m1", claimed_at=taken_at)
    assert _claim(store, ctx, "m1", taken_at + 3).kind == "pending"
    _release(store, ctx, "m1", claimed_at=taken_at + 2)
    assert _claim(store, ctx, "m1", taken_at + 4).kind == "new"  # the retry runs the bot again


def test_a_new_conversations_first_claim_is_released_by_its_start(store: Store) -> None:
    # `start_conversation` claims the first message at `now`: that is the mark to present.
    ctx = store.start_conversation(
        brand_id="acme", issuer="https://pa.example", sub="u1", account=None,
        message_id="m1", text="hi", now=T0,
    )  # fmt: skip
    _release(store, ctx, "m1", claimed_at=T0 - 1)
    assert _claim(store, ctx, "m1", T0 + 1).kind == "pending"
    _release(store, ctx, "m1", claimed_at=T0)
    assert _claim(store, ctx, "m1", T0 + 2).kind == "new"
