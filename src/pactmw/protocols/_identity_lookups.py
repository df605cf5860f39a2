"""The I/O of personal-agent identity: what the verification flow asks for, and its answers.

`IdentityVerifier`'s flow yields a need (an agent record, an issuer's discovered JWKS URI,
keys) and the drivers answer it here, blocking (`answer`) or not (`aanswer`). The checks
and their order stay in `pactmw.protocols.identity`; this module only reads the registry,
the discovery cache and the key cache, and turns a key failure into the refusal it means.
"""

from __future__ import annotations

from typing import Any, Protocol

from attrs import frozen

from pactmw.core.errors import AuthenticationFailed, KeyUnavailable
from pactmw.core.jose import JWS
from pactmw.core.jwk import PublicJWK
from pactmw.core.keys import DiscoveryCache, JwksCache
from pactmw.core.threads import WorkerThreads
from pactmw.protocols._agent_registry import AgentRegistry, RegisteredAgent


@frozen
class NeedAgent:
    issuer: str


@frozen
class NeedDiscovery:
    issuer: str


@frozen
class NeedKeys:
    uri: str
    kid: str | None
    alg: str
    vetted: bool  # the URI is configured, not named by a discovery document a token chose


Need = NeedAgent | NeedDiscovery | NeedKeys
Keys = tuple[PublicJWK, ...]


class Sources(Protocol):
    """Where the answers come from: the verifier's attributes, read at each call (a
    Provider may hand the verifier other worker threads after building it)."""

    registry: AgentRegistry
    keys: JwksCache
    discovery: DiscoveryCache
    threads: WorkerThreads


def _refusal(exc: KeyUnavailable) -> AuthenticationFailed:
    """A key that cannot be had refuses the token with the key failure's own code."""
    return AuthenticationFailed(exc.code, str(exc))


def keys_at_hand(keys: JwksCache, agent: RegisteredAgent, jws: JWS) -> Keys | None:
    """The agent's keys for `jws`, inline or from a fresh cached JWKS (refusing as a fetch
    would), or None when they need a fetch."""
    if agent.jwks is not None:
        return agent.jwks.candidates(jws.kid, jws.alg)
    assert agent.jwks_uri is not None
    try:
        return keys.keys_at_hand(agent.jwks_uri, jws.kid, jws.alg)
    except KeyUnavailable as exc:
        raise _refusal(exc) from exc


async def alookup(sources: Sources, issuer: str) -> RegisteredAgent | None:
    """The registry's agent for `issuer`, in a worker thread when the registry may block."""
    if sources.registry.may_block:
        return await sources.threads.run(sources.registry.lookup, issuer)
    return sources.registry.lookup(issuer)


def answer(sources: Sources, need: Need) -> Any:
    """The blocking answer to `need`."""
    if isinstance(need, NeedAgent):
        return sources.registry.lookup(need.issuer)
    if isinstance(need, NeedDiscovery):
        return sources.discovery.jwks_uri(need.issuer)
    try:
        return sources.keys.get_keys(need.uri, need.kid, need.alg, vetted=need.vetted)
    except KeyUnavailable as exc:
        raise _refusal(exc) from exc


async def aanswer(sources: Sources, need: Need) -> Any:
    """The non-blocking answer to `need`: fetches are awaited, store reads run in threads."""
    if isinstance(need, NeedAgent):
        return await alookup(sources, need.issuer)
    if isinstance(need, NeedDiscovery):
        return await sources.discovery.ajwks_uri(need.issuer)
    try:
        return await sources.keys.aget_keys(need.uri, need.kid, need.alg, vetted=need.vetted)
    except KeyUnavailable as exc:
        raise _refusal(exc) from exc


__all__ = [
    "Keys",
    "Need",
    "NeedAgent",
    "NeedDiscovery",
    "NeedKeys",
    "Sources",
    "aanswer",
    "alookup",
    "answer",
    "keys_at_hand",
]
