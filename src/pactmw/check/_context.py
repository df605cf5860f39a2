"""What the check groups share: the run's settings, its HTTP side and expectations, what the
checks found so far, and the running of one check."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

from pactmw.check._expect import Expect
from pactmw.check._http import Http
from pactmw.check._progress import Progress
from pactmw.check._result import CheckResult, Mismatch
from pactmw.client import AgentCard, AgentSigner
from pactmw.client.transport import Transport


@frozen
class RunSettings:
    """What one run was asked to do, as `Checker` was given it (see there); the same for
    every check of the run, apart from what the checks find (`Context`)."""

    card_url: str
    signer: AgentSigner
    audience: str
    other_card_url: str | None
    ask: str
    scopes: tuple[str, ...]
    authorization_details: tuple[Mapping[str, Any], ...]
    approval_timeout: float | None


class Context:
    """One run with `settings` against the Brand whose card is at `settings.card_url`.
    `check` runs one check and records its result; the groups fill in what later checks
    need (the card, the identity scheme, a conversation of the user's)."""

    def __init__(
        self,
        settings: RunSettings,
        *,
        transport: Transport,
        report: Callable[[CheckResult], None],
        progress: Progress,
    ) -> None:
        self.settings = settings
        self.report = report
        self.progress = progress
        self.results: list[CheckResult] = []
        #: Fresh per run, so runs against the same Provider never share users or contexts.
        self.run_id = uuid.uuid4().hex[:8]
        self.sub = f"pactmw-check-{self.run_id}-a"
        self.other_sub = f"pactmw-check-{self.run_id}-b"
        self.delegated_sub = f"pactmw-check-{self.run_id}-d"
        self.http = Http(
            transport, settings.signer, settings.audience, sub=self.sub, progress=progress
        )
        self.expect = Expect(progress)
        # Filled as the checks go.
        self.card: AgentCard | None = None
        self.identity_scheme: str | None = None
        #: A conversation of the user's (`sub`), once one was opened.
        self.context_id: str | None = None

    @property
    def interface(self) -> str:
        """The Brand's interface URL (once the card is read)."""
        return self.http.interface

    def unknown_interface(self) -> str:
        """The interface URL of a Brand the Provider does not have."""
        return self.interface.rsplit("/", 1)[0] + f"/pactmw-check-no-such-brand-{self.run_id}"

    def check(self, name: str, expected: str, check: Callable[[], str | None]) -> bool:
        """Run one check, record and report its result, say whether it passed."""
        try:
            actual = check() or "as expected"
            result = CheckResult(name, True, expected, actual)
        except Mismatch as exc:
            result = CheckResult(name, False, exc.expected, exc.actual)
        except Exception as exc:  # ClientError, or a surprise: it must not hide other checks
            result = CheckResult(name, False, expected, f"{type(exc).__name__}: {exc}")
        self.results.append(result)
        self.report(result)
        return result.passed


class Checks:
    """A group of checks over the shared `Context`; `run` runs them in order."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.http = ctx.http
        self.expect = ctx.expect

    def run(self) -> object:
        """Run the group's checks in order."""
        raise NotImplementedError


__all__ = [
    "Checks",
    "Context",
    "RunSettings",
]
