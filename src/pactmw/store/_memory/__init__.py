"""The memory store's backend methods, split by concern as the SQL stores' are (store/_sql/).

`MemoryCore` holds the state (dicts behind one lock), the closed check and the purge; the
per-concern mixins implement the `_` methods the contracts in store/_protocols/ declare:
`ConversationsMixin`, `GrantsMixin`, `DevicesMixin` (over `GrantsMixin`: an approval writes
its grant), `TokensMixin`, `AgentsMixin`, `RateLimitsMixin`, `RetentionMixin`,
`SessionsMixin` and `AccountTokensMixin` (Poppy). `MemoryStore` (store/memory.py) is composed
from them and the contracts, whose public methods check the inputs first. Decisions come from
store/_decisions.py, as in the SQL stores.
"""

from __future__ import annotations

from pactmw.store._memory.account_tokens import AccountTokensMixin
from pactmw.store._memory.agents import AgentsMixin
from pactmw.store._memory.conversations import ConversationsMixin
from pactmw.store._memory.core import MemoryCore
from pactmw.store._memory.details import DetailsMixin
from pactmw.store._memory.devices import DevicesMixin
from pactmw.store._memory.grants import GrantsMixin
from pactmw.store._memory.ratelimits import RateLimitsMixin
from pactmw.store._memory.retention import RetentionMixin
from pactmw.store._memory.sessions import SessionsMixin
from pactmw.store._memory.tokens import TokensMixin

__all__ = [
    "AccountTokensMixin",
    "AgentsMixin",
    "ConversationsMixin",
    "DetailsMixin",
    "DevicesMixin",
    "GrantsMixin",
    "MemoryCore",
    "RateLimitsMixin",
    "RetentionMixin",
    "SessionsMixin",
    "TokensMixin",
]
