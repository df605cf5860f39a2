"""`Checker`: runs the check groups in order over one shared `Context`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pactmw.check._auth import AuthChecks
from pactmw.check._card import CardChecks
from pactmw.check._context import Checks, Context, RunSettings
from pactmw.check._contexts import ContextChecks
from pactmw.check._delegated import DelegatedChecks
from pactmw.check._grant import GrantChecks
from pactmw.check._headers import HeaderChecks
from pactmw.check._malformed import MalformedChecks
from pactmw.check._messages import MessageChecks
from pactmw.check._progress import Progress
from pactmw.check._result import CheckResult
from pactmw.check._routes import RouteChecks
from pactmw.check._tasks import TaskChecks
from pactmw.check.names import CONTENT_TYPE
from pactmw.client import AgentSigner, SyncTransport
from pactmw.client.transport import Transport

DEFAULT_ASK = "Can you show my orders and my account?"

#: The Identity groups after the card, in the order they run.
IDENTITY_GROUPS: tuple[type[Checks], ...] = (
    MessageChecks,
    ContextChecks,
    TaskChecks,
    HeaderChecks,
    RouteChecks,
    AuthChecks,
    MalformedChecks,
)


class Checker:
    """Runs the checks against the Brand whose card is at `card_url`.

    `signer` signs as a personal agent the Provider registered; `audience` is the `aud` it
    assigned. `other_card_url` names a second Brand of the same Provider (cross-Brand
    isolation, one token for both). `delegated` adds the Delegated profile, which needs a
    person to approve at the Brand's login: `ask` is the message that should need delegated
    scopes (a step-up when sent without a token), `scopes` the scope ids to request (default:
    every scope on the card), `authorization_details` RFC 9396 entries to request with them
    (each of a type the Brand's metadata advertises), `approval_timeout` how long to wait for
    the person (default: until the device code expires). `report` is called with each result
    as it is known; `progress` shows long steps (and the login link) on stderr. `transport`
    defaults to a `SyncTransport` with `timeout` seconds per exchange.
    """

    def __init__(
        self,
        card_url: str,
        signer: AgentSigner,
        audience: str,
        *,
        other_card_url: str | None = None,
        delegated: bool = False,
        ask: str = DEFAULT_ASK,
        scopes: Sequence[str] = (),
        authorization_details: Sequence[Mapping[str, Any]] = (),
        approval_timeout: float | None = None,
        timeout: float = 10.0,
        transport: Transport | None = None,
        report: Callable[[CheckResult], None] | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.card_url = card_url
        self.delegated = delegated
        settings = RunSettings(
            card_url,
            signer,
            audience,
            other_card_url=other_card_url,
            ask=ask,
            scopes=tuple(scopes),
            authorization_details=tuple(authorization_details),
            approval_timeout=approval_timeout,
        )
        self.context = Context(
            settings,
            transport=transport or SyncTransport(timeout=timeout),
            report=report or (lambda result: None),
            progress=progress or Progress(None),
        )
        self.results = self.context.results

    def run(self) -> list[CheckResult]:
        """Run every check that applies; return the results in order."""
        ctx = self.context
        ctx.progress.note(f"checking {self.card_url}")
        if CardChecks(ctx).run():
            for group in IDENTITY_GROUPS:
                group(ctx).run()
            if self.delegated:
                delegated = DelegatedChecks(ctx)
                if delegated.run():
                    GrantChecks(ctx, delegated).run()
            ctx.check(
                CONTENT_TYPE,
                "Content-Type exactly application/a2a+json (no parameters) on the card and on "
                "every A2A answer",
                ctx.expect.content_types,
            )
        return self.results


__all__ = [
    "DEFAULT_ASK",
    "IDENTITY_GROUPS",
    "Checker",
]
