"""Rate-limit counters of the SQL stores (see `RateLimitStore`)."""

from __future__ import annotations

from pactmw.core.errors import PactmwError
from pactmw.store._sql.core import SqlCore

__all__ = ["RateLimitsMixin"]


class _Refused(PactmwError):
    """Raised inside the write transaction to roll back the counters already raised; never
    leaves `count_request`."""


class RateLimitsMixin(SqlCore):
    """`RateLimitStore` over the dialect hooks: one upsert per counter, in one transaction."""

    def _count_request(
        self, counters: tuple[tuple[str, int], ...], window_start: float, window_end: float
    ) -> bool:
        try:
            with self._write() as ex:
                for key, limit in counters:
                    # One statement decides and counts: PostgreSQL locks the counter's row
                    # for the conflict update and re-checks the WHERE on its latest version,
                    # so concurrent requests queue on it and none is admitted past `limit`.
                    params = (key, window_start, window_end, limit)
                    if ex.execute(self._sql.count_request, params).rowcount == 0:
                        raise _Refused
        except _Refused:
            return False  # rolled back: a refused request counts nowhere
        return True
