"""The operator's cleanup of the memory store (see `RetentionStore.cleanup`)."""

from __future__ import annotations

from pactmw.store._memory.details import DetailsMixin
from pactmw.store.base import EXPIRED_RETENTION, Cleanup

__all__ = ["RetentionMixin"]


class RetentionMixin(DetailsMixin):
    """`Store.cleanup`, on the in-memory state (over `DetailsMixin`, whose state it cleans)."""

    def _cleanup(self, now: float, conversations_idle_before: float | None) -> Cleanup:
        with self._lock:
            self._check_open()
            devices = [h for h, d in self._devices.items() if d.expires_at <= now]
            for code_hash in devices:
                self._drop_device(code_hash)
            tokens = [
                token_hash
                for token_hash, token in self._refresh.items()
                if not self._grants[token.grant_id].is_live(now)
                or (token.used_at is None and token.expires_at <= now)
            ]
            for token_hash in tokens:
                del self._refresh[token_hash]
            used = [key for key, expires_at in self._used.items() if expires_at <= now]
            for key in used:
                del self._used[key]
            details = self._drop_expired_details(now)
            ended = [name for name, (_, end, _) in self._rate_counts.items() if end <= now]
            for name in ended:
                del self._rate_counts[name]
            sessions, account_tokens = self._drop_poppy(now)
            answers = [name for name, kept in self._answers.items() if kept.expires_at <= now]
            for name in answers:
                del self._answers[name]
            operations: list[str] = []
            contexts: list[str] = []
            messages = 0
            if conversations_idle_before is not None:
                contexts = [
                    context_id
                    for context_id, ctx in self._contexts.items()
                    if ctx.conversation.last_activity < conversations_idle_before
                ]
                for context_id in contexts:
                    messages += len(self._contexts.pop(context_id).messages)
                operations = [
                    operation_id
                    for operation_id, operation in self._operations.items()
                    if operation.updated_at < conversations_idle_before
                    and operation.state_at(now) in ("succeeded", "failed", "cancelled", "expired")
                ]
                for operation_id in operations:
                    dropped = self._operations.pop(operation_id)
                    if dropped.open_key is not None:
                        self._open_operations.pop(dropped.open_key, None)
            return Cleanup(
                device_authorizations=len(devices),
                refresh_tokens=len(tokens),
                used_values=len(used),
                conversations=len(contexts),
                messages=messages,
                authorization_details=details,
                rate_counters=len(ended),
                poppy_sessions=sessions,
                account_tokens=account_tokens,
                operations=len(operations),
                idempotency_answers=len(answers),
            )

    def _drop_poppy(self, now: float) -> tuple[int, int]:
        # Called with the lock held: Sessions a day after their token expired, and Account
        # Tokens that can no longer sign in (see `RetentionStore.cleanup`).
        horizon = now - EXPIRED_RETENTION
        stale = [sid for sid, s in self._sessions.items() if s.token_expires_at <= horizon]
        for session_id in stale:
            del self._sessions[session_id]
            self._session_tokens.pop(self._live_token.pop(session_id, ""), None)
        dead = [
            token_hash
            for token_hash, token in self._account_tokens.items()
            if not self._grants[token.grant_id].is_live(now)
            or (token.used_at is None and token.expires_at <= now)
        ]
        for token_hash in dead:
            del self._account_tokens[token_hash]
        return len(stale), len(dead)
