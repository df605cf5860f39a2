"""The runtime agent registry and agent overrides of the memory store (the contract, with
its input checks: store/_protocols/agents.py)."""

from __future__ import annotations

from pactmw.store._memory.core import MemoryCore
from pactmw.store.base import StoredAgent

__all__ = ["AgentsMixin"]


class AgentsMixin(MemoryCore):
    """The agent primitives of `AgentStore`, on the in-memory state."""

    def _add_agent(self, agent: StoredAgent) -> bool:
        with self._open:
            if agent.issuer in self._runtime_agents:
                return False
            self._runtime_agents[agent.issuer] = agent
            return True

    def _remove_agent(self, issuer: str) -> bool:
        with self._open:
            return self._runtime_agents.pop(issuer, None) is not None

    def _get_agent(self, issuer: str) -> StoredAgent | None:
        with self._open:
            return self._runtime_agents.get(issuer)

    def _list_agents(self) -> tuple[StoredAgent, ...]:
        with self._open:
            return tuple(self._runtime_agents[issuer] for issuer in sorted(self._runtime_agents))

    def _lookup_agent(self, issuer: str) -> tuple[StoredAgent | None, bool | None]:
        with self._open:
            return self._runtime_agents.get(issuer), self._overrides.get(issuer)

    def _set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        with self._open:
            self._overrides[issuer] = enabled

    def _agent_enabled(self, issuer: str) -> bool | None:
        with self._open:
            return self._overrides.get(issuer)
