"""The Parafé parts of a reply: the `handshake_complete` member and refusals as A2A JSON."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from pactmw.protocols.parafe import HandshakeComplete
from pactmw.provider.parafe._consent import ParafeRefused


def handshake_data(complete: HandshakeComplete) -> dict[str, Any]:
    """The `handshake_complete` member as JSON (optional members only when set)."""
    data: dict[str, Any] = {"handshake_id": complete.handshake_id, "status": complete.status}
    for name in ("session_id", "consent_token", "error_code", "error_message"):
        value = getattr(complete, name)
        if value is not None:
            data[name] = value
    return data


def refusal_message(
    refused: ParafeRefused, context_id: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The text of a refusal and the agent message that says it (without Parafé data)."""
    text = f"Parafé consent refused for {refused.action}: {refused.error.message}"
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    }
    if context_id is not None:
        message["contextId"] = context_id
    return text, message


def refusal_task(message: Mapping[str, Any], refused: ParafeRefused) -> dict[str, Any]:
    """A refusal as an A2A task: `TASK_STATE_AUTH_REQUIRED` when a new handshake could help
    (missing, expired or insufficient consent), `TASK_STATE_REJECTED` otherwise; the Parafé
    data rides on `status.message`."""
    task: dict[str, Any] = {
        "id": f"t-{uuid.uuid4()}",
        "status": {"state": refused.task_state, "message": dict(message)},
    }
    if "contextId" in message:
        task["contextId"] = message["contextId"]
    return {"task": task}


__all__ = [
    "handshake_data",
    "refusal_message",
    "refusal_task",
]
