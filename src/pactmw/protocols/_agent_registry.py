"""Who may call a Provider (PACT §3.1): the agents it knows, and the runtime switches that
block or allow them. `pactmw.protocols.identity` exports these names; the verifier there
asks an `AgentRegistry` for the agent of each token's issuer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from attrs import evolve, frozen

from pactmw.core import _fork
from pactmw.core.jwk import KeySet

__all__ = [
    "NO_KEYS",
    "AgentOverrides",
    "AgentRegistry",
    "AgentResolver",
    "MemoryAgentOverrides",
    "RegisteredAgent",
    "RuntimeAgent",
    "RuntimeAgents",
]


@frozen
class RegisteredAgent:
    """A personal agent the Provider knows (spec §3.1).

    Keys come from `jwks_uri` (https; http on loopback only when allowed) or, for offline
    deployments and tests, an inline `jwks` (a `KeySet`: `parse_jwks(document)` reads a JWKS
    document). `audience` overrides the Provider-wide audience.
    """

    issuer: str
    name: str = ""
    jwks_uri: str | None = None
    jwks: KeySet | None = None
    enabled: bool = True
    audience: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.jwks_uri is None) == (self.jwks is None):
            raise ValueError(f"agent {self.issuer!r} needs exactly one of jwks_uri or jwks")
        if self.jwks is not None and not isinstance(self.jwks, KeySet):
            # The JWKS document itself (what a configuration's `jwks` takes) would pass here
            # and fail every token later with an AttributeError.
            raise TypeError(
                f"agent {self.issuer!r}: jwks must be a KeySet, not {type(self.jwks).__name__}: "
                "read a JWKS document with pactmw.parse_jwks(...)"
            )


class AgentOverrides(Protocol):
    """Runtime enable/disable switches, persisted by a store so they hold across processes."""

    def agent_enabled(self, issuer: str) -> bool | None: ...

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None: ...


class RuntimeAgent(Protocol):
    """What the registry reads of an agent added at runtime (`pactmw.store.StoredAgent`)."""

    @property
    def name(self) -> str: ...

    @property
    def jwks_uri(self) -> str: ...


class RuntimeAgents(Protocol):
    """Agents added at runtime and every issuer's override, as a store keeps them."""

    def lookup_agent(self, issuer: str) -> tuple[RuntimeAgent | None, bool | None]:
        """The runtime agent of `issuer` (or None) and its override (or None), in one read."""
        ...


class MemoryAgentOverrides:
    """Process-local overrides (tests, single-process development)."""

    may_block = False  # a dict read

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._enabled: dict[str, bool] = {}
        _fork.fresh_lock_in_child(self)  # a lock no thread of a forked child holds

    def agent_enabled(self, issuer: str) -> bool | None:
        # A dict read is atomic in CPython; only writers take the lock. This runs per request.
        return self._enabled.get(issuer)

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        with self._lock:
            self._enabled[issuer] = enabled


AgentResolver = Callable[[str], RegisteredAgent | None]


def _may_block(source: object) -> bool:
    """Whether calls to `source` may wait on I/O: unless it says otherwise, they may."""
    return getattr(source, "may_block", True) is not False


NO_KEYS = KeySet(())  # an agent whose keys are never asked for (open mode, blocked issuers)


def _with_override(agent: RegisteredAgent, enabled: bool | None) -> RegisteredAgent:
    if enabled is None or enabled == agent.enabled:
        return agent
    return evolve(agent, enabled=enabled)


class AgentRegistry:
    """Who may call: a static list, agents added at runtime, a resolver, runtime overrides.

    Issuers are looked up in this order: the static list; `runtime` (a store's agents added
    while the Provider runs, verified like configured ones: keys from their `jwks_uri`, the
    Provider-wide audience); `resolver`, for the rest (for example a database lookup; it
    must be quick and must not raise for unknown issuers: return None). `overrides` lets an
    operator block an agent at runtime: the next request is refused, without a restart.

    One store read per lookup: a configured agent asks `overrides` for its switch; any other
    issuer asks `runtime` once, which answers the switch too (so `runtime` must be the store
    `overrides` is). An issuer blocked there stays refused even when it is registered
    nowhere (an open-mode Provider's agent, or one removed while blocked).
    """

    def __init__(
        self,
        agents: Iterable[RegisteredAgent] = (),
        *,
        resolver: AgentResolver | None = None,
        overrides: AgentOverrides | None = None,
        runtime: RuntimeAgents | None = None,
    ) -> None:
        self._agents = {agent.issuer: agent for agent in agents}
        self._resolver = resolver
        self._runtime = runtime
        self.overrides: AgentOverrides = overrides or MemoryAgentOverrides()
        #: Whether `lookup` may do blocking I/O (async callers then run it in a thread).
        # A store that says it never blocks (`may_block = False`, the memory store) is read
        # on the event loop; anything else may wait on I/O.
        self.may_block = (
            resolver is not None
            or (runtime is not None and _may_block(runtime))
            or _may_block(self.overrides)
        )

    def lookup(self, issuer: str) -> RegisteredAgent | None:
        """The agent registered for `issuer` (exact match), with any runtime override applied."""
        agent = self._agents.get(issuer)
        if agent is not None:
            return _with_override(agent, self.overrides.agent_enabled(issuer))
        enabled: bool | None = None
        if self._runtime is not None:
            added, enabled = self._runtime.lookup_agent(issuer)
            if added is not None:
                agent = RegisteredAgent(issuer=issuer, name=added.name, jwks_uri=added.jwks_uri)
        if agent is None and self._resolver is not None:
            agent = self._resolver(issuer)
            if agent is not None and self._runtime is None:
                enabled = self.overrides.agent_enabled(issuer)
        if agent is None:
            blocked = enabled is False
            return RegisteredAgent(issuer, jwks=NO_KEYS, enabled=False) if blocked else None
        return _with_override(agent, enabled)

    def disable(self, issuer: str) -> None:
        """Refuse this agent from its next request on."""
        self.overrides.set_agent_enabled(issuer, False)

    def enable(self, issuer: str) -> None:
        """Accept this agent again."""
        self.overrides.set_agent_enabled(issuer, True)

    def configured(self, issuer: str) -> RegisteredAgent | None:
        """The configured agent of `issuer` as configured (no override applied), or None."""
        return self._agents.get(issuer)

    def __iter__(self) -> Iterator[RegisteredAgent]:
        """The static (configured) agents; those added at runtime are in the store."""
        return iter(self._agents.values())
