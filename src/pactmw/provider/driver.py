"""The two drivers of a Provider flow: one answers its needs with blocking calls, the other
with awaits (blocking store calls, key fetches and sync bots in worker threads).

The Provider's A2A routes, the authorization server and the guard every adapter uses are
flows over the same needs (`pactmw.provider.flow`), so they all run on these two functions.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, wait
from typing import Any

from pactmw.core.drive import LATER, adrive, drive
from pactmw.core.threads import WorkerThreads
from pactmw.protocols.identity import IdentityVerifier
from pactmw.provider._log_throttle import log_store_recovery
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.flow import (
    Need,
    NeedBody,
    NeedBot,
    NeedIdentity,
    NeedKeys,
    NeedPause,
    NeedStore,
    SubFlow,
    TurnTimedOut,
)

ReadBody = Callable[[int], "bytes | None"]
AReadBody = Callable[[int], Awaitable["bytes | None"]]
CurrentUser = Callable[[], "SignedInUser | None"]
ACurrentUser = Callable[[], Awaitable["SignedInUser | None"]]


def run(
    flow: SubFlow,
    verifier: IdentityVerifier,
    read_body: ReadBody,
    current_user: CurrentUser | None = None,
) -> Any:
    """Run `flow` with blocking I/O (a WSGI worker, a sync view)."""

    def answer(need: Need) -> Any:
        if isinstance(need, NeedStore):
            return _stored(need)
        if isinstance(need, NeedIdentity):
            return verifier.verify(need.authorization, brand=need.brand)
        if isinstance(need, NeedBody):
            return read_body(need.limit)
        if isinstance(need, NeedKeys):
            return need.fetch()
        if isinstance(need, NeedBot):
            return _blocking_answer(need)
        if isinstance(need, NeedPause):
            return time.sleep(need.seconds)
        return current_user() if current_user is not None else None

    return drive(flow, answer)


async def arun(
    flow: SubFlow,
    verifier: IdentityVerifier,
    read_body: AReadBody,
    current_user: CurrentUser | ACurrentUser | None = None,
    threads: WorkerThreads | None = None,
    *,
    defer_identity: bool = False,
) -> Any:
    """Run `flow` on the event loop; blocking needs go to one worker thread in a row.

    With `threads`, the hand-offs go to that pool (cheaper than `asyncio.to_thread`).

    With `defer_identity`, a cached token of a configured agent is answered at once and the
    store read of the agent's runtime switch (`IdentityVerifier.provisional`) waits for the
    flow's first hop, which does it before anything else: one hop per request instead of
    two. Until it has passed, the flow only reads and parses the request: any other need,
    and the flow's end (a response or an error), first runs it, and a refusal then replaces
    whatever the flow would have done. Only for flows that do not catch the identity
    refusal themselves (the Provider's; not an optional guard).
    """
    pending: list[Callable[[], None]] = []  # the confirmation still owed, if any

    async def confirm_first() -> None:
        if pending:
            confirm = pending.pop()
            try:
                await hop(confirm)
            except Exception as exc:
                # Out of the driver, never into the flow, which might catch it (as when the
                # read runs at the start of a hop): the flow's `except` clauses guard its
                # own steps, not the caller's identity.
                raise _Refused(exc) from None

    def answer_now(need: Need) -> Any:
        # What takes no waiting is answered without a coroutine (`adrive`'s `answer_now`):
        # on memory:// a `message:send` is answered here but for its body and its bot.
        if pending:  # an owed confirmation runs first, in `answer`
            return LATER
        kind = type(need)
        if kind is NeedStore:  # a store that never blocks (is_blocking)
            return _stored(need)  # type: ignore[arg-type]
        if kind is NeedIdentity:
            authorization, brand = need.authorization, need.brand  # type: ignore[union-attr]
            if defer_identity:
                found = verifier.provisional(authorization, brand=brand)
                if found is not None:
                    caller, confirm = found
                    pending.append(confirm)
                    return caller
            known = verifier.cached(authorization, brand=brand)
            return LATER if known is None else known
        return LATER

    async def answer(need: Need) -> Any:
        if isinstance(need, NeedBody):
            return await read_body(need.limit)
        if pending:  # `answer_now` left every need here until the confirmation has run
            await confirm_first()
            value = answer_now(need)  # each need is offered to it once with nothing owed
            if value is not LATER:
                return value
        # A store call and a shortcut for the caller were `answer_now`'s to take.
        if isinstance(need, NeedIdentity):
            return await verifier.averify(need.authorization, brand=need.brand)
        if isinstance(need, NeedBot):  # an async bot (sync ones are blocking)
            answer = need.handler(need.turn)
            if need.timeout is None:
                return await answer  # type: ignore[misc]
            # Not wait_for: a TimeoutError the bot raises itself is a bot failure, not this.
            task = asyncio.ensure_future(answer)  # type: ignore[arg-type]
            finished, _ = await asyncio.wait({task}, timeout=need.timeout)
            if not finished:
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)  # let the cancellation land
                raise TurnTimedOut(need.timeout)
            return task.result()
        if isinstance(need, NeedPause):  # on the loop: a waiting request holds no thread
            return await asyncio.sleep(need.seconds)
        if current_user is None:
            return None
        user = current_user()
        return (await user) if inspect.isawaitable(user) else user

    def confirmed_hop(fn: Callable[..., Any], /, *args: Any) -> Awaitable[Any]:
        # The owed confirmation runs first in the same hop; its refusal leaves the flow
        # where it is and propagates out of the driver (the flow never sees it). Not a
        # coroutine itself: `adrive` awaits the hop's own, one frame fewer to suspend and
        # resume on every hop.
        if pending:
            return hop(_confirm_then, pending.pop(), fn, args)
        return hop(fn, *args)

    hop: Callable[..., Awaitable[Any]] = asyncio.to_thread if threads is None else threads.run
    try:
        try:
            result = await adrive(
                flow,
                answer,
                blocking=is_blocking,
                answer_blocking=_blocking_answer,
                hop=confirmed_hop,
                answer_now=answer_now,
            )
        except Exception:
            await confirm_first()  # a refusal of the caller wins over the flow's own error
            raise
        await confirm_first()
    except _Refused as refused:
        raise refused.error from None
    finally:
        flow.close()  # a flow left at a yield by a refusal runs its `finally` clauses now
    return result


class _Refused(BaseException):
    """The owed identity read failed: carried past `adrive`, which catches `Exception`."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def _confirm_then(
    confirm: Callable[[], None], fn: Callable[..., Any], args: tuple[Any, ...]
) -> Any:
    confirm()
    return fn(*args)


def no_body(limit: int) -> bytes | None:
    """The body reader of a flow that reads no body (a delegation check)."""
    return b""


async def ano_body(limit: int) -> bytes | None:
    """Async `no_body`."""
    return b""


def is_blocking(need: Need) -> bool:
    """Needs answered by blocking calls (a worker thread in the async driver).

    A store operation of a store that says it never blocks (`may_block = False`: the memory
    store) is answered on the event loop: a thread hop would cost more than the call.
    """
    kind = type(need)  # the need classes are final: one identity test instead of isinstance
    if kind is NeedStore:
        operation = need.operation  # type: ignore[union-attr]
        return getattr(getattr(operation, "__self__", None), "may_block", True) is not False
    if kind is NeedBot:
        return not inspect.iscoroutinefunction(need.handler)  # type: ignore[union-attr]
    return kind is NeedKeys


def _stored(need: NeedStore) -> Any:
    """The answer of a store call; one that works ends a store outage the log reported, with
    one line (`log_store_recovery`: a dict's truth test when there was none)."""
    result = need.operation(**need.kwargs)
    log_store_recovery()
    return result


def _blocking_answer(need: Need) -> Any:
    if isinstance(need, NeedStore):
        return _stored(need)
    if isinstance(need, NeedKeys):
        return need.fetch()
    assert isinstance(need, NeedBot)
    if need.timeout is not None:
        return _bot_with_timeout(need, need.timeout)
    answer = need.handler(need.turn)
    return _run_coroutine(answer) if inspect.isawaitable(answer) else answer


def _bot_with_timeout(need: NeedBot, timeout: float) -> Any:
    """Run a bot in a thread of its own and wait at most `timeout` seconds for it.

    A thread, because a blocking bot cannot be interrupted where it runs: past the timeout
    the request goes on without it (`TurnTimedOut`) and the thread finishes unobserved. It
    runs in a copy of the caller's context, so context variables (Flask's request context)
    still hold there; thread-locals (Django's database connections) are the thread's own.
    """
    done: Future[Any] = Future()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            answer = context.run(need.handler, need.turn)
            if inspect.isawaitable(answer):
                answer = _run_coroutine(answer)
        except BaseException as exc:  # handed to the request thread, which decides
            done.set_exception(exc)
        else:
            done.set_result(answer)

    threading.Thread(target=work, name="pactmw-turn", daemon=True).start()
    # wait(), not result(timeout): a TimeoutError the bot raises itself is a bot failure.
    if not wait([done], timeout).done:
        raise TurnTimedOut(timeout)
    return done.result()


def _run_coroutine(awaitable: Any) -> Any:
    """Run an async bot from the sync driver (a WSGI worker thread has no running loop)."""

    async def wrapper() -> Any:
        return await awaitable

    return asyncio.run(wrapper())


__all__ = [
    "ACurrentUser",
    "AReadBody",
    "CurrentUser",
    "ReadBody",
    "ano_body",
    "arun",
    "is_blocking",
    "no_body",
    "run",
]
