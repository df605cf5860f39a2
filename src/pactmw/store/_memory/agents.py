"""The runtime agent registry and agent overrides of the memory store."""

from __future__ import annotations

from pactmw.store._memory.core import MemoryCore
from pactmw.store.base import AgentExists, StoredAgent, reject_nul

__all__ = ["AgentsMixin"]


class AgentsMixin(MemoryCore):
    """The agent operations of `Store`, on the in-memory state."""

    def add_agent(self, *, issuer: str, name: str, jwks_uri: str, now: float) -> StoredAgent:
        """Store a runtime agent; `AgentExists` when the issuer is already stored."""
        reject_nul(issuer=issuer, name=name, jwks_uri=jwks_uri)
        agent = StoredAgent(issuer=issuer, name=name, jwks_uri=jwks_uri, added_at=now)
        with self._lock:
            self._check_open()
            if issuer in self._runtime_agents:
                raise AgentExists(f"agent {issuer!r} is already stored")
            self._runtime_agents[issuer] = agent
        return agent

    def remove_agent(self, issuer: str) -> bool:
        """Forget a runtime agent; True if one was stored."""
        with self._lock:
            self._check_open()
            return self._runtime_agents.pop(issuer, None) is not None

    def get_agent(self, issuer: str) -> StoredAgent | None:
        """Return the runtime agent of `issuer`, or None."""
        with self._lock:
            self._check_open()
            return self._runtime_agents.get(issuer)

    def list_agents(self) -> tuple[StoredAgent, ...]:
        """Return every runtime agent, ordered by issuer."""
        with self._lock:
            self._check_open()
            return tuple(self._runtime_agents[issuer] for issuer in sorted(self._runtime_agents))

    def lookup_agent(self, issuer: str) -> tuple[StoredAgent | None, bool | None]:
        """Return the runtime agent of `issuer` and its override, in one read."""
        with self._lock:
            self._check_open()
            return self._runtime_agents.get(issuer), self._overrides.get(issuer)

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        """Persist (in memory) an enable/disable override for `issuer`."""
        reject_nul(issuer=issuer)
        with self._lock:
            self._check_open()
            self._overrides[issuer] = bool(enabled)

    def agent_enabled(self, issuer: str) -> bool | None:
        """Return the override for `issuer`, or None when there is none."""
        with self._lock:
            self._check_open()
            return self._overrides.get(issuer)
