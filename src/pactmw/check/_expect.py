"""What the answers must be: a PACT reply, an A2A error, a bare status, the PACT 401. Each
raises `Mismatch` when the answer is not that; every A2A answer's Content-Type is recorded for
the last check, which needs it exactly `application/a2a+json`."""

from __future__ import annotations

import json
from typing import Any

from pactmw.check._progress import Progress
from pactmw.check._result import Mismatch
from pactmw.check._wire import (
    BODY_SHOWN,
    CHALLENGE,
    GREETING,
    describe,
    header_values,
    says_a2a,
)
from pactmw.client import HttpResponse
from pactmw.client.a2a import identifies_agent_message
from pactmw.core.encoding import json_loads
from pactmw.core.errors import MalformedInput
from pactmw.protocols.a2a import A2A_CONTENT_TYPE, A2A_ERROR_DOMAIN, A2A_REASONS, ERROR_INFO_TYPE


class Expect:
    """The expectations, with what they learn as the run goes: every A2A answer's
    Content-Type, and the challenge the Provider sends for a missing token (which every other
    refusal must repeat). Remarks go to `progress`."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        #: Every answer that must be `application/a2a+json`: (what, its Content-Type).
        self.a2a_answers: list[tuple[str, str | None]] = []
        self.challenge: str | None = CHALLENGE
        self._hinted = False
        self._stepped_up = False

    def a2a_json(self, response: HttpResponse, what: str) -> Any:
        """Record the answer's Content-Type for the content-type check; parse its JSON."""
        self.a2a_answers.append((what, response.header("content-type")))
        try:
            return json_loads(response.body)
        except MalformedInput as exc:
            raise Mismatch(f"a JSON body ({what})", f"{exc}: {describe(response)}") from exc

    def hint(self, response: HttpResponse) -> str:
        """For a valid token refused: a short remark here, the likely causes once on stderr."""
        if response.status != 401:
            return ""
        if not self._hinted:
            self._hinted = True
            self.progress.note(
                "note: the Provider refused a valid personal-agent JWT: is --issuer registered "
                "and enabled, its JWKS served at the registered jwks_uri (with this key's kid), "
                "and --audience the audience the Provider assigned?"
            )
        return " (a valid token was refused)"

    def step_up_hint(self, body: Any) -> str:
        """For a step-up task where a reply was due: a short remark here, the cause once on
        stderr. The identity checks send plain messages; a bot that asks for delegated scopes
        on every turn fails each of them alike, and the quoted task alone does not say why."""
        task = body.get("task") if isinstance(body, dict) and set(body) == {"task"} else None
        status = task.get("status") if isinstance(task, dict) else None
        if not isinstance(status, dict) or status.get("state") != "TASK_STATE_AUTH_REQUIRED":
            return ""
        if not self._stepped_up:
            self._stepped_up = True
            self.progress.note(
                "note: the Brand answered a plain message with a step-up task "
                f"(TASK_STATE_AUTH_REQUIRED): the identity checks send messages such as "
                f"{GREETING!r} and need a reply, so the bot should ask for delegated scopes "
                "only for a message that needs the user's account (--ask sends one of those "
                "with --delegated)"
            )
        return " (a step-up task: the bot asked for delegated scopes)"

    def reply(
        self, response: HttpResponse, what: str, *, context_id: str | None = None
    ) -> dict[str, Any]:
        """A PACT reply: exactly `{"message"}`, ROLE_AGENT, parts exactly `[{"text"}]`, a
        messageId and a contextId (the given one), no taskId (pact-provider.md §2.5)."""
        expected = f'HTTP 200 with exactly {{"message": ...}} ({what})'
        if response.status != 200:
            raise Mismatch(expected, describe(response) + self.hint(response))
        body = self.a2a_json(response, what)
        if not isinstance(body, dict) or set(body) != {"message"}:
            raise Mismatch(expected, describe(response) + self.step_up_hint(body))
        message = body["message"]
        shape = (
            "a message with messageId, contextId, role ROLE_AGENT and parts exactly "
            f'[{{"text": ...}}], no taskId ({what})'
        )
        if (
            not identifies_agent_message(message)
            or "taskId" in message
            or not set(message) <= {"messageId", "contextId", "role", "parts", "metadata"}
        ):
            raise Mismatch(shape, describe(response))
        parts = message.get("parts")
        if (
            not isinstance(parts, list)
            or len(parts) != 1
            or not isinstance(parts[0], dict)
            or set(parts[0]) != {"text"}
            or not isinstance(parts[0]["text"], str)
        ):
            raise Mismatch(shape, f"parts {json.dumps(parts)[:BODY_SHOWN]}")
        if context_id is not None and message["contextId"] != context_id:
            raise Mismatch(
                f"the same contextId {context_id} ({what})", f"contextId {message['contextId']}"
            )
        return message

    def error(
        self, response: HttpResponse, reason: str, what: str, message: str | None = None
    ) -> None:
        """The A2A / AIP-193 envelope with exactly one ErrorInfo detail (PACT §6)."""
        status, rpc_status = A2A_REASONS[reason]
        said = f' "{message}"' if message is not None else ""
        expected = f"HTTP {status} {reason}{said} ({what})"
        if response.status != status:
            raise Mismatch(expected, describe(response) + self.hint(response))
        body = self.a2a_json(response, what)
        error = body.get("error") if isinstance(body, dict) else None
        detail = {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": A2A_ERROR_DOMAIN}
        if (
            not isinstance(body, dict)
            or set(body) != {"error"}
            or not isinstance(error, dict)
            or set(error) != {"code", "status", "message", "details"}
            or error["code"] != status
            or type(error["code"]) is not int
            or error["status"] != rpc_status
            or not isinstance(error["message"], str)
            or error["details"] != [detail]
        ):
            raise Mismatch(
                f"{expected}: {{error: {{code: {status}, status: {rpc_status}, message, "
                f"details: [exactly one ErrorInfo, reason {reason}, domain {A2A_ERROR_DOMAIN}]}}}}",
                describe(response),
            )
        if message is not None and error["message"] != message:
            raise Mismatch(expected, f"message {error['message']!r}")

    def bare(self, response: HttpResponse, statuses: tuple[int, ...], what: str) -> None:
        """A bare status (404/405...) with no A2A body (PACT §2.2)."""
        shown = "/".join(str(s) for s in statuses)
        expected = f"HTTP {shown} with no A2A body ({what})"
        if response.status not in statuses or says_a2a(response):
            raise Mismatch(expected, describe(response))

    def refused(self, response: HttpResponse, what: str) -> None:
        """The PACT 401 (§3.4): no A2A body, and the same challenge as for a missing token."""
        shown = self.challenge if self.challenge is not None else "no WWW-Authenticate"
        expected = f"HTTP 401, {shown} (as for a missing token), no A2A body ({what})"
        challenges = header_values(response, "www-authenticate")
        wanted = [] if self.challenge is None else [self.challenge]
        if response.status != 401 or challenges != wanted or says_a2a(response):
            raise Mismatch(expected, describe(response))

    def content_types(self) -> str:
        """The last check: every A2A answer recorded had exactly the A2A Content-Type."""
        wrong: dict[str, list[str]] = {}
        for what, value in self.a2a_answers:
            if value != A2A_CONTENT_TYPE:
                wrong.setdefault(repr(value) if value else "no Content-Type", []).append(what)
        if wrong:
            shown = "; ".join(
                f"{len(whats)} with {value} (first: {whats[0]})" for value, whats in wrong.items()
            )
            raise Mismatch(
                f"Content-Type: {A2A_CONTENT_TYPE} on all {len(self.a2a_answers)} A2A answers",
                shown,
            )
        return f"{len(self.a2a_answers)} A2A answers"


__all__ = [
    "Expect",
]
