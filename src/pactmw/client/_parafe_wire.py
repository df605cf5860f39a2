"""The personal agent's own broker credential, on the wire: registration, claim links, claim
status, renewal (spec "New to Parafé"). Values, request builders and answer parsers; pure.

The wire format is @getparafe/sdk 0.5's (`register`, `createClaimLink`, `getClaimStatus`,
`renewCredential`): JSON in snake_case, the agent's public key as base64 SPKI DER, every call
but registration authenticated with the credential (`Authorization: Bearer`) and a request
proof (`Parafe-PoP`) binding `agent_id`; registration proves the key it registers with a
proof over `htm` and `htu` alone.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from attrs import evolve, field, frozen
from cryptography.hazmat.primitives import serialization

from pactmw.client.errors import HTTPError, ResponseInvalid
from pactmw.client.http import HttpRequest, HttpResponse
from pactmw.core.encoding import json_dumps
from pactmw.core.errors import MalformedInput
from pactmw.core.files import write_file_atomically
from pactmw.core.jwk import PrivateJWK, import_private_jwk
from pactmw.protocols.parafe import request_pop
from pactmw.protocols.parafe._broker_api import broker_error

REGISTER_PATH = "/agents/register"
#: The broker holds a claim-status request at most this many seconds (`wait`).
MAX_CLAIM_WAIT = 60
AGENT_TYPES = ("personal", "enterprise")


@frozen
class ClaimLink:
    """A single-use link (30 minutes) for the person the agent acts for: signed in to Parafé,
    they approve it and become its principal. Show `url` (and `code`) to that person only."""

    url: str
    code: str
    expires_at: str


@frozen
class BrokerCredential:
    """What an agent holds to call its broker as itself: its id, the broker-issued credential
    (a JWT) and the key it registered. Keep it secret: `to_dict`/`save` write the private key.
    """

    agent_id: str
    credential: str = field(repr=False)
    key: PrivateJWK = field(repr=False)
    credential_sd_jwt: str | None = field(default=None, repr=False)
    issued_at: str | None = None
    expires_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "agent_id": self.agent_id,
            "credential": self.credential,
            "key": self.key.to_dict(),
        }
        for name in ("credential_sd_jwt", "issued_at", "expires_at"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> BrokerCredential:
        """Read `to_dict`'s JSON; `ValueError` naming what is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError("a broker credential is a JSON object")
        for name in ("agent_id", "credential"):
            if not isinstance(data.get(name), str) or not data[name]:
                raise ValueError(f"a broker credential needs {name}")
        try:
            key = import_private_jwk(data.get("key"))
        except MalformedInput as exc:
            raise ValueError(f"a broker credential needs the agent's private key ({exc})") from exc
        optional = {n: data.get(n) for n in ("credential_sd_jwt", "issued_at", "expires_at")}
        return cls(
            agent_id=data["agent_id"],
            credential=data["credential"],
            key=key,
            **{n: v for n, v in optional.items() if isinstance(v, str)},
        )

    def save(self, path: str | Path) -> None:
        """Write the credential and the private key as JSON, readable by the owner only.

        Atomically: a temporary file of mode 0600 beside `path`, then a rename, so a crash
        never leaves half a credential and the key is never readable by others, even for
        a moment over an older file. A missing folder is `FileNotFoundError` naming `path`.
        """
        write_file_atomically(path, json.dumps(self.to_dict()), 0o600)

    @classmethod
    def load(cls, path: str | Path) -> BrokerCredential:
        """Read what `save` wrote; `ValueError` for anything else."""
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not a saved broker credential") from exc


@frozen
class Registration:
    """A registered agent: its `credential` (hold on to it, with its key), where it starts
    (`identity_assurance` `self_registered`, `verification_tier` `unverified` without an
    operator) and, with no API key, the `claim_link` to show the person it acts for."""

    credential: BrokerCredential
    did: str | None
    agent_name: str | None
    identity_assurance: str
    verification_tier: str
    claim_link: ClaimLink | None = None
    parties: Mapping[str, Any] = field(factory=dict)


@frozen
class ClaimStatus:
    """Whether a person has claimed the agent, and whether its credential shows it yet
    (`credential_current` False: renew)."""

    claimed: bool
    identity_assurance: str
    verification_tier: str
    principal_tier: str | None
    credential_current: bool
    registered_at: str | None
    parties: Mapping[str, Any] = field(factory=dict)


@frozen
class Renewal:
    """A renewal's answer: `renewed` (and why), the tiers, and the `credential` now held
    (the new one when renewed, else the one that was)."""

    renewed: bool
    credential: BrokerCredential
    reason: str | None = None
    previous_tier: str | None = None
    current_tier: str | None = None
    message: str | None = None


class BrokerRefused(HTTPError):
    """The broker refused a call: its `code` and `message` (`mapBrokerError`), the parsed
    `answer`, and for a handshake refused for identity or tier while nobody claimed the agent,
    the `claim_link` to pass to its person and the broker's `hint`."""

    def __init__(self, response: HttpResponse, answer: Any) -> None:
        code, message = broker_error(answer)
        super().__init__(
            response.status,
            response.body,
            response.headers,
            f"{code} ({response.status}): {message}",
            url=response.url,
        )
        self.code = code
        self.message = message
        self.answer = answer
        claim = answer.get("claim") if isinstance(answer, Mapping) else None
        self.claim_link = _claim_link(claim) if isinstance(claim, Mapping) else None
        hint = answer.get("hint") if isinstance(answer, Mapping) else None
        self.hint = hint if isinstance(hint, str) else None


# -- requests ----------------------------------------------------------------------------------

_JSON_HEADERS = (("Content-Type", "application/json"), ("Accept", "application/json"))


def agent_url(broker_url: str, agent_id: str, action: str) -> str:
    """`{broker}/agents/{agent_id}/{action}`, the id URL-encoded."""
    return f"{broker_url}/agents/{quote(agent_id, safe='')}/{action}"


def public_key_spki(key: PrivateJWK) -> str:
    """The agent's public key as the broker takes it: base64 (with padding) SPKI DER."""
    der = key.public.key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode("ascii")


def register_request(
    broker_url: str,
    key: PrivateJWK,
    *,
    agent_type: str,
    name: str | None,
    principal_name: str | None,
    scope_policies: Mapping[str, Any] | None,
    now: float,
) -> HttpRequest:
    """`POST /agents/register`: `{agent_type, public_key, agent_name?, principal_name?,
    scope_policies?}` with a proof signed by the key being registered, and no credential."""
    if agent_type not in AGENT_TYPES:
        raise ValueError(f"agent_type must be one of {', '.join(AGENT_TYPES)}")
    body: dict[str, Any] = {"agent_type": agent_type, "public_key": public_key_spki(key)}
    if name is not None:
        body["agent_name"] = name
    if principal_name is not None:
        body["principal_name"] = principal_name
    if scope_policies is not None:
        body["scope_policies"] = dict(scope_policies)
    url = broker_url + REGISTER_PATH
    pop = request_pop(key, "POST", url, now=now)
    headers = (*_JSON_HEADERS, ("Parafe-PoP", pop))
    return HttpRequest("POST", url, headers=headers, body=json_dumps(body))


def agent_request(
    method: str, url: str, held: BrokerCredential, *, now: float, query: str = ""
) -> HttpRequest:
    """A call as the agent: its credential and a fresh proof binding `agent_id` (the proof's
    `htu` is `url` without `query`). POSTs carry no body, as the SDK's."""
    pop = request_pop(held.key, method, url, now=now, agent_id=held.agent_id)
    headers = (
        *_JSON_HEADERS,
        ("Authorization", f"Bearer {held.credential}"),
        ("Parafe-PoP", pop),
    )
    return HttpRequest(method, url + query, headers=headers)


# -- answers -----------------------------------------------------------------------------------

_PARTY_FIELDS = ("operator_type", "operator_id", "principal_type", "principal_id", "principal_ref")


def answer_object(response: HttpResponse) -> Mapping[str, Any]:
    """The JSON object of a 2xx answer; `BrokerRefused` for any other status."""
    try:
        answer = response.json()
    except ResponseInvalid:
        if response.ok:
            raise
        answer = None
    if not response.ok:
        raise BrokerRefused(response, answer)
    if not isinstance(answer, Mapping):
        raise ResponseInvalid(f"{response.url}: the broker's answer is not a JSON object")
    return answer


def _text(answer: Mapping[str, Any], name: str, url: str, *, required: bool = True) -> Any:
    value = answer.get(name)
    if isinstance(value, str) and value:
        return value
    if required or value is not None:
        raise ResponseInvalid(f"{url}: the broker's answer has no {name}")
    return None


_VISIBLE_ASCII = re.compile(r"[\x20-\x7e]+")


def _credential(answer: Mapping[str, Any], url: str) -> str:
    """The broker's credential: it goes in the `Authorization` header of every call as the
    agent, where CR, LF, NUL or non-ASCII text cannot be written."""
    value: str = _text(answer, "credential", url)
    if not _VISIBLE_ASCII.fullmatch(value):
        raise ResponseInvalid(f"{url}: the broker's credential is not visible ASCII")
    return value


def _parties(answer: Mapping[str, Any]) -> dict[str, Any]:
    return {name: answer[name] for name in _PARTY_FIELDS if isinstance(answer.get(name), str)}


def _claim_link(raw: Mapping[str, Any]) -> ClaimLink | None:
    url, code, expires = raw.get("claim_url"), raw.get("code"), raw.get("expires_at")
    if not (isinstance(url, str) and isinstance(code, str) and isinstance(expires, str)):
        return None
    # Shown to a person, who signs in there: only an https link is passed on (and one that
    # is not a URL at all, which urlsplit refuses with ValueError, is none).
    try:
        if urlsplit(url).scheme != "https":
            return None
    except ValueError:
        return None
    return ClaimLink(url=url, code=code, expires_at=expires)


def parse_claim_link(response: HttpResponse) -> ClaimLink:
    """`{claim_url, code, expires_at}`, the link https."""
    link = _claim_link(answer_object(response))
    if link is None:
        raise ResponseInvalid(f"{response.url}: the broker's answer is not a claim link")
    return link


def parse_registration(response: HttpResponse, key: PrivateJWK) -> Registration:
    """The answer of `POST /agents/register`."""
    answer = answer_object(response)
    url = response.url
    claim = answer.get("claim")
    link = _claim_link(claim) if isinstance(claim, Mapping) else None
    if claim is not None and link is None:
        raise ResponseInvalid(f"{url}: the broker's claim link is unusable")
    held = BrokerCredential(
        agent_id=_text(answer, "agent_id", url),
        credential=_credential(answer, url),
        key=key,
        credential_sd_jwt=_text(answer, "credential_sd_jwt", url, required=False),
        issued_at=_text(answer, "issued_at", url, required=False),
        expires_at=_text(answer, "expires_at", url, required=False),
    )
    return Registration(
        credential=held,
        did=_text(answer, "did", url, required=False),
        agent_name=_text(answer, "agent_name", url, required=False),
        identity_assurance=_text(answer, "identity_assurance", url),
        verification_tier=_text(answer, "verification_tier", url),
        claim_link=link,
        parties=_parties(answer),
    )


def parse_claim_status(response: HttpResponse) -> ClaimStatus:
    """The answer of `GET /agents/{id}/claim-status`."""
    answer = answer_object(response)
    url = response.url
    claimed, current = answer.get("claimed"), answer.get("credential_current")
    if not isinstance(claimed, bool) or not isinstance(current, bool):
        raise ResponseInvalid(f"{url}: the claim status has no claimed/credential_current")
    return ClaimStatus(
        claimed=claimed,
        identity_assurance=_text(answer, "identity_assurance", url),
        verification_tier=_text(answer, "verification_tier", url),
        principal_tier=_text(answer, "principal_tier", url, required=False),
        credential_current=current,
        registered_at=_text(answer, "registered_at", url, required=False),
        parties=_parties(answer),
    )


def parse_renewal(response: HttpResponse, held: BrokerCredential) -> Renewal:
    """The answer of `POST /agents/{id}/renew`; a renewed credential replaces the held one
    (its key stays: renewal does not change the registered key)."""
    answer = answer_object(response)
    url = response.url
    renewed = answer.get("renewed")
    if not isinstance(renewed, bool) or answer.get("agent_id") != held.agent_id:
        raise ResponseInvalid(f"{url}: not a renewal of {held.agent_id}")
    now_held = held
    if renewed:
        now_held = evolve(
            held,
            credential=_credential(answer, url),
            credential_sd_jwt=_text(answer, "credential_sd_jwt", url, required=False)
            or held.credential_sd_jwt,
            issued_at=_text(answer, "issued_at", url, required=False) or held.issued_at,
            expires_at=_text(answer, "expires_at", url, required=False) or held.expires_at,
        )
    current = _text(answer, "current_tier", url, required=False)
    return Renewal(
        renewed=renewed,
        credential=now_held,
        reason=_text(answer, "reason", url, required=False),
        previous_tier=_text(answer, "previous_tier", url, required=False),
        current_tier=current or _text(answer, "verification_tier", url, required=False),
        message=_text(answer, "message", url, required=False),
    )


__all__ = [
    "AGENT_TYPES",
    "MAX_CLAIM_WAIT",
    "REGISTER_PATH",
    "BrokerCredential",
    "BrokerRefused",
    "ClaimLink",
    "ClaimStatus",
    "Registration",
    "Renewal",
    "agent_request",
    "agent_url",
    "answer_object",
    "parse_claim_link",
    "parse_claim_status",
    "parse_registration",
    "parse_renewal",
    "public_key_spki",
    "register_request",
]
