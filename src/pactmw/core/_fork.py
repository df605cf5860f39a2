"""Connections, locks and threads that a forked child must not take over from its parent.

A preloading server (`gunicorn --preload`, and any app that forks after building its
Provider) opens the store and builds the Provider in the parent, then forks the workers:
each child starts with a copy of the store's connections, of every lock and of the
bookkeeping of every background thread, but with only the thread that forked. A connection
used by two processes breaks: sqlite forbids it (its file locks belong to the process that
took them), and one PostgreSQL socket would carry both processes' traffic. A lock some
other thread held at the fork stays held for ever in the child, and a list of work in
progress names work the child will never finish. The store has connections, locks and a
watchdog thread; the Provider and its verifiers have locks (caches, the rate limiter,
replay memories) and background threads (the lease renewer, the receipt filer, worker
threads). One hook serves them all, so it lives in core, which every layer may import.

So each object that owns such things registers here. Just before a fork, in the parent,
`_forking` may make it safe to copy (the sqlite store waits for its operation in progress
and closes its connection); right after it, `_forked` runs in the parent and in the child
(one thread there, nothing else running yet), where the object forgets what was the
parent's: it takes fresh locks, opens its own connections when it first needs one, and
starts its background thread again on demand, as if none had ever run. The hook does this
once per fork, so no hot path compares process ids. What a child inherits is never closed
from the child: closing runs the driver's goodbye on a connection the parent may still use.

A cache or a count keeps what it held at the fork (a warm cache is what preloading is for)
and takes a fresh lock in the child. A thread that held the old one may have been half-way
through an update; each dict operation is whole under the GIL, so the worst left is one
entry missing, which a cache or a count tolerates.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["Forkable", "reset_at_fork"]


class Forkable(Protocol):
    """An object holding what a forked child must not use (see the module docstring)."""

    def _forking(self) -> None:
        """Called in the parent just before a fork."""

    def _forked(self, *, child: bool) -> None:
        """Called right after a fork, in the parent and in the child (`child`)."""


# Weak, so a registered object that is dropped is forgotten (stores are opened by the
# thousand in tests). One hook for all of them, since a registered hook is never removed.
_REGISTERED: weakref.WeakSet[Forkable] = weakref.WeakSet()
# Those whose `_forking` ran, held until their `_forked`: each gets both, or neither.
_FORKING: list[Forkable] = []


def reset_at_fork(obj: Forkable) -> None:
    """Call `obj._forking()` and `obj._forked(...)` around every fork from now on, while
    `obj` lives."""
    _REGISTERED.add(obj)


def _before() -> None:
    _FORKING[:] = list(_REGISTERED)
    for obj in _FORKING:
        obj._forking()


def _after(child: bool) -> None:
    objs, _FORKING[:] = list(_FORKING), []
    for obj in objs:
        obj._forked(child=child)


if hasattr(os, "register_at_fork"):  # Windows has no fork
    os.register_at_fork(
        before=_before,
        after_in_parent=lambda: _after(child=False),
        after_in_child=lambda: _after(child=True),
    )
