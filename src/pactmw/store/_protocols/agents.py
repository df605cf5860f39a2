"""The runtime agent registry of the Store contract: agents added while the Provider runs,
and the block/allow overrides of every agent (configured or added)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pactmw.store.base import StoredAgent

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
        ...

    def remove_agent(self, issuer: str) -> bool:
        """Forget a runtime agent; True if one was stored. Its override stays."""
        ...

    def get_agent(self, issuer: str) -> StoredAgent | None:
        """Return the runtime agent of `issuer`, or None."""
        ...

    def list_agents(self) -> tuple[StoredAgent, ...]:
        """Return every runtime agent, ordered by issuer (by code point)."""
        ...

    def lookup_agent(self, issuer: str) -> tuple[StoredAgent | None, bool | None]:
        """Return the runtime agent of `issuer` (or None) and its override (or None), in
        one read: what the registry asks on each request for an issuer it has not configured.
        """
        ...

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        """Persist an enable/disable override for the personal agent `issuer`."""
        ...

    def agent_enabled(self, issuer: str) -> bool | None:
        """Return the override for `issuer`, or None when there is none (use the config)."""
        ...
