"""10. Malformed bodies: bad JSON, a taskId, a raw part."""

from __future__ import annotations

import uuid

from pactmw.check._context import Checks
from pactmw.check.names import BAD_JSON, RAW_PART, TASK_ID
from pactmw.client.a2a import user_message
from pactmw.core.encoding import json_dumps


class MalformedChecks(Checks):
    """The malformed-body checks (with a valid token)."""

    def run(self) -> None:
        ctx = self.ctx
        ctx.check(
            BAD_JSON,
            "INVALID_PARAMS for a message:send body '{' (with a valid token)",
            self._bad_json,
        )
        ctx.check(
            TASK_ID,
            'TASK_NOT_FOUND "Task not found" for a message with a taskId (PACT §4.1)',
            self._task_id,
        )
        ctx.check(
            RAW_PART,
            'CONTENT_TYPE_NOT_SUPPORTED for a message whose only part is {"raw": "aGVsbG8="}',
            self._raw_part,
        )

    def _bad_json(self) -> None:
        self.expect.error(self.http.send(body=b"{"), "INVALID_PARAMS", "body '{'")

    def _task_id(self) -> None:
        message = user_message("With a task.", message_id=str(uuid.uuid4()))
        message["taskId"] = "pactmw-check-task"
        response = self.http.send(body=json_dumps({"message": message}))
        self.expect.error(response, "TASK_NOT_FOUND", "taskId", "Task not found")

    def _raw_part(self) -> None:
        message = user_message("ignored", message_id=str(uuid.uuid4()))
        message["parts"] = [{"raw": "aGVsbG8="}]
        response = self.http.send(body=json_dumps({"message": message}))
        self.expect.error(response, "CONTENT_TYPE_NOT_SUPPORTED", "raw part")


__all__ = [
    "MalformedChecks",
]
