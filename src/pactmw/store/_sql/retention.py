"""The operator's cleanup of the SQL stores (see `RetentionStore.cleanup`)."""

from __future__ import annotations

from typing import ClassVar

from pactmw.store._sql.account_tokens import AccountTokenStatements
from pactmw.store._sql.core import SqlCore
from pactmw.store._sql.operations import OperationStatements
from pactmw.store._sql.sessions import SessionStatements
from pactmw.store.base import EXPIRED_RETENTION, Cleanup

__all__ = ["RetentionMixin"]


class RetentionMixin(SqlCore):
    """`Store.cleanup`, over the dialect hooks: one write transaction, without the operation
    timeout (the first cleanup of a big database may delete for minutes)."""

    _session_sql: ClassVar[SessionStatements]
    _account_sql: ClassVar[AccountTokenStatements]
    _operation_sql: ClassVar[OperationStatements]

    def _cleanup(self, now: float, conversations_idle_before: float | None) -> Cleanup:
        sql = self._sql
        with self._long_write() as ex:
            devices = ex.execute(sql.purge_devices, (now,)).rowcount
            tokens = ex.execute(sql.cleanup_refresh_tokens, (now, now)).rowcount
            used = ex.execute(sql.purge_used_values, (now,)).rowcount
            details = ex.execute(sql.drop_expired_details, (now,)).rowcount
            counters = ex.execute(sql.drop_ended_rate_counters, (now,)).rowcount
            horizon = (now - EXPIRED_RETENTION,)
            sessions = ex.execute(self._session_sql.purge, horizon).rowcount
            account_tokens = ex.execute(self._account_sql.cleanup, (now, now)).rowcount
            answers = ex.execute(self._operation_sql.purge_answers, (now,)).rowcount
            conversations = messages = operations = 0
            if conversations_idle_before is not None:
                cutoff = (conversations_idle_before,)
                # Lock the idle conversations first (where rows are locked): a turn that
                # resumes one meanwhile either commits before (then it is no longer idle and
                # keeps its messages) or waits and finds it gone, never half deleted.
                if self._locks_rows:
                    ex.execute(sql.lock_idle_conversations, cutoff).fetchall()
                messages = ex.execute(sql.delete_idle_messages, cutoff).rowcount
                ex.execute(sql.delete_idle_message_ids, cutoff)
                conversations = ex.execute(sql.delete_idle_conversations, cutoff).rowcount
                operations = ex.execute(
                    self._operation_sql.purge_operations, (conversations_idle_before, now)
                ).rowcount
        return Cleanup(
            device_authorizations=devices,
            refresh_tokens=tokens,
            used_values=used,
            conversations=conversations,
            messages=messages,
            authorization_details=details,
            rate_counters=counters,
            poppy_sessions=sessions,
            account_tokens=account_tokens,
            operations=operations,
            idempotency_answers=answers,
        )
