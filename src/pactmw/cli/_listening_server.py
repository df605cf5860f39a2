"""uvicorn's server for `pactmw serve`, which says where it listens once it does.

A module of its own so that only `pactmw serve` imports uvicorn (see `require_serve_extra`).
"""

from __future__ import annotations

import logging
import socket

import uvicorn

__all__ = ["ListeningServer"]


class ListeningServer(uvicorn.Server):
    """`uvicorn.Server` that logs `listening on http://ADDRESS` for each of `addresses` (the
    sockets it will be given, as `host:port`) once it listens on them.

    Given sockets, uvicorn logs nothing when it starts, and they are only bound until its
    startup (after the app's lifespan) listens on them. Said any earlier, the line would send
    a reader, or a readiness check that waits for it, to a port that refuses connections.
    """

    def __init__(self, config: uvicorn.Config, log: logging.Logger, addresses: list[str]) -> None:
        super().__init__(config)
        self._log = log
        self._addresses = addresses

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)  # exits the process if the app's startup fails
        for address in self._addresses:
            self._log.info("listening on http://%s (Ctrl-C stops it)", address)
