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

from attrs import frozen

Need = TypeVar("Need")
T = TypeVar("T")

#: The exceptions an answer may raise that are thrown into the flow (others propagate).
Catch = tuple[type[BaseException], ...]


@frozen
class Pending:
    """The flow is waiting for `need` to be answered."""

    need: Any


@frozen
class Done:
    """The flow returned `value`."""

    value: Any


def advance(
    flow: Generator[Any, Any, Any], answer: Any, error: BaseException | None
) -> Pending | Done:
    """Resume `flow` with an answer (or throw `error` into it): a `Pending` or a `Done`."""
    try:
        need = flow.throw(error) if error is not None else flow.send(answer)
    except StopIteration as done:
        return Done(done.value)
    return Pending(need)


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
) -> T:
    """Run `flow` to its value, awaiting `answer(need)` for each need.

    With `blocking` and `answer_blocking`, a need for which `blocking(need)` is true is
    answered by `answer_blocking` in a worker thread, and so is every blocking need right
    after it: a request that makes several store calls in a row hops threads once, not once
    per call (the hop, not the work, is what a thread costs). `hop(fn, *args)` runs the
    blocking part in a thread: `asyncio.to_thread` unless the caller holds a cheaper pool
    (`pactmw.core.threads.WorkerThreads.run`).
    """
    step = advance(flow, None, None)
    while isinstance(step, Pending):
        need = step.need
        if blocking is not None and answer_blocking is not None and blocking(need):
            step = await hop(_run_blocking, flow, need, answer_blocking, blocking, catch)
            continue
        try:
            value = await answer(need)
        except catch as exc:
            step = advance(flow, None, exc)
        else:
            step = advance(flow, value, None)
    result: T = step.value
    return result


def _run_blocking(
    flow: Generator[Any, Any, Any],
    need: Any,
    answer: Callable[[Any], Any],
    blocking: Callable[[Any], bool],
    catch: Catch,
) -> Pending | Done:
    """Answer blocking needs in this (worker) thread until the flow needs something else."""
    while True:
        try:
            value = answer(need)
        except catch as exc:
            step = advance(flow, None, exc)
        else:
            step = advance(flow, value, None)
        if isinstance(step, Done) or not blocking(step.need):
            return step
        need = step.need


__all__ = ["Catch", "Done", "Pending", "adrive", "advance", "drive"]
