"""The operator's cleanup of the memory store (see `RetentionStore.cleanup`)."""

from __future__ import annotations

from attrs import evolve

from pactmw.store._memory.core import drop_where
from pactmw.store._memory.details import DetailsMixin
from pactmw.store.base import EXPIRED_RETENTION, Cleanup

__all__ = ["RetentionMixin"]


class RetentionMixin(DetailsMixin):
    """`Store.cleanup`, on the in-memory state (over `DetailsMixin`, whose state it cleans)."""

    def _cleanup(self, now: float, conversations_idle_before: float | None) -> Cleanup:
        with self._open:
            # Each count is what its own drop deleted; none reads what another deletes.
            cleanup = Cleanup(
                device_authorizations=self._drop_expired_devices(now),
                refresh_tokens=drop_where(self._refresh, lambda token: self._is_dead(token, now)),
                used_values=drop_where(self._used, lambda expires_at: expires_at <= now),
                authorization_details=self._drop_expired_details(now),
                rate_counters=drop_where(self._rate_counts, lambda window: window[1] <= now),
                poppy_sessions=self._drop_stale_sessions(now - EXPIRED_RETENTION),
                account_tokens=drop_where(
                    self._account_tokens, lambda token: self._is_dead(token, now)
                ),
                idempotency_answers=drop_where(self._answers, lambda kept: kept.expires_at <= now),
            )
            if conversations_idle_before is None:
                return cleanup
            return self._drop_idle(cleanup, conversations_idle_before, now)

    def _drop_stale_sessions(self, token_expired_by: float) -> int:
        # Called with the lock held: Sessions a day after their token expired (see
        # `RetentionStore.cleanup`), with their token.
        stale = [sid for sid, s in self._sessions.items() if s.token_expires_at <= token_expired_by]
        for session_id in stale:
            del self._sessions[session_id]
            self._session_tokens.pop(self._live_token.pop(session_id, ""), None)
        return len(stale)

    def _drop_idle(self, cleanup: Cleanup, idle_before: float, now: float) -> Cleanup:
        # Called with the lock held: conversations idle since before `idle_before`, with
        # their messages, and the operations that ended before then.
        idle = [
            context_id
            for context_id, ctx in self._contexts.items()
            if ctx.conversation.last_activity < idle_before
        ]
        messages = sum(len(self._contexts.pop(context_id).messages) for context_id in idle)
        if idle:
            gone = set(idle)
            self._message_ids = {k: c for k, c in self._message_ids.items() if c not in gone}
        ended = [
            operation_id
            for operation_id, operation in self._operations.items()
            if operation.updated_at < idle_before
            and operation.state_at(now) in ("succeeded", "failed", "cancelled", "expired")
        ]
        for operation_id in ended:
            dropped = self._operations.pop(operation_id)
            if dropped.open_key is not None:
                self._open_operations.pop(dropped.open_key, None)
        return evolve(cleanup, conversations=len(idle), messages=messages, operations=len(ended))
