"""5-6. Tasks (ListTasks, page sizes, GetTask and CancelTask) and the operations a Provider
does not support unless its card claims them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from pactmw.check._context import Checks
from pactmw.check._result import Mismatch
from pactmw.check._wire import describe
from pactmw.check.names import (
    BAD_PAGE_SIZES,
    EXTENDED_CARD,
    LIST_TASKS,
    PAGE_SIZES,
    PUSH_CONFIGS,
    STREAMING,
    TASK_ROUTES,
)
from pactmw.client.a2a import user_message
from pactmw.core.encoding import json_dumps


class TaskChecks(Checks):
    """The task checks, then the unsupported operations the card does not claim (those it
    claims are skipped, with a note)."""

    def run(self) -> None:
        ctx = self.ctx
        ctx.check(
            LIST_TASKS,
            'GET tasks: HTTP 200 exactly {"tasks":[],"nextPageToken":"","pageSize":50,'
            '"totalSize":0}',
            self._list_tasks,
        )
        ctx.check(
            PAGE_SIZES, "GET tasks?pageSize=1 and =100 echo pageSize 1 and 100", self._page_sizes
        )
        ctx.check(
            BAD_PAGE_SIZES,
            "INVALID_PARAMS for pageSize 0, 101, 1.5 and pageSize given twice",
            self._bad_page_sizes,
        )
        ctx.check(
            TASK_ROUTES,
            "TASK_NOT_FOUND for GET tasks/{id} and POST tasks/{id}:cancel (PACT §2.2)",
            self._task_routes,
        )
        assert ctx.card is not None
        capabilities = ctx.card.capabilities
        skipped: list[str] = []
        for capability, name, expected, check in self._unsupported():
            if capabilities.get(capability) is not True:
                ctx.check(name, expected, check)
            else:
                skipped.append(f"{name} (the card claims {capability})")
        for line in skipped:
            ctx.progress.note(f"skipped: {line}")

    def _unsupported(self) -> tuple[tuple[str, str, str, Callable[[], None]], ...]:
        """(capability, check name, expected, check): each runs unless the card claims it."""
        return (
            (
                "streaming",
                STREAMING,
                "UNSUPPORTED_OPERATION for POST message:stream and POST tasks/{id}:subscribe "
                "(the card does not claim streaming)",
                self._streaming,
            ),
            (
                "extendedAgentCard",
                EXTENDED_CARD,
                "UNSUPPORTED_OPERATION for GET extendedAgentCard (the card does not claim it)",
                self._extended_card,
            ),
            (
                "pushNotifications",
                PUSH_CONFIGS,
                "PUSH_NOTIFICATION_NOT_SUPPORTED for GET/POST tasks/{id}/pushNotificationConfigs "
                "and GET/DELETE .../{configId} (the card does not claim push notifications)",
                self._push_configs,
            ),
        )

    def _list_tasks(self) -> None:
        response = self.http.call("GET", "tasks")
        wanted: dict[str, Any] = {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}
        if response.status != 200:
            raise Mismatch(
                "HTTP 200 for GET tasks", describe(response) + self.expect.hint(response)
            )
        body = self.expect.a2a_json(response, "GET tasks")
        if (
            body != wanted
            or type(body.get("pageSize")) is not int
            or type(body.get("totalSize")) is not int
        ):
            raise Mismatch(json.dumps(wanted, separators=(",", ":")), describe(response))

    def _page_sizes(self) -> None:
        for size in (1, 100):
            response = self.http.call("GET", f"tasks?pageSize={size}")
            wanted: dict[str, Any] = {
                "tasks": [],
                "nextPageToken": "",
                "pageSize": size,
                "totalSize": 0,
            }
            if response.status != 200:
                raise Mismatch(f"HTTP 200 for pageSize={size}", describe(response))
            body = self.expect.a2a_json(response, f"GET tasks?pageSize={size}")
            if body != wanted or type(body.get("pageSize")) is not int:
                raise Mismatch(json.dumps(wanted, separators=(",", ":")), describe(response))

    def _bad_page_sizes(self) -> None:
        for query in ("pageSize=0", "pageSize=101", "pageSize=1.5", "pageSize=5&pageSize=5"):
            response = self.http.call("GET", f"tasks?{query}")
            self.expect.error(response, "INVALID_PARAMS", f"GET tasks?{query}")

    def _task_routes(self) -> None:
        http, expect = self.http, self.expect
        task = "pactmw-check-task"
        expect.error(http.call("GET", f"tasks/{task}"), "TASK_NOT_FOUND", "GetTask")
        response = http.call("POST", f"tasks/{task}:cancel", body=b"{}")
        expect.error(response, "TASK_NOT_FOUND", "CancelTask")

    def _streaming(self) -> None:
        body = json_dumps({"message": user_message("Stream?", message_id=str(uuid.uuid4()))})
        for rest in ("message:stream", "tasks/pactmw-check-task:subscribe"):
            response = self.http.call("POST", rest, body=body)
            self.expect.error(response, "UNSUPPORTED_OPERATION", f"POST {rest}")

    def _extended_card(self) -> None:
        response = self.http.call("GET", "extendedAgentCard")
        self.expect.error(response, "UNSUPPORTED_OPERATION", "GET extendedAgentCard")

    def _push_configs(self) -> None:
        base = "tasks/pactmw-check-task/pushNotificationConfigs"
        for method, rest in (("GET", base), ("POST", base), ("GET", base + "/c1"),
                             ("DELETE", base + "/c1")):  # fmt: skip
            response = self.http.call(method, rest, body=b"{}" if method == "POST" else b"")
            self.expect.error(response, "PUSH_NOTIFICATION_NOT_SUPPORTED", f"{method} {rest}")


__all__ = [
    "TaskChecks",
]
