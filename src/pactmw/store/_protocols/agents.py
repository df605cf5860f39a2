"""The runtime agent registry of the Store contract: agents added while the Provider runs,
and the block/allow overrides of every agent (configured or added)."""

from __future__ import annotations

from typing import Protocol

from pactmw.store.base import AgentExists, StoredAgent, has_nul, reject_nul

__all__ = ["AgentStore"]


class AgentStore(Protocol):
    """Runtime agents (added, removed, read, listed) and per-issuer enable/disable overrides.

    The two are independent: an override is kept by issuer, whether the agent is configured,
    added at runtime, or neither (an open-mode Provider's), and removing an agent leaves its
    override in place. Issuers are compared as exact strings.
    """

    def add_agent(self, *, issuer: str, name: str, jwks_uri: str, now: float) -> StoredAgent:
        """Store a runtime agent (`added_at = now`) and return it.

        Raises `AgentExists` when the issuer is already stored (nothing changes): of
        concurrent adds of one issuer exactly one succeeds. The store checks no URL: callers
        validate the issuer and `jwks_uri` first (`pactmw.provider.agent_admin` does).
        """
        reject_nul(issuer=issuer, name=name, jwks_uri=jwks_uri)
        agent = StoredAgent(issuer=issuer, name=name, jwks_uri=jwks_uri, added_at=now)
        if not self._add_agent(agent):
            raise AgentExists(f"agent {issuer!r} is already stored")
        return agent

    def remove_agent(self, issuer: str) -> bool:
        """Forget a runtime agent; True if one was stored. Its override stays."""
        return not has_nul(issuer) and self._remove_agent(issuer)

    def get_agent(self, issuer: str) -> StoredAgent | None:
        """Return the runtime agent of `issuer`, or None."""
        return None if has_nul(issuer) else self._get_agent(issuer)

    def list_agents(self) -> tuple[StoredAgent, ...]:
        """Return every runtime agent, ordered by issuer (by code point)."""
        return self._list_agents()

    def lookup_agent(self, issuer: str) -> tuple[StoredAgent | None, bool | None]:
        """Return the runtime agent of `issuer` (or None) and its override (or None), in
        one read: what the registry asks on each request for an issuer it has not configured.
        """
        return (None, None) if has_nul(issuer) else self._lookup_agent(issuer)

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        """Persist an enable/disable override for the personal agent `issuer`."""
        reject_nul(issuer=issuer)
        self._set_agent_enabled(issuer, bool(enabled))

    def agent_enabled(self, issuer: str) -> bool | None:
        """Return the override for `issuer`, or None when there is none (use the config)."""
        return None if has_nul(issuer) else self._agent_enabled(issuer)

    # --- what a backend implements (inputs already checked) ------------------------------------

    def _add_agent(self, agent: StoredAgent) -> bool:
        """Store `agent` unless its issuer is stored; whether it was (one of concurrent wins)."""
        ...

    def _remove_agent(self, issuer: str) -> bool:
        """Delete the runtime agent of `issuer`; whether there was one."""
        ...

    def _get_agent(self, issuer: str) -> StoredAgent | None: ...

    def _list_agents(self) -> tuple[StoredAgent, ...]: ...

    def _lookup_agent(self, issuer: str) -> tuple[StoredAgent | None, bool | None]:
        """The agent and the override, read together."""
        ...

    def _set_agent_enabled(self, issuer: str, enabled: bool) -> None: ...

    def _agent_enabled(self, issuer: str) -> bool | None: ...
