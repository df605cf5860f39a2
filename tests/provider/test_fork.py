"""The Provider's in-process state in a child forked while another thread uses it.

A preloading server (`gunicorn --preload`, Flask's `init_app`, Django's middleware) builds
the Provider in the master and forks the workers. A lock held by another thread at the fork
would be held for ever in the child; the parent's background threads (the lease renewer,
the Parafé receipt filer) do not exist there, and the work they had is the parent's.
"""

from __future__ import annotations

from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import BrokerRetry
from pactmw.provider._claims import LeaseRenewer
from pactmw.provider.parafe import Filing, MemoryAcknowledgments, ReceiptFiler
from pactmw.provider.parafe._sessions import ClosedSessions
from pactmw.provider.ratelimit import RateLimit, RateLimiter
from pactmw.store.memory import MemoryStore
from tests.support.forks import BOUND, held_elsewhere, in_forked_child
from tests.support.net import closed_port_url

T0 = 1_700_000_000.0
#: The start of a rate limiting window (of 60 seconds).
WINDOW = 60.0 * 28_333_333


def test_the_rate_limiter_counts_in_a_child_forked_while_a_thread_held_it() -> None:
    limiter = RateLimiter(RateLimit(per_agent=2))
    assert limiter.check("https://agent.example", "u", WINDOW) is None  # the parent's count

    def work() -> object:
        # The count the parent had at the fork is the child's too: one more is allowed.
        return [limiter.check("https://agent.example", "u", WINDOW) for _ in range(2)]

    with held_elsewhere(limiter._lock):
        assert in_forked_child(work) == [None, 60]


def test_closed_sessions_are_remembered_in_a_child_forked_while_a_thread_held_them() -> None:
    sessions = ClosedSessions(None, clock=lambda: T0)
    sessions.close("parent's")

    def work() -> object:
        sessions.close("child's")
        return sessions.is_closed("child's"), sessions.is_closed("parent's")

    with held_elsewhere(sessions._lock):
        assert in_forked_child(work) == (True, True)


def test_acknowledgments_are_read_in_a_child_forked_while_a_thread_held_them() -> None:
    log = MemoryAcknowledgments()
    with held_elsewhere(log._lock):
        assert in_forked_child(lambda: (log.get("r"), log.for_session("s"))) == (None, [])


def _filer() -> ReceiptFiler:
    # Nothing listens at the broker: each filing fails at once (connection refused).
    return ReceiptFiler(
        broker_url=closed_port_url(),
        credential="credential",
        key=generate_private_jwk(),
        policy=FetchPolicy(allow_http_on_loopback=True),
        retry=BrokerRetry(retries=0),
    )


def test_a_child_forked_after_the_filer_started_files_from_a_thread_of_its_own() -> None:
    filer = _filer()
    filer.submit([Filing("s", "parent's receipt")])
    assert filer.flush(BOUND)  # the parent's thread ran, and waits for more

    def work() -> object:
        filer.submit([Filing("s", "child's receipt")])
        return filer.flush(BOUND), sum(filer.outcomes.values())

    assert in_forked_child(work) == (True, 2)
    filer.close()


def test_the_filer_takes_receipts_in_a_child_forked_while_a_thread_held_it() -> None:
    filer = _filer()

    def work() -> object:
        filer.submit([Filing("s", "child's receipt")])
        return filer.flush(BOUND)

    with held_elsewhere(filer._condition):
        assert in_forked_child(work) is True
    filer.close()


def test_the_lease_renewer_holds_claims_in_a_child_forked_while_a_thread_held_it() -> None:
    renewer = LeaseRenewer(MemoryStore(), clock=lambda: T0, lease_seconds=30.0)
    parents = renewer.hold("ctx-parent", "m-parent", claimed_at=T0)

    def work() -> object:
        lease = renewer.hold("ctx-child", "m-child", claimed_at=T0)
        held = sorted(lease.message_id for lease in renewer._leases)
        return held, lease.release()

    with held_elsewhere(renewer._lock):
        # The child renews its own claims only: the parent's turn, still running there,
        # renews and releases its claim itself.
        assert in_forked_child(work) == (["m-child"], T0)
    assert parents.release() == T0


def test_django_settings_are_read_in_a_child_forked_while_a_thread_held_them() -> None:
    # Django's middleware builds `settings.PACTMW` in a preloading master (gunicorn
    # --preload): a request of another thread may hold the lock around that build when the
    # master forks its workers.
    from pactmw.adapters.django._config import Configured

    configured = Configured()

    def work() -> object:
        configured.reset()  # takes the lock, as every request's `guard()` does
        return configured.problem

    with held_elsewhere(configured._lock):
        assert in_forked_child(work) is None
