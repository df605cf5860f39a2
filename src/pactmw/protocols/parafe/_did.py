"""Agent DID documents as the broker serves them (parafe-verifier.md §5). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from attrs import field, frozen

from pactmw.core.errors import PactmwError
from pactmw.protocols.parafe._constants import BROKER_DID

#: Characters `encodeURIComponent` leaves alone besides letters, digits and `-_.~`.
_URI_COMPONENT_SAFE = "!'()*"


@frozen
class DidDocument:
    """A DID document (a JSON object, kept as parsed), and when the agent was revoked.

    `revoked_at` is set only for the document a revoked agent's 410 answer carries.
    """

    document: Mapping[str, Any] = field(repr=False)
    revoked_at: str | None = None

    @property
    def id(self) -> Any:
        return self.document.get("id")

    def _methods(self) -> list[Any]:
        methods = self.document.get("verificationMethod")
        return methods if isinstance(methods, list) else []

    def first_key(self) -> Any:
        """`verificationMethod[0].publicKeyJwk`, the key a presentation proof is checked with,
        or None.

        The seed says only "the initiator's key from its DID document"; the reference takes
        the first entry without matching its id to `#keys-1` (§12 item 5). We do the same, so
        an agent the reference accepts is accepted here; the thumbprint check against
        `cnf.jkt` is what binds the key either way.
        """
        methods = self._methods()
        if not methods or not isinstance(methods[0], Mapping):
            return None
        return methods[0].get("publicKeyJwk")

    def key_for(self, kid: Any) -> Any:
        """The `publicKeyJwk` of the verification method whose `id` is `kid`, or None."""
        for method in self._methods():
            if isinstance(method, Mapping) and method.get("id") == kid and isinstance(kid, str):
                return method.get("publicKeyJwk")
        return None


class DidUnavailable(PactmwError):
    """A DID document could not be had: `status` is the HTTP status (None when the broker
    could not be reached or the body was unusable), `body` the parsed JSON answer if any."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def did_path(agent_id: str) -> str:
    """The broker path of an agent's DID document (the id URL-encoded like
    `encodeURIComponent`)."""
    return "/agents/" + quote(agent_id, safe=_URI_COMPONENT_SAFE) + "/did.json"


def agent_did(agent_id: str, *, broker_did: str = BROKER_DID) -> str:
    """An agent's DID: `did:web:api.parafe.ai:agents:<agent_id>`."""
    return f"{broker_did}:agents:{agent_id}"


def agent_id_of(did: Any) -> str | None:
    """The agent id a receipt `iss` names, or None unless it is a Parafé agent DID
    (`did:web:…:agents:prf_agent_…`, the @getparafe/verify rule, §5)."""
    if not isinstance(did, str) or not did.startswith("did:web:") or ":agents:" not in did:
        return None
    agent_id = did.rsplit(":", 1)[-1]
    return agent_id if agent_id.startswith("prf_agent_") else None


__all__ = [
    "DidDocument",
    "DidUnavailable",
    "agent_did",
    "agent_id_of",
    "did_path",
]
