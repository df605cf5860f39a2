"""The operator's cleanup of the SQL stores (see `RetentionStore.cleanup`)."""

from __future__ import annotations

from pactmw.store._sql.core import SqlCore
from pactmw.store.base import Cleanup

__all__ = ["RetentionMixin"]


class RetentionMixin(SqlCore):
    """`Store.cleanup`, over the dialect hooks: one write transaction."""

    def cleanup(self, *, now: float, conversations_idle_before: float | None) -> Cleanup:
        """Delete what can no longer be used at `now`; see `RetentionStore.cleanup`."""
        sql = self._sql
        with self._write() as ex:
            devices = ex.execute(sql.purge_devices, (now,)).rowcount
            tokens = ex.execute(sql.cleanup_refresh_tokens, (now, now)).rowcount
            used = ex.execute(sql.purge_used_values, (now,)).rowcount
            details = ex.execute(sql.drop_expired_details, (now,)).rowcount
            counters = ex.execute(sql.drop_ended_rate_counters, (now,)).rowcount
            conversations = messages = 0
            if conversations_idle_before is not None:
                cutoff = (conversations_idle_before,)
                # Lock the idle conversations first (where rows are locked): a turn that
                # resumes one meanwhile either commits before (then it is no longer idle and
                # keeps its messages) or waits and finds it gone, never half deleted.
                if self._locks_rows:
                    ex.execute(sql.lock_idle_conversations, cutoff).fetchall()
                messages = ex.execute(sql.delete_idle_messages, cutoff).rowcount
                conversations = ex.execute(sql.delete_idle_conversations, cutoff).rowcount
        return Cleanup(
            device_authorizations=devices,
            refresh_tokens=tokens,
            used_values=used,
            conversations=conversations,
            messages=messages,
            authorization_details=details,
            rate_counters=counters,
        )
