"""The audit trail of delegation: approvals, denials and revocations, logged and handed on."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from attrs import frozen

from pactmw.store.base import Grant

logger = logging.getLogger("pactmw.delegation")
audit_logger = logging.getLogger("pactmw.audit")


@frozen
class AuditEvent:
    """`agent.delegation_approved`, `agent.delegation_denied`, `agent.grant_revoked`, or
    `agent.feedback` (a Poppy report: `details` holds its `kind`, `task` and `description`,
    the agent's text, which is data to read, never instructions, and its `user_id`)."""

    name: str
    brand_id: str
    issuer: str
    account: str | None
    grant_id: str | None = None
    scopes: tuple[str, ...] = ()
    reason: str = ""
    #: Further (name, value) pairs of the event, in order.
    details: tuple[tuple[str, str], ...] = ()


AuditHook = Callable[[AuditEvent], None]


@frozen
class Audit:
    """Logs each event to `pactmw.audit`, then gives it to the Provider's hook, if any."""

    hook: AuditHook | None = None

    def grant(
        self, name: str, grant: Grant, *, scopes: Iterable[str] = (), reason: str = ""
    ) -> None:
        """An event about `grant` (approved, or revoked for `reason`)."""
        self.publish(
            AuditEvent(
                name=name,
                brand_id=grant.brand_id,
                issuer=grant.client_id,
                account=grant.account,
                grant_id=grant.grant_id,
                scopes=tuple(scopes),
                reason=reason,
            )
        )

    def publish(self, event: AuditEvent) -> None:
        audit_logger.info(
            "%s brand=%s issuer=%s grant=%s %s",
            event.name,
            event.brand_id,
            event.issuer,
            event.grant_id,
            event.reason,
        )
        if self.hook is not None:
            try:
                self.hook(event)
            except Exception:  # an audit sink must never break the flow it observes
                # The person's approval, denial or revocation stands; the event is in the
                # pactmw.audit log above, and this line says which one the sink missed.
                logger.exception(
                    "audit hook failed for %s brand=%s grant=%s",
                    event.name,
                    event.brand_id,
                    event.grant_id,
                )


__all__ = [
    "Audit",
    "AuditEvent",
    "AuditHook",
    "audit_logger",
]
