"""The Store contract, split by concern as the backends are (store/_sql/, store/_memory/).

Each protocol holds one concern's operations, each written once: the public keyword-only
signature, the docstring that says what it guarantees, and the input checks, which then call
the backend's method of the same name with a leading underscore (declared below the public
ones, with what it must do). `Store` (store/base.py) is their union and holds the rules they
all follow.
"""

from __future__ import annotations

from typing import Protocol

# First: store/base.py defines the values, errors and checks these modules use, and then
# imports them back to build `Store`.
from pactmw.store import base as _base  # noqa: F401
from pactmw.store._protocols.account_tokens import AccountTokenStore
from pactmw.store._protocols.agents import AgentStore
from pactmw.store._protocols.conversations import ConversationStore
from pactmw.store._protocols.details import AuthorizationDetailsStore
from pactmw.store._protocols.devices import DeviceStore
from pactmw.store._protocols.grants import GrantStore
from pactmw.store._protocols.operations import OperationStore
from pactmw.store._protocols.ratelimits import RateLimitStore
from pactmw.store._protocols.retention import RetentionStore
from pactmw.store._protocols.sessions import SessionStore
from pactmw.store._protocols.tokens import TokenStore
from pactmw.store._protocols.usage import GrantUsageStore
from pactmw.store.base import Store

__all__ = [
    "AccountTokenStore",
    "AgentStore",
    "AllOperations",
    "AuthorizationDetailsStore",
    "ConversationStore",
    "DeviceStore",
    "GrantStore",
    "GrantUsageStore",
    "OperationStore",
    "RateLimitStore",
    "RetentionStore",
    "SessionStore",
    "TokenStore",
]


class AllOperations(Store, AuthorizationDetailsStore, RateLimitStore, GrantUsageStore, Protocol):
    """`Store` and its optional operations: what the built-in backends implement (the last
    base of `MemoryStore` and `SqlStore`, so that their own methods win)."""
