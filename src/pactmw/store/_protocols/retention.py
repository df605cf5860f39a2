"""Retention of the Store contract: deleting what is no longer needed, on demand."""

from __future__ import annotations

from typing import Protocol

from pactmw.store.base import Cleanup

__all__ = ["RetentionStore"]


class RetentionStore(Protocol):
    """The operator's cleanup (`pactmw cleanup`), beyond the opportunistic purge."""

    def cleanup(self, *, now: float, conversations_idle_before: float | None) -> Cleanup:
        """Delete, in one transaction, what can no longer be used at `now`; return the counts.

        - device authorizations that expired (`expires_at <= now`), whatever their status;
        - refresh tokens that can no longer be rotated nor reveal a replay: those of a grant
          that is revoked or expired, and unspent ones that expired. A spent token of a live
          grant is kept until then: presenting it again is how a stolen token is detected
          (it revokes the grant, RFC 9700 §4.14.2), so deleting it would hide a theft;
        - single-use values past their expiry (`expires_at <= now`);
        - authorization details past their expiry (those of device authorizations);
        - rate-limit counters whose window has ended (`window_end <= now`), in a store that
          keeps them (`RateLimitStore`);
        - Poppy Sessions whose Session Token expired more than `EXPIRED_RETENTION` before
          `now` (until then the agent may still renew them);
        - Poppy Account Tokens that can no longer sign anything in, by the refresh-token rule:
          unspent and expired, or of a revoked or expired grant (a spent one of a live grant
          is kept: revoking it still ends its sign-in, §4.9);
        - Idempotency-Key answers of Poppy API writes past their expiry;
        - when `conversations_idle_before` is given, the conversations whose `last_activity`
          is before it, with all their messages (personal data past its retention), and the
          Poppy operations last changed before it that are final or expired proposals (one in
          progress is kept whatever its age: its outcome is still to be recorded).

        Nothing live is touched: a pending device code, a usable refresh token, a single-use
        value still recorded, a conversation active at or after the cutoff. Grants are kept
        (their history is the audit trail of what users allowed).
        """
        return self._cleanup(now, conversations_idle_before)

    def _cleanup(self, now: float, conversations_idle_before: float | None) -> Cleanup:
        """What a backend implements: the deletions above, in one transaction."""
        ...
