"""The Store contract, split by concern as the backends are (store/_sql/, store/_memory/).

Each protocol holds one concern's operations with the docstrings that say what each
guarantees; `Store` (store/base.py) is their union and holds the rules they all follow.
"""

from __future__ import annotations

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

__all__ = [
    "AccountTokenStore",
    "AgentStore",
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
