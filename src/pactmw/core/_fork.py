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

So each object that owns such things registers here, in one of three ways. One that must
be quiet while the process forks (`hold_across_fork`: the sqlite and memory stores) waits
in the parent for its operation in progress and holds its lock across the fork (sqlite
closes its connection too); the lock is released on both sides after it. In the child (one
thread there, nothing else running yet) an object forgets what was the parent's
(`reset_in_child`): it takes fresh locks, opens its own connections when it first needs
one, and starts its background thread again on demand, as if none had ever run; one that
only has a lock gets a fresh one (`fresh_lock_in_child`). The hook does this
once per fork, so no hot path compares process ids. What a child inherits is never closed
from the child: closing runs the driver's goodbye on a connection the parent may still use.

A cache or a count keeps what it held at the fork (a warm cache is what preloading is for)
and takes a fresh lock in the child. A thread that held the old one may have been half-way
through an update; each dict operation is whole under the GIL, so the worst left is one
entry missing, which a cache or a count tolerates.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol

__all__ = [
    "HeldAcrossFork",
    "ResetInChild",
    "fresh_lock_in_child",
    "hold_across_fork",
    "reset_in_child",
]


class ResetInChild(Protocol):
    """An object that forgets, in a forked child, what was the parent's (`reset_in_child`)."""

    def _reset_in_child(self) -> None:
        """Called in the child right after a fork (one thread there, nothing else running)."""


class HeldAcrossFork(Protocol):
    """An object that must be quiet while the process forks (`hold_across_fork`)."""

    def _forking(self) -> None:
        """Called in the parent just before a fork (takes what `_forked` gives back)."""

    def _forked(self) -> None:
        """Called right after a fork, in the parent and in the child alike."""


# All weak, so a registered object that is dropped is forgotten (stores are opened by the
# thousand in tests). One hook for all of them, since a registered hook is never removed.
_HELD: weakref.WeakSet[HeldAcrossFork] = weakref.WeakSet()
_RESET: weakref.WeakSet[ResetInChild] = weakref.WeakSet()
_LOCKS: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
# Those whose `_forking` ran, held until their `_forked`: each gets both, or neither.
_FORKING: list[HeldAcrossFork] = []


def hold_across_fork(obj: HeldAcrossFork) -> None:
    """Call `obj._forking()` before and `obj._forked()` after every fork from now on (in the
    parent and the child), while `obj` lives."""
    _HELD.add(obj)


def reset_in_child(obj: ResetInChild) -> None:
    """Call `obj._reset_in_child()` in every child forked from now on, while `obj` lives."""
    _RESET.add(obj)


def fresh_lock_in_child(obj: object, attribute: str = "_lock") -> None:
    """Give `obj` a new `threading.Lock()` as `attribute` in every child forked from now on,
    while `obj` lives: all a cache or a count needs (see the module docstring)."""
    _LOCKS[obj] = attribute


def _before() -> None:
    _FORKING[:] = list(_HELD)
    for obj in _FORKING:
        obj._forking()


def _after() -> None:
    held, _FORKING[:] = list(_FORKING), []
    for obj in held:
        obj._forked()


def _after_in_child() -> None:
    _after()
    for locked, attribute in list(_LOCKS.items()):
        setattr(locked, attribute, threading.Lock())
    for obj in list(_RESET):
        obj._reset_in_child()


if hasattr(os, "register_at_fork"):  # Windows has no fork
    os.register_at_fork(before=_before, after_in_parent=_after, after_in_child=_after_in_child)
