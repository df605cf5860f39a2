"""An in-process Store: dicts behind one lock.

For tests, demos and single-process apps. Nothing survives a restart, and two processes
(gunicorn workers) each see their own state, so idempotent retries are per process.

The public operations (signatures, contracts, input checks) come from `Store`; their
backend halves live in store/_memory/, one module per concern over one core, as the SQL
stores' live in store/_sql/.
"""

from __future__ import annotations

from pactmw.store._memory import (
    AccountTokensMixin,
    AgentsMixin,
    ConversationsMixin,
    DevicesMixin,
    RateLimitsMixin,
    RetentionMixin,
    SessionsMixin,
    TokensMixin,
)
from pactmw.store._memory.operations import OperationsMixin
from pactmw.store._protocols import AllOperations

__all__ = ["MemoryStore"]


# RetentionMixin brings DetailsMixin (the authorization details) along: it cleans them.
class MemoryStore(
    ConversationsMixin,
    DevicesMixin,
    TokensMixin,
    AgentsMixin,
    RateLimitsMixin,
    RetentionMixin,
    SessionsMixin,
    AccountTokensMixin,
    OperationsMixin,
    AllOperations,
):
    """A thread-safe Store held in this process's memory; see the module docstring."""

    #: Its operations never wait on I/O: async drivers call them on the event loop rather
    #: than hand them to a worker thread (which costs more than the operation).
    may_block = False
