"""8. Unmatched routes: 404 or 405 before authentication, never an A2A body."""

from __future__ import annotations

from pactmw.check._context import Checks
from pactmw.check.names import UNMATCHED_ROUTES


class RouteChecks(Checks):
    """The unmatched-routes check."""

    def run(self) -> None:
        self.ctx.check(
            UNMATCHED_ROUTES,
            "without a token: exactly 404 for GET {interface}/unknown, 404 or 405 for wrong "
            "methods and non-A2A paths, none with an A2A body (routing before authentication)",
            self._unmatched,
        )

    def _unmatched(self) -> None:
        http, expect = self.http, self.expect
        response = http.call("GET", "unknown", auth=False)
        expect.bare(response, (404,), "GET unknown")
        for method, rest in (
            ("GET", "message:send"),
            ("DELETE", "message:send"),
            ("PUT", "message:send"),
            ("POST", "tasks"),
            ("GET", "tasks/x:cancel"),
            ("GET", "tasks/x:subscribe"),
            ("DELETE", "tasks/x/pushNotificationConfigs"),
            ("POST", "tasks/x/pushNotificationConfigs/c1"),
        ):
            response = http.call(method, rest, auth=False)
            expect.bare(response, (404, 405), f"{method} {rest}")


__all__ = [
    "RouteChecks",
]
