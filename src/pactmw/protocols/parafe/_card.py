"""The agent-card extension entry: building our own, parsing other agents' (parafe-verifier.md
§10, spec §2).

The parser follows the reference's rule that one bad scope entry voids the whole Parafé entry
(the seed text says only the entry; §12 item 7). Like the reference it checks that permission
and exclusion lists are arrays, not what they hold (a non-string element can never permit an
action, and tokens are compared with `===`), and it passes `trusted_issuers` entries on whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from attrs import field, frozen

from pactmw.core.errors import MalformedInput
from pactmw.core.jwk import thumbprint
from pactmw.protocols.parafe._constants import (
    DEFAULT_BROKER_URL,
    EXTENSION_URI,
    IDENTITY_ASSURANCES,
    INITIATOR_PROOFS,
    MODALITY_RANK,
    VERIFICATION_TIERS,
)
from pactmw.protocols.parafe._jwt import is_number

DEFAULT_DESCRIPTION = "Parafé brokered trust: mutual authentication and scoped consent"

#: Reputation floors a scope may state; the broker enforces them, nothing checks them offline.
REPUTATION_FLOORS = (
    "minimum_tenure_days",
    "minimum_session_completion_rate",
    "maximum_denied_requests_30d",
    "minimum_unique_counterparties",
    "minimum_handshake_success_rate",
)

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@frozen
class TrustedIssuer:
    """An AP2 mandate issuer a scope trusts, named by its key's RFC 7638 thumbprint.

    `name`, `iss` and `kid` are read when they are strings. `extra` holds every other member,
    and those three when they are not strings, passed through unchanged (the reference checks
    only `jkt`).
    """

    jkt: str
    name: str | None = None
    iss: str | None = None
    kid: str | None = None
    extra: Mapping[str, Any] = field(default=_EMPTY, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"jkt": self.jkt}
        for name in ("name", "iss", "kid"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out.update(self.extra)
        return out


def _array(obj: Mapping[str, Any], name: str) -> tuple[Any, ...]:
    # The reference checks `Array.isArray`, not the elements (§10).
    value = obj[name]
    if not isinstance(value, list):
        raise MalformedInput(f"{name} must be an array")
    return tuple(value)


def _one_of(obj: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str | None:
    if name not in obj:
        return None
    value = obj[name]
    if value not in allowed:
        raise MalformedInput(f"{name} must be one of {', '.join(allowed)}")
    return str(value)


_TYPED = frozenset(
    {
        "permissions",
        "minimum_authorization_modality",
        "minimum_identity_assurance",
        "minimum_verification_tier",
        "minimum_initiator_proof",
        "exclusions",
        "trusted_issuers",
    }
)


@frozen
class ScopeRequirement:
    """What one scope of this agent asks of a caller (one `scope_requirements` entry).

    Offline, a consent token is checked against `permissions`, the modality minimum and
    `minimum_initiator_proof == "pop"` (§4 step 15); the broker enforces the rest at handshake.
    `minimum_authorization_modality` None (absent from a card) fails every offline check, as
    in the reference. `permissions` and `exclusions` are kept as the card gives them, strings
    or not (compared with `===` semantics). `extra` holds reputation floors and members this
    version does not know, passed through unchanged.
    """

    permissions: tuple[Any, ...]
    minimum_authorization_modality: str | None = "autonomous"
    minimum_identity_assurance: str | None = None
    minimum_verification_tier: str | None = None
    minimum_initiator_proof: str | None = None
    exclusions: tuple[Any, ...] | None = None
    trusted_issuers: tuple[TrustedIssuer, ...] | None = None
    extra: Mapping[str, Any] = field(default=_EMPTY, repr=False)

    @classmethod
    def from_dict(cls, obj: Any) -> ScopeRequirement:
        """Read one card entry; `MalformedInput` when the reference's parser would refuse it."""
        if not isinstance(obj, Mapping):
            raise MalformedInput("a scope requirement must be an object")
        if "permissions" not in obj:
            raise MalformedInput("permissions is required")
        permissions = _array(obj, "permissions")
        modality = _one_of(obj, "minimum_authorization_modality", tuple(MODALITY_RANK))
        assurance = _one_of(obj, "minimum_identity_assurance", IDENTITY_ASSURANCES)
        tier = _one_of(obj, "minimum_verification_tier", VERIFICATION_TIERS)
        exclusions = _array(obj, "exclusions") if "exclusions" in obj else None
        issuers: tuple[TrustedIssuer, ...] | None = None
        if "trusted_issuers" in obj:
            raw = obj["trusted_issuers"]
            if not isinstance(raw, list):
                raise MalformedInput("trusted_issuers must be an array")
            issuers = tuple(_trusted_issuer(entry) for entry in raw)
        # Not validated by the reference parser: only "pop" has an effect offline.
        proof = obj.get("minimum_initiator_proof")
        extra = {k: v for k, v in obj.items() if k not in _TYPED}
        if "minimum_initiator_proof" in obj and not isinstance(proof, str):
            extra["minimum_initiator_proof"] = proof
            proof = None
        return cls(
            permissions=permissions,
            minimum_authorization_modality=modality,
            minimum_identity_assurance=assurance,
            minimum_verification_tier=tier,
            minimum_initiator_proof=proof,
            exclusions=exclusions,
            trusted_issuers=issuers,
            extra=MappingProxyType(extra),
        )

    def to_dict(self) -> dict[str, Any]:
        """The card entry as JSON-ready data."""
        out: dict[str, Any] = {"permissions": list(self.permissions)}
        for name in (
            "minimum_authorization_modality",
            "minimum_identity_assurance",
            "minimum_verification_tier",
            "minimum_initiator_proof",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.exclusions is not None:
            out["exclusions"] = list(self.exclusions)
        if self.trusted_issuers is not None:
            out["trusted_issuers"] = [issuer.to_dict() for issuer in self.trusted_issuers]
        out.update(self.extra)
        return out


def _trusted_issuer(entry: Any) -> TrustedIssuer:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("jkt"), str) or not entry["jkt"]:
        raise MalformedInput("every trusted_issuers entry needs a non-empty jkt")

    def text(name: str) -> str | None:
        value = entry.get(name)
        return value if isinstance(value, str) else None

    read = {name: text(name) for name in ("name", "iss", "kid")}
    extra = {
        k: v for k, v in entry.items() if k != "jkt" and not (k in read and read[k] is not None)
    }
    return TrustedIssuer(
        jkt=entry["jkt"],
        name=read["name"],
        iss=read["iss"],
        kid=read["kid"],
        extra=MappingProxyType(extra),
    )


ScopeRequirements = Mapping[str, ScopeRequirement]


@frozen
class CardExtension:
    """The Parafé entry of an agent card's `capabilities.extensions`."""

    agent_id: str
    broker_url: str
    minimum_identity_assurance: str
    scope_requirements: ScopeRequirements
    required: bool = False
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The `capabilities.extensions[]` entry."""
        entry: dict[str, Any] = {"uri": EXTENSION_URI}
        if self.description is not None:
            entry["description"] = self.description
        entry["required"] = self.required
        entry["params"] = {
            "agent_id": self.agent_id,
            "broker_url": self.broker_url,
            "minimum_identity_assurance": self.minimum_identity_assurance,
            "scope_requirements": {
                name: requirement.to_dict() for name, requirement in self.scope_requirements.items()
            },
        }
        return entry


def _params(params: Any) -> CardExtension:
    if not isinstance(params, Mapping):
        raise MalformedInput("params must be an object")
    agent_id, broker_url = params.get("agent_id"), params.get("broker_url")
    if not isinstance(agent_id, str) or not isinstance(broker_url, str):
        raise MalformedInput("agent_id and broker_url must be strings")
    assurance = params.get("minimum_identity_assurance")
    if assurance not in IDENTITY_ASSURANCES:
        raise MalformedInput("minimum_identity_assurance is missing or unknown")
    scopes = params.get("scope_requirements")
    if not isinstance(scopes, Mapping):
        raise MalformedInput("scope_requirements must be an object")
    return CardExtension(
        agent_id=agent_id,
        broker_url=broker_url,
        minimum_identity_assurance=str(assurance),
        scope_requirements=MappingProxyType(
            {str(name): ScopeRequirement.from_dict(entry) for name, entry in scopes.items()}
        ),
    )


def parse_card_extension(card: Any) -> CardExtension | None:
    """The Parafé v2 entry of another agent's card, or None when it has no valid one.

    `card` is the whole agent card (a JSON object). The first `capabilities.extensions` entry
    with the v2 URI is read; v1 entries are ignored. Any invalid member, including a single
    bad scope entry, makes the whole entry count as absent (the reference's rule).
    """
    if not isinstance(card, Mapping):
        return None
    capabilities = card.get("capabilities")
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    if not isinstance(extensions, list):
        return None
    entry = next(
        (e for e in extensions if isinstance(e, Mapping) and e.get("uri") == EXTENSION_URI),
        None,
    )
    if entry is None:
        return None
    try:
        parsed = _params(entry.get("params"))
    except MalformedInput:
        return None
    description = entry.get("description")
    return CardExtension(
        agent_id=parsed.agent_id,
        broker_url=parsed.broker_url,
        minimum_identity_assurance=parsed.minimum_identity_assurance,
        scope_requirements=parsed.scope_requirements,
        required=entry.get("required") is True,
        description=description if isinstance(description, str) else None,
    )


def card_extension(
    *,
    agent_id: str,
    scope_requirements: Mapping[str, ScopeRequirement | Mapping[str, Any]],
    broker_url: str = DEFAULT_BROKER_URL,
    minimum_identity_assurance: str = "self_registered",
    required: bool = False,
    description: str | None = DEFAULT_DESCRIPTION,
) -> CardExtension:
    """Build this agent's Parafé card entry (`.to_dict()` goes in `capabilities.extensions`).

    `required=True` turns away every caller without Parafé; with False the agent must check
    consent itself for every scoped action (spec §2.1). Raises `ValueError` for values other
    agents' parsers would refuse, so the card never voids itself.
    """
    scopes: dict[str, ScopeRequirement] = {}
    for name, requirement in scope_requirements.items():
        try:
            parsed = (
                requirement
                if isinstance(requirement, ScopeRequirement)
                else ScopeRequirement.from_dict(requirement)
            )
            # Round trip: what we publish must parse back to itself.
            ScopeRequirement.from_dict(parsed.to_dict())
        except MalformedInput as exc:
            raise ValueError(f"scope {name!r}: {exc}") from exc
        if parsed.minimum_authorization_modality is None:
            raise ValueError(f"scope {name!r}: minimum_authorization_modality is required")
        if parsed.minimum_initiator_proof not in (None, *INITIATOR_PROOFS):
            raise ValueError(f"scope {name!r}: minimum_initiator_proof must be pop or credential")
        scopes[name] = parsed
    extension = CardExtension(
        agent_id=agent_id,
        broker_url=broker_url.rstrip("/"),
        minimum_identity_assurance=minimum_identity_assurance,
        scope_requirements=MappingProxyType(scopes),
        required=required,
        description=description,
    )
    try:
        _params(extension.to_dict()["params"])
    except MalformedInput as exc:
        raise ValueError(str(exc)) from exc
    if not agent_id:
        raise ValueError("agent_id must be a non-empty string")
    return extension


_POLICY_FIELDS = (
    "permissions",
    "exclusions",
    "minimum_authorization_modality",
    "minimum_identity_assurance",
    "minimum_verification_tier",
    "minimum_initiator_proof",
)


def scope_requirements_from_policies(policies: Any) -> dict[str, ScopeRequirement]:
    """Card entries from the broker's scope policies (`GET /agents/{id}/scope-policies`).

    Accepts the whole answer (`{"scope_policies": {...}}`) or its inner mapping. The modality
    defaults to `autonomous`; reputation floors are copied only when they are numbers; AP2
    issuer keys (`ap2_trusted_issuers[].jwk`) become their thumbprints, so no key ever lands on
    the card, with the issuer's `name`, `iss` and `kid` when they are non-empty (the reference's
    `scopeRequirementsFromPolicies`). Raises `ValueError` on a malformed policy.
    """
    if isinstance(policies, Mapping) and isinstance(policies.get("scope_policies"), Mapping):
        policies = policies["scope_policies"]
    if not isinstance(policies, Mapping):
        raise ValueError("scope policies must be an object")
    out: dict[str, ScopeRequirement] = {}
    for name, policy in policies.items():
        if not isinstance(policy, Mapping):
            raise ValueError(f"scope policy {name!r} must be an object")
        entry = {k: policy[k] for k in _POLICY_FIELDS if policy.get(k) is not None}
        entry.update({k: policy[k] for k in REPUTATION_FLOORS if is_number(policy.get(k))})
        entry.setdefault("minimum_authorization_modality", "autonomous")
        issuers = policy.get("ap2_trusted_issuers")
        if isinstance(issuers, list) and issuers:
            converted = []
            for issuer in issuers:
                jwk = issuer.get("jwk") if isinstance(issuer, Mapping) else None
                if not isinstance(jwk, Mapping):
                    raise ValueError(f"scope policy {name!r}: bad ap2_trusted_issuers entry")
                try:
                    jkt = thumbprint(jwk)
                except MalformedInput as exc:
                    raise ValueError(f"scope policy {name!r}: {exc}") from exc
                # Only truthy values, as the reference's `...(i.name ? {name} : {})`.
                converted.append(
                    {"jkt": jkt, **{k: issuer[k] for k in ("name", "iss", "kid") if issuer.get(k)}}
                )
            entry["trusted_issuers"] = converted
        try:
            out[str(name)] = ScopeRequirement.from_dict(entry)
        except MalformedInput as exc:
            raise ValueError(f"scope policy {name!r}: {exc}") from exc
    return out


__all__ = [
    "DEFAULT_DESCRIPTION",
    "REPUTATION_FLOORS",
    "CardExtension",
    "ScopeRequirement",
    "ScopeRequirements",
    "TrustedIssuer",
    "card_extension",
    "parse_card_extension",
    "scope_requirements_from_policies",
]
