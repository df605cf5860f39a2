"""What a Provider flow asks its driver to do; shared by the A2A routes and the
authorization server so both are written once for the sync and the async drivers.

The need classes are final: the async driver tells them apart by `type(need) is ...`, one
identity test on every request's path instead of an `isinstance` chain."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, final

from attrs import frozen

from pactmw.config import ConfigError
from pactmw.core.errors import PactmwError
from pactmw.core.http import Response
from pactmw.provider.brand import Turn, TurnHandler


@final
@frozen
class NeedIdentity:
    """Verify this `Authorization` header; the answer is a `PersonalAgent`. `brand` names
    the Brand in the log line of a refusal."""

    authorization: str | None
    brand: str | None = None


@final
@frozen
class NeedBody:
    """Read the request body up to `limit` bytes; the answer is bytes, or None if longer."""

    limit: int


@final
@frozen
class NeedStore:
    """Call a (blocking) store operation; the answer is its result."""

    operation: Callable[..., Any]
    kwargs: dict[str, Any]


@final
@frozen
class NeedBot:
    """Run the Brand's turn handler (sync or async); the answer is what it returned.

    With a `timeout` (seconds), a driver stops waiting for the handler after it and throws
    `TurnTimedOut` into the flow instead: an async handler is cancelled, a sync one runs on
    in its thread and its answer is dropped (Python cannot stop a thread).
    """

    handler: TurnHandler
    turn: Turn
    timeout: float | None = None


class TurnTimedOut(PactmwError):
    """The turn handler did not answer within its `NeedBot.timeout`."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"the turn handler did not answer within {timeout:g} s")
        self.timeout = timeout


@final
@frozen
class NeedKeys:
    """Fetch the keys of a JWKS URI for (`kid`, `alg`) (blocking); the answer is the keys."""

    fetch: Callable[[], Any]


@final
@frozen
class NeedPause:
    """Wait `seconds` before going on (a sleep, or an `asyncio.sleep` that holds no thread)."""

    seconds: float


@final
@frozen
class NeedUser:
    """Who is signed in to the host app (same-app consent); the answer is a `SignedInUser`
    or None. Adapters answer it from `request.user`, Flask-Login or a configured callable."""


class HostAppUnready(ConfigError):
    """What an adapter throws into the flow for `NeedUser` when the host app lacks what its
    `current_user` reads (Starlette's `request.session` without `SessionMiddleware`): a
    misconfiguration of the app (a `ConfigError`), not a failure of the page. `message`
    names what is missing and where to add it; the consent pages answer 503 and log it at
    ERROR unless `said_before` (the adapter keeps that count: once per app and cause)."""

    def __init__(self, message: str, *, said_before: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.said_before = said_before


Need = NeedIdentity | NeedBody | NeedStore | NeedBot | NeedKeys | NeedPause | NeedUser
Flow = Generator[Need, Any, Response]
#: A part of a flow whose value is not a response (a verified delegation, a record, ...).
SubFlow = Generator[Need, Any, Any]


def store(operation: Callable[..., Any], **kwargs: Any) -> NeedStore:
    """Shorthand: `result = yield store(self.store.get_grant, grant_id=...)`."""
    return NeedStore(operation, kwargs)


__all__ = [
    "Flow",
    "HostAppUnready",
    "Need",
    "NeedBody",
    "NeedBot",
    "NeedIdentity",
    "NeedKeys",
    "NeedPause",
    "NeedStore",
    "NeedUser",
    "SubFlow",
    "TurnTimedOut",
    "store",
]
