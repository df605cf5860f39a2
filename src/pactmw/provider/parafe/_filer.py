"""`ReceiptFiler`: action receipts filed with the broker in the background (§7.4)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from urllib.parse import quote

from pactmw.core.errors import FetchError
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import PrivateJWK
from pactmw.provider.parafe._broker import BrokerClient, error_code

logger = logging.getLogger("pactmw.provider.parafe")


class ReceiptFiler:
    """Files action receipts with the broker from one background thread, never delaying a
    reply: `POST {broker}/sessions/{id}/action-receipts` with the agent's credential and a
    request PoP binding the session. 201 and 409 `duplicate_receipt` are success; network
    errors, 429 and 5xx are retried `attempts` times with exponential backoff; anything else
    (a closed session, a refused credential) is given up at once and logged (codes only).
    """

    def __init__(
        self,
        *,
        broker_url: str,
        credential: str,
        key: PrivateJWK,
        policy: FetchPolicy,
        attempts: int = 4,
        backoff: float = 0.5,
        max_queue: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._broker = BrokerClient(
            broker_url.rstrip("/"), credential=credential, key=key, policy=policy, clock=clock
        )
        self.attempts = attempts
        self.backoff = backoff
        self._max_queue = max_queue
        self._queue: deque[tuple[str, str]] = deque()
        self._busy = 0
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        #: Outcomes so far: filed, duplicate, rejected, failed, dropped.
        self.outcomes: Counter[str] = Counter()

    def submit(self, filings: Iterable[tuple[str, str]]) -> None:
        with self._condition:
            if self._closed:
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

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def _work(self) -> None:
        while True:
            with self._condition:
                while not self._queue and not self._closed:
                    self._condition.wait()
                if not self._queue:
                    return
                session_id, receipt = self._queue.popleft()
                self._busy += 1
            try:
                self.outcomes[self._file(session_id, receipt)] += 1
            except Exception:  # never let the worker die
                logger.exception("Parafé receipt filing failed unexpectedly")
                self.outcomes["failed"] += 1
            finally:
                with self._condition:
                    self._busy -= 1
                    self._condition.notify_all()

    def _file(self, session_id: str, receipt: str) -> str:
        path = f"/sessions/{quote(session_id, safe='')}/action-receipts"
        body = {"receipt": receipt}
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                status, answer = self._broker.post_as_agent(path, body, session_id=session_id)
            except FetchError as exc:
                logger.info("Parafé receipt filing: broker unreachable (%s)", type(exc).__name__)
                continue
            if status in (200, 201):
                return "filed"
            code = error_code(answer)
            if status == 409 and code == "duplicate_receipt":
                return "duplicate"
            if status == 429 or status >= 500:
                continue
            logger.warning("Parafé receipt filing refused: %s %s", status, code or "no code")
            return "rejected"
        logger.warning("Parafé receipt filing gave up after %s attempts", self.attempts)
        return "failed"


__all__ = [
    "ReceiptFiler",
]
