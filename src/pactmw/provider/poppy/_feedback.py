"""Poppy feedback (§8): `POST {issuer}/feedback`, listed in poppy.json as `feedback.endpoint`.

A personal agent reports what it could not do for its user (`{kind, task, description}`): with
a Session Token and its DPoP proof, signed in or out, no scope needed (PAP-8-01); any `kind`
is accepted (PAP-8-06); `task` is at most 200 characters, `description` at most 2000; the
answer is `202` with no body.

Delivery needs no table: each report is published as the audit event `agent.feedback`
(`AuditEvent.details` holds `kind`, `task`, `description` and the agent's User ID) to the
Provider's `audit` hook, the one that already receives `agent.delegation_approved`, and
logged to the `pactmw.feedback` logger. The text is the agent's, so it is data, never
instructions (PAP-8-07): it is logged only through `%r` (no newline or control character
reaches a log line as itself) and handed to the hook as plain strings for the operator to
read, never to run or to give a model as instructions.

Reports are limited per (agent, User ID): `FEEDBACK_RATE_LIMIT` (in the store when rate
limits are shared); over it, `429 rate_limited` with `Retry-After`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pactmw.core.http import Response
from pactmw.protocols.poppy import parse_feedback
from pactmw.provider.delegated._audit import Audit, AuditEvent
from pactmw.provider.delegated._responses import NO_STORE
from pactmw.provider.flow import Flow
from pactmw.provider.poppy._bounds import bounded_body, within_rate
from pactmw.provider.ratelimit import RateLimit, RateLimiter
from pactmw.store import RateLimitStore

if TYPE_CHECKING:
    from pactmw.provider.poppy._session_check import PoppyCaller

feedback_logger = logging.getLogger("pactmw.feedback")

#: Where the endpoint sits below a Brand's issuer.
FEEDBACK_SEGMENT = "feedback"
#: The audit event each report is published as.
FEEDBACK_EVENT = "agent.feedback"
#: A report's body limit: 2,200 characters of text, each at most six bytes as a JSON escape,
#: plus the members' names, fit well within it; anything longer is `413 request_too_large`.
FEEDBACK_BODY_LIMIT = 16 * 1024
#: Reports per (agent, User ID): an agent reports what it could not do, not every message.
FEEDBACK_RATE_LIMIT = RateLimit(per_user=30, window=3600.0)


class PoppyFeedback:
    """The feedback endpoint of every Poppy-enabled Brand of one Provider."""

    def __init__(
        self,
        *,
        audit: Audit,
        clock: Callable[[], float],
        rate_limit: RateLimit | None = None,
        rate_counters: RateLimitStore | None = None,
    ) -> None:
        self._audit = audit
        self._clock = clock
        self._limiter = RateLimiter(
            rate_limit or FEEDBACK_RATE_LIMIT,
            store=rate_counters,
            namespace="poppy.feedback",
            key_name="client_id",
        )

    def flow(self, caller: PoppyCaller) -> Flow:
        """Take one report of an already checked Session (`PoppyServer.session_flow` with
        no scope): `202`, or `400 invalid_request`, `413 request_too_large`, `429`."""
        body = yield from bounded_body(FEEDBACK_BODY_LIMIT, "the report")
        report = parse_feedback(body)
        now = self._clock()
        yield from within_rate(self._limiter, caller.client_id, caller.user_id, now, "reports")
        feedback_logger.info(
            "feedback brand=%s client_id=%r kind=%r task=%r description=%r",
            caller.brand_id,
            caller.client_id,
            report.kind,
            report.task,
            report.description,
        )
        self._audit.publish(
            AuditEvent(
                name=FEEDBACK_EVENT,
                brand_id=caller.brand_id,
                issuer=caller.client_id,
                account=caller.account,
                grant_id=caller.grant_id,
                scopes=caller.scopes,
                details=(
                    ("user_id", caller.user_id),
                    ("kind", report.kind),
                    ("task", report.task),
                    ("description", report.description),
                ),
            )
        )
        return Response(status=202, headers=(("Content-Length", "0"), *NO_STORE))


__all__ = [
    "FEEDBACK_BODY_LIMIT",
    "FEEDBACK_EVENT",
    "FEEDBACK_RATE_LIMIT",
    "FEEDBACK_SEGMENT",
    "PoppyFeedback",
    "feedback_logger",
]
