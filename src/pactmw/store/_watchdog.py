"""A deadline for a database connection's round trips: past it, the connection is cut.

A server that stops answering (a frozen VM, a stopped backend process, a network that drops
packets without a reset) leaves a client blocked in a socket read for ever. The server's own
timeouts (`lock_timeout`, `statement_timeout`) cannot help, as the server does not run;
asking it to cancel (`conn.cancel_safe()`) waits on the same silent server; TCP keepalives
and `tcp_user_timeout` see nothing wrong while the peer's kernel still acknowledges. What
wakes the blocked read is the client's own: `shutdown()` on the connection's socket, from
another thread. The driver then fails the read with its own "server closed the connection"
error and marks the connection broken, so it is never used again.

One thread per `Watchdog` serves every connection it watches (a `threading.Timer` per
transaction would start a thread per round trip). Arming and disarming take one lock and
touch one dict: watches share one timeout, so the dict's insertion order is deadline order
and the thread only ever looks at the first entry. The thread starts on demand and ends
after a minute with nothing to watch, so a store nobody closes leaves no thread behind.

In a forked child the watches armed at the fork are the parent's, over sockets both processes
share: cutting one would cut the parent's connection. The child forgets them, and its lock,
and starts a thread of its own at its first watch (core/_fork.py).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from typing import Protocol

from pactmw.core import _fork

__all__ = ["Watch", "Watchdog"]

# How long the thread waits with nothing to watch before it ends (the next watch starts a
# new one). A thread start is negligible next to a minute of traffic.
_IDLE_EXIT = 60.0


class _Socketed(Protocol):
    """A connection whose socket's file descriptor `fileno()` gives (a psycopg Connection)."""

    def fileno(self) -> int: ...


class Watch:
    """One connection under a deadline while the `with` block runs; see `Watchdog.watch`.

    `fired` says whether the deadline passed and the connection was cut: read it after the
    block (or in an `except` around it) to tell a cut from any other failure. A watch may
    be armed again, each time with a fresh deadline.
    """

    __slots__ = ("_conn", "_dog", "fired")

    def __init__(self, dog: Watchdog, conn: _Socketed) -> None:
        self._dog = dog
        self._conn = conn
        self.fired = False

    def __enter__(self) -> Watch:
        self._dog._arm(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._dog._disarm(self)

    def _cut(self) -> None:
        self.fired = True
        try:
            # A duplicate of the descriptor: shutdown acts on the socket both share, and
            # closing the duplicate leaves the driver's descriptor to the driver.
            fd = os.dup(self._conn.fileno())
        except Exception:  # closed meanwhile (the driver's own error): nothing to wake
            return
        with socket.socket(fileno=fd) as sock, contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # OSError: the peer is gone already


class Watchdog:
    """Cuts the connection of a `Watch` still armed `timeout` seconds after it was armed."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._cond = threading.Condition(threading.Lock())
        self._armed: dict[Watch, float] = {}  # watch -> deadline, earliest first
        self._thread: threading.Thread | None = None
        _fork.reset_in_child(self)

    def _reset_in_child(self) -> None:
        """In a forked child: forget the parent's watches, its lock and its thread."""
        self._cond = threading.Condition(threading.Lock())
        self._armed = {}
        self._thread = None

    def watch(self, conn: _Socketed) -> Watch:
        """A `Watch` over `conn`, armed by `with`: leaving the block disarms it."""
        return Watch(self, conn)

    def _arm(self, watch: Watch) -> None:
        with self._cond:
            # Read under the lock, so insertion order stays deadline order.
            self._armed[watch] = time.monotonic() + self.timeout
            if self._thread is None or not self._thread.is_alive():  # none yet, or ended
                self._thread = threading.Thread(
                    target=self._run, name="pactmw-store-watchdog", daemon=True
                )
                self._thread.start()
            elif len(self._armed) == 1:
                # The thread may be waiting with nothing to watch. Otherwise it wakes at
                # the first deadline, which is no later than this one: no need to wake it.
                self._cond.notify()

    def _disarm(self, watch: Watch) -> None:
        with self._cond:
            # Gone already when the thread cut it. The thread is not woken: it finds the
            # entry gone at the deadline it waits for, then waits for the next one.
            self._armed.pop(watch, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._armed:
                    self._cond.wait(_IDLE_EXIT)
                    if not self._armed:
                        if self._thread is threading.current_thread():
                            self._thread = None
                        return
                    continue
                watch, deadline = next(iter(self._armed.items()))
                left = deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                del self._armed[watch]
                # Under the lock, so a watch disarmed meanwhile is never cut: once its
                # block ends, its connection may be back in a pool, serving someone else.
                watch._cut()
