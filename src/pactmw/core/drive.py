"""Run a sans-I/O flow: the one send/throw loop behind every sync and async driver.

A flow is a generator that yields what it needs done (fetch keys, read the body, call the
store) and receives the answer; `drive` answers with blocking calls, `adrive` with awaits.
An exception raised while answering is thrown into the flow at the `yield`, so the flow
handles I/O failures where it asked for the I/O (or lets them propagate). This is how the
identity verifier, the Parafé verifier, the Provider, the guard and the client are each
written once for sync and async callers (httpx's auth flows and h11 are the model).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

Need = TypeVar("Need")
T = TypeVar("T")

#: The exceptions an answer may raise that are thrown into the flow (others propagate).
Catch = tuple[type[BaseException], ...]


class _Later:
    """The type of `LATER`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "LATER"


#: What `adrive`'s `answer_now` returns for a need it leaves to `answer`.
LATER: Any = _Later()


def drive(
    flow: Generator[Need, Any, T],
    answer: Callable[[Need], Any],
    *,
    catch: Catch = (Exception,),
) -> T:
    """Run `flow` to its value, answering each need with the blocking `answer(need)`."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            need = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as done:
            result: T = done.value
            return result
        value, error = None, None
        try:
            value = answer(need)
        except catch as exc:
            error = exc


async def adrive(
    flow: Generator[Need, Any, T],
    answer: Callable[[Need], Awaitable[Any]],
    *,
    catch: Catch = (Exception,),
    blocking: Callable[[Need], bool] | None = None,
    answer_blocking: Callable[[Need], Any] | None = None,
    hop: Callable[..., Awaitable[Any]] = asyncio.to_thread,
    answer_now: Callable[[Need], Any] | None = None,
) -> T:
    """Run `flow` to its value, awaiting `answer(need)` for each need.

    With `answer_now`, a need is first offered to `answer_now(need)`, which answers at once
    what takes no waiting (a memory store's call, a cached token) or returns `LATER` for
    `answer` to await: no coroutine is made for an answer that never suspends. What it
    raises is thrown into the flow, as what `answer` raises is.

    With `blocking` and `answer_blocking`, a need for which `blocking(need)` is true is
    answered by `answer_blocking` in a worker thread, and so is every blocking need right
    after it: a request that makes several store calls in a row hops threads once, not once
    per call (the hop, not the work, is what a thread costs). `hop(fn, *args)` runs the
    blocking part in a thread: `asyncio.to_thread` unless the caller holds a cheaper pool
    (`pactmw.core.threads.WorkerThreads.run`).
    """
    # The loop is every request's hot path: no value is allocated per step (a step object
    # per need was 2% of a `message:send` under load), and the generator's own `send` and
    # `throw` are called directly.
    send, throw = flow.send, flow.throw
    blocks = blocking if answer_blocking is not None else None
    try:
        need = send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    while True:
        if blocks is not None and blocks(need):
            finished, need = await hop(_run_blocking, flow, need, answer_blocking, blocking, catch)
            if finished:
                result = need
                return result
            continue
        try:
            value = LATER if answer_now is None else answer_now(need)
            if value is LATER:
                value = await answer(need)
        except catch as exc:
            try:
                need = throw(exc)
            except StopIteration as done:
                result = done.value
                return result
        else:
            try:
                need = send(value)
            except StopIteration as done:
                result = done.value
                return result


def _run_blocking(
    flow: Generator[Any, Any, Any],
    need: Any,
    answer: Callable[[Any], Any],
    blocking: Callable[[Any], bool],
    catch: Catch,
) -> tuple[bool, Any]:
    """Answer blocking needs in this (worker) thread until the flow needs something else:
    `(True, value)` when the flow returned, `(False, need)` for its next, non-blocking need."""
    while True:
        try:
            value = answer(need)
        except catch as exc:
            try:
                need = flow.throw(exc)
            except StopIteration as done:
                return True, done.value
        else:
            try:
                need = flow.send(value)
            except StopIteration as done:
                return True, done.value
        if not blocking(need):
            return False, need


__all__ = ["LATER", "Catch", "adrive", "drive"]
