"""Spec §5.5: the `TASK_STATE_AUTH_REQUIRED` task that asks the person for more scopes."""

from __future__ import annotations

import uuid

from attrs import frozen

from pactmw.core.errors import RequestRefused
from pactmw.core.http import Response
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.a2a import ok
from pactmw.provider.brand import Brand
from pactmw.provider.delegated._device import DeviceEndpoint
from pactmw.provider.flow import Flow


@frozen
class StepUp:
    """Answers a tool's missing scopes with a task carrying a fresh consent link.

    Each task makes a device authorization for (agent, sub), a consent link a person may be
    sent, as the device authorization endpoint does: so it counts against that endpoint's
    `device_rate_limit`, one bucket for both, and past it `message:send` gets 429 with
    `Retry-After` (no body, as past `rate_limit`) and the message stays unanswered.
    """

    device: DeviceEndpoint

    def step_up(
        self,
        brand: Brand,
        caller: PersonalAgent,
        context_id: str,
        missing: tuple[str, ...],
        message: str,
    ) -> Flow:
        config = brand.delegation
        if config is None:
            raise RuntimeError(f"brand {brand.id!r} asked for step-up but offers no delegation")
        wait = yield from self.device.limiter.admit(
            caller.issuer, caller.sub, self.device.ctx.clock()
        )
        if wait is not None:
            raise RequestRefused(429, (("Retry-After", str(wait)),))
        document = yield from self.device.authorize(brand, config, caller, missing)
        return _auth_required_task(
            context_id, message, missing, document["verification_uri_complete"]
        )


def _auth_required_task(
    context_id: str, message: str, missing: tuple[str, ...], link: str
) -> Response:
    return ok(
        {
            "task": {
                "id": f"t-{uuid.uuid4()}",
                "contextId": context_id,
                "status": {
                    "state": "TASK_STATE_AUTH_REQUIRED",
                    "message": {
                        "messageId": str(uuid.uuid4()),
                        "contextId": context_id,
                        "role": "ROLE_AGENT",
                        "parts": [{"text": message}],
                    },
                },
                "metadata": {
                    "pact.missingScopes": list(missing),
                    "pact.verificationUriComplete": link,
                },
            }
        }
    )


__all__ = [
    "StepUp",
]
