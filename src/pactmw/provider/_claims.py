"""A turn's claim of its message, in any protocol: the lease renewed while the bot runs
(`LeaseRenewer`, `Lease`), the claim given up when the turn fails (`give_up`) or is refused
before its bot runs (`release_refused`), a failed first turn leaving no empty
conversation (`leaving_nothing`), and the one way a failed step takes back what it began
(`undone_if_failed`)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from pactmw.core import _fork
from pactmw.provider.flow import NeedStore, SubFlow
from pactmw.store.base import Claim, Store, StoreUnavailable

logger = logging.getLogger("pactmw.provider")

#: How often, as a fraction of `claim_lease_seconds`, a running turn renews its claim: often
#: enough that one failed renewal (a store hiccup) still leaves the lease standing.
_RENEW_FRACTION = 1 / 3

__all__ = [
    "Lease",
    "LeaseRenewer",
    "give_up",
    "leaving_nothing",
    "release_refused",
    "undone_if_failed",
]


def give_up(lease: Lease, kept: Callable[[int], Exception]) -> SubFlow:
    """Give a turn's claim up unanswered (a retry runs the bot again), if the turn still
    holds it (`Lease.give_up`). A store need, not a plain call in the flow: it may wait
    for a renewal under way, so the async driver runs it in a worker thread, never on the
    event loop (where a flow resumes after an async bot).

    With the store down, the claim stays until its lease lapses, and until then a retry
    is told the message is in progress: logged once, naming the message, and raised as
    `kept(seconds)`, the protocol's error telling the agent to send it again once the
    lease has lapsed (its `Retry-After`), instead of the store outage's "retry in 1 s"
    that would only meet the claim again."""
    try:
        yield NeedStore(lease.give_up, {})
    except StoreUnavailable as exc:
        lapse = math.ceil(lease.lease_seconds)
        logger.error(
            "releasing message %r failed, so it stays in progress until its claim "
            "lapses (within %d s): %s",
            lease.message_id,
            lapse,
            exc,
        )
        raise kept(lapse) from None


def release_refused(
    store: Store, claim: Claim, context_id: str, message_id: str, claimed_at: float
) -> SubFlow:
    """Give up the claim of a message refused before its bot runs (a closed conversation),
    in any protocol: a claim this request made (`new`, at `claimed_at`) is released, so the
    message was never received and the store keeps no unanswered turn of it; another
    request's claim, or a stored reply, is left as it is. No lease holds the claim yet, so
    its mark is `claimed_at` (with a lease, `give_up`)."""
    if claim.kind == "new":
        yield NeedStore(
            store.release_claim,
            {"context_id": context_id, "message_id": message_id, "claimed_at": claimed_at},
        )


def leaving_nothing(store: Store, context_id: str, started: SubFlow) -> SubFlow:
    """`started`, the first turn of conversation `context_id`, which this request created;
    when it fails, the conversation is deleted if it holds no turn (its first message was
    given up, so never received): a failed start leaves no empty conversation behind, in
    any protocol. The agent never learnt its id. A conversation still holding a turn (a
    claim the store could not give up) is kept; the retention cleanup deletes it in time."""
    undo = NeedStore(store.delete_empty_conversation, {"context_id": context_id})
    return (yield from undone_if_failed(started, undo))


def undone_if_failed(then: SubFlow, undo: NeedStore) -> SubFlow:
    """`then` (its value is this flow's); when it fails, the store call `undo` takes back
    what it began, and the failure goes on. With the store down the failure goes on alone:
    it says what happened, and is logged where it happened (one line, not one more per
    failed call); what stays is for a retry or the retention cleanup to meet."""
    try:
        return (yield from then)
    except Exception as failed:
        try:
            yield undo
        except StoreUnavailable:
            raise failed from None
        raise


class Lease:
    """One claim a running turn holds; `stop()` or `give_up()` once the turn is over."""

    def __init__(self, renewer: LeaseRenewer, context_id: str, message_id: str, at: float):
        self.context_id = context_id
        self.message_id = message_id
        #: Where the claim's lease starts in the store: what the next renewal presents.
        self.claimed_at = at
        #: When (monotonic) the lease was last set, to schedule the next renewal.
        self.set_at = time.monotonic()
        #: Held while a renewal is under way, so `release()` waits for its outcome.
        self.renewing = threading.Lock()
        self._renewer = renewer

    @property
    def lease_seconds(self) -> float:
        """How long the claim stays the turn's in the store without a renewal."""
        return self._renewer.lease_seconds

    def stop(self) -> None:
        """Stop renewing this claim (idempotent), waiting for nothing: for a turn whose
        reply is stored (or about to be), which presents no mark. A renewal under way may
        still land; an answered claim's lease no longer matters."""
        self._renewer.forget(self)

    def release(self) -> float:
        """Stop renewing this claim (idempotent); return where its lease starts in the store
        now, the mark `release_claim` presents to give the claim up. A renewal already under
        way is waited for (one store call at most), else the mark could be the one before it.
        Blocking: a flow gives its claim up with `give_up`."""
        self._renewer.forget(self)
        with self.renewing:
            return self.claimed_at

    def give_up(self) -> None:
        """Stop renewing this claim and release it unanswered, if the turn still holds it
        (blocking: a renewal under way, then one store call)."""
        self._renewer.store.release_claim(
            context_id=self.context_id, message_id=self.message_id, claimed_at=self.release()
        )


class LeaseRenewer:
    """Renews the claims of the turns running in this process, from one daemon thread.

    A thread, not the flow, because the flow is suspended while its bot runs (the sync driver
    runs the bot in the request's own thread). One thread for all turns, started on first use,
    so a fast turn costs a dict entry, not a thread. Each claim is renewed once
    `claim_lease_seconds * _RENEW_FRACTION` has passed since its lease was last set; a claim
    the store says is no longer ours is dropped; a failed store call is retried next tick.
    """

    def __init__(self, store: Store, clock: Callable[[], float], lease_seconds: float) -> None:
        self.store = store
        self._clock = clock
        self.lease_seconds = lease_seconds
        self._interval = lease_seconds * _RENEW_FRACTION
        self._leases: set[Lease] = set()
        # A plain lock under the condition: every turn takes it twice (hold, forget), and
        # `with lock` is C while `with condition` is two Python calls. It is never re-entered.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        #: Whether the thread waits for a first lease, and so must be woken for one. Between
        #: its ticks it is never woken: no lease is due before a full interval has passed.
        self._parked = False
        _fork.reset_in_child(self)

    def _reset_in_child(self) -> None:
        """In a forked child: no thread (`hold` starts one), a lock no thread of the child
        holds, and none of the parent's leases: their turns run in the parent, which renews
        and releases their claims itself."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._leases = set()
        self._thread = None
        self._parked = False

    def hold(self, context_id: str, message_id: str, *, claimed_at: float) -> Lease:
        """Keep renewing the claim `claim_message` granted at `claimed_at` until released."""
        lease = Lease(self, context_id, message_id, claimed_at)
        with self._lock:
            self._leases.add(lease)
            # Started here, and again after a fork (a child process has no such thread).
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="pactmw-lease-renewer", daemon=True
                )
                self._thread.start()
            if self._parked:
                # Woken only from its wait for a first lease: waking it on every turn cost a
                # thread switch per message:send (6% of the GIL time on sqlite, py-spy).
                self._parked = False
                self._changed.notify()
        return lease

    def forget(self, lease: Lease) -> None:
        with self._lock:
            self._leases.discard(lease)

    def _run(self) -> None:
        while True:
            with self._changed:
                if not self._leases:
                    # Parked until a turn holds a lease; then it ticks while any lease is
                    # held, and parks again at the first tick that finds none (so a steady
                    # stream of fast turns wakes it once, not once a turn).
                    self._parked = True
                    while self._parked:
                        self._changed.wait()
                self._changed.wait(self._interval / 2)
                started = time.monotonic()
                due = [lease for lease in self._leases if started - lease.set_at >= self._interval]
            for lease in due:
                self._renew(lease)

    def _renew(self, lease: Lease) -> None:
        with lease.renewing:
            with self._lock:
                if lease not in self._leases:
                    return  # released since it was due: its turn presents the mark it has
            self._renew_held(lease)

    def _renew_held(self, lease: Lease) -> None:
        now, started = self._clock(), time.monotonic()
        try:
            renewed = self.store.renew_claim(
                context_id=lease.context_id,
                message_id=lease.message_id,
                claimed_at=lease.claimed_at,
                now=now,
            )
        except Exception:
            logger.warning("renewing the claim of %r failed", lease.message_id, exc_info=True)
            return
        if renewed:
            lease.claimed_at, lease.set_at = now, started
            return
        with self._changed:
            if lease in self._leases:  # not merely released meanwhile: lost to a takeover
                logger.warning("the claim of %r was lost while its bot ran", lease.message_id)
                self._leases.discard(lease)
