"""`ReceiptFiler`: receipts filed with the broker in the background (§7.4, spec §5.3), and the
broker's acknowledgments kept with them (`AcknowledgmentLog`)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Protocol

from attrs import field, frozen

from pactmw.core import _fork
from pactmw.core.encoding import loggable
from pactmw.core.errors import FetchError
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import PrivateJWK
from pactmw.protocols.parafe import (
    BrokerKeys,
    BrokerRetry,
    FiledReceipt,
    ParafeError,
    ReceiptVerifier,
    receipt_hash,
)
from pactmw.protocols.parafe._broker_api import (
    acknowledged,
    error_code,
    filing_body,
    filing_path,
    filing_result,
)
from pactmw.provider.parafe._broker import BrokerClient

logger = logging.getLogger("pactmw.provider.parafe")


@frozen
class Filing:
    """One receipt to file: under `session_id`, with its `kind` (None: an action receipt;
    `ap2.checkout_receipt` or `ap2.payment_receipt` for an AP2 receipt)."""

    session_id: str
    receipt: str = field(repr=False)
    kind: str | None = None


class AcknowledgmentLog(Protocol):
    """Where the broker's verified acknowledgments of filed receipts are kept."""

    def record(self, filed: FiledReceipt) -> None:
        """Keep `filed` (a later filing of the same receipt replaces it)."""
        ...

    def get(self, receipt: str) -> FiledReceipt | None:
        """The filing of `receipt` (the JWS), if it was acknowledged."""
        ...

    def for_session(self, session_id: str) -> list[FiledReceipt]:
        """Every acknowledged filing of a session, in index order (`ack.seq`)."""
        ...


class MemoryAcknowledgments:
    """An `AcknowledgmentLog` in this process: the last `capacity` filings. Thread-safe."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._capacity = capacity
        self._filed: OrderedDict[str, FiledReceipt] = OrderedDict()
        self._lock = threading.Lock()
        _fork.fresh_lock_in_child(self)  # a lock no thread of a forked child holds

    def record(self, filed: FiledReceipt) -> None:
        key = receipt_hash(filed.receipt)
        with self._lock:
            self._filed.pop(key, None)
            self._filed[key] = filed
            while len(self._filed) > self._capacity:
                self._filed.popitem(last=False)

    def get(self, receipt: str) -> FiledReceipt | None:
        with self._lock:
            return self._filed.get(receipt_hash(receipt))

    def for_session(self, session_id: str) -> list[FiledReceipt]:
        with self._lock:
            found = [f for f in self._filed.values() if f.session_id == session_id]
        return sorted(found, key=lambda filed: filed.ack.seq)


class ReceiptFiler:
    """Files receipts with the broker from one background thread, never delaying a reply.

    `POST {broker}/sessions/{id}/action-receipts` with `{receipt, kind?}`, the agent's
    credential and a request PoP binding the session. 201 and 409 `duplicate_receipt` are
    success: the answer's acknowledgment is verified as the broker's index acknowledgment
    (ES256 with a key of its JWS, from `verifier`, and for this receipt, session and kind)
    and kept in `acknowledgment_log`. Network failures, 429 and 5xx are tried again as `retry`
    says (filing is idempotent); anything else (a closed session, a refused credential) is
    given up at once and logged (codes only).

    `outcomes` counts what happened: filed, duplicate, rejected, failed, dropped, and
    `unacknowledged` for a filing the broker accepted without a valid acknowledgment.
    """

    def __init__(
        self,
        *,
        broker_url: str,
        credential: str,
        key: PrivateJWK,
        policy: FetchPolicy,
        retry: BrokerRetry | None = None,
        verifier: ReceiptVerifier | None = None,
        acknowledgment_log: AcknowledgmentLog | None = None,
        max_queue: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        url = broker_url.rstrip("/")
        self._broker = BrokerClient(
            url, credential=credential, key=key, policy=policy, clock=clock, retry=retry
        )
        self._verifier = verifier or ReceiptVerifier(
            BrokerKeys(url, fetch_policy=policy), clock=clock
        )
        self.acknowledgment_log: AcknowledgmentLog = (
            acknowledgment_log if acknowledgment_log is not None else MemoryAcknowledgments()
        )
        self._max_queue = max_queue
        self._queue: deque[Filing] = deque()
        self._busy = 0
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.outcomes: Counter[str] = Counter()
        _fork.reset_in_child(self)

    def _reset_in_child(self) -> None:
        """In a forked child: no thread (`submit` starts one), a lock no thread of the
        child holds, and none of the parent's receipts, which the parent files."""
        self._condition = threading.Condition()
        self._queue = deque()
        self._busy = 0
        self._thread = None

    def submit(self, filings: Iterable[Filing]) -> None:
        with self._condition:
            if self._closed:
                self._drop(len(list(filings)), "the filer is closed")
                return
            for item in filings:
                if len(self._queue) >= self._max_queue:
                    self.outcomes["dropped"] += 1
                    logger.warning("Parafé receipt filing queue is full: a receipt was dropped")
                    continue
                self._queue.append(item)
            if self._queue and self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="pactmw-parafe-filing", daemon=True
                )
                self._thread.start()
            self._condition.notify_all()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued receipt was handled; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._condition.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> bool:
        """Stop taking receipts, and wait up to `timeout` seconds for the queued ones to be
        filed (the worker is a daemon thread: what is queued when the process exits is never
        filed). Those still queued then are dropped, counted and logged; the filing under way,
        if any, ends on its own (its retries are bounded). True when none was dropped."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()
        self.flush(timeout)
        with self._condition:
            left = len(self._queue)
            self._queue.clear()
            self._drop(left, "not filed before the filer closed")
            self._condition.notify_all()
        return left == 0

    def _drop(self, count: int, why: str) -> None:
        # Under the condition's lock. Codes and counts only: receipts never reach a log.
        if count:
            self.outcomes["dropped"] += count
            logger.warning("Parafé receipt filing: %d receipt(s) dropped (%s)", count, why)

    def _work(self) -> None:
        while True:
            with self._condition:
                while not self._queue and not self._closed:
                    self._condition.wait()
                if not self._queue:
                    return
                filing = self._queue.popleft()
                self._busy += 1
            try:
                self.outcomes[self._file(filing)] += 1
            except Exception:  # never let the worker die
                logger.exception("Parafé receipt filing failed unexpectedly")
                self.outcomes["failed"] += 1
            finally:
                with self._condition:
                    self._busy -= 1
                    self._condition.notify_all()

    def _file(self, filing: Filing) -> str:
        body = filing_body(filing.receipt, filing.kind)
        try:
            answer = self._broker.send(
                filing_path(filing.session_id),
                body,
                idempotent=True,
                as_agent=True,
                session_id=filing.session_id,
            )
        except FetchError as exc:
            logger.warning("Parafé receipt filing: broker unreachable (%s)", type(exc).__name__)
            return "failed"
        result = filing_result(answer.status, answer.body)
        if result is None:
            code = loggable(error_code(answer.body) or "no code")  # the broker's text
            logger.warning("Parafé receipt filing refused: %s %s", answer.status, code)
            return "rejected" if answer.status < 500 and answer.status != 429 else "failed"
        duplicate, acknowledgment = result
        if acknowledgment is None:
            logger.warning("Parafé receipt filing: the broker sent no acknowledgment")
            self.outcomes["unacknowledged"] += 1
        else:
            try:
                ack = self._verifier.verify_index_ack(acknowledgment)
                self.acknowledgment_log.record(
                    acknowledged(
                        ack,
                        acknowledgment,
                        receipt=filing.receipt,
                        session_id=filing.session_id,
                        kind=filing.kind,
                        duplicate=duplicate,
                    )
                )
            except ParafeError as exc:
                logger.warning(
                    "Parafé receipt filing: the acknowledgment fails: %s", loggable(exc.code)
                )
                self.outcomes["unacknowledged"] += 1
        return "duplicate" if duplicate else "filed"


__all__ = [
    "AcknowledgmentLog",
    "Filing",
    "MemoryAcknowledgments",
    "ReceiptFiler",
]
