"""7. Header tolerance: A2A-Version missing or unknown, and request Content-Type variants."""

from __future__ import annotations

from pactmw.check._context import Checks
from pactmw.check._result import Mismatch
from pactmw.check._wire import describe
from pactmw.check.names import CONTENT_TYPE_TOLERANCE, VERSION_TOLERANCE


class HeaderChecks(Checks):
    """The header-tolerance checks."""

    def run(self) -> None:
        self.ctx.check(
            VERSION_TOLERANCE,
            "a reply with no A2A-Version header and with A2A-Version: 2.0 (the header is "
            "ignored; never VERSION_NOT_SUPPORTED)",
            self._versions,
        )
        self.ctx.check(
            CONTENT_TYPE_TOLERANCE,
            "a reply with request Content-Type application/json, application/a2a+json and "
            "text/plain (the body is read as JSON regardless)",
            self._content_types,
        )

    def _versions(self) -> None:
        http, expect = self.http, self.expect
        for label, value in (("no A2A-Version", None), ("A2A-Version: 2.0", "2.0")):
            response = http.send("Which version?", headers={"A2A-Version": value})
            expect.reply(response, label)
        response = http.call("GET", "tasks", headers={"A2A-Version": "2.0"})
        if response.status != 200:
            raise Mismatch("HTTP 200 for GET tasks with A2A-Version: 2.0", describe(response))
        expect.a2a_json(response, "GET tasks with A2A-Version: 2.0")

    def _content_types(self) -> None:
        for value in ("application/json", "application/a2a+json", "text/plain"):
            response = self.http.send("Any content type.", headers={"Content-Type": value})
            self.expect.reply(response, f"Content-Type {value}")


__all__ = [
    "HeaderChecks",
]
