"""The agent-card extension (parafe-verifier.md §10, spec §2): building ours, parsing theirs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    CardExtension,
    ParafeVerifier,
    ScopeRequirement,
    StaticBrokerKeys,
    TrustedIssuer,
    card_extension,
    parse_card_extension,
    scope_requirements_from_policies,
)

SPEC_ENTRY: dict[str, Any] = {
    "uri": EXTENSION_URI,
    "description": "Parafé brokered trust: mutual authentication and scoped consent",
    "required": False,
    "params": {
        "agent_id": "prf_agent_donuts01",
        "broker_url": "https://api.parafe.ai",
        "minimum_identity_assurance": "self_registered",
        "scope_requirements": {
            "check-menu": {
                "permissions": ["read_menu", "read_availability"],
                "minimum_authorization_modality": "autonomous",
            },
            "order-donuts": {
                "permissions": ["read_menu", "create_order"],
                "minimum_authorization_modality": "attested",
            },
        },
    },
}


def card(entry: Any, *others: Any) -> dict[str, Any]:
    return {"name": "Agent Donuts", "capabilities": {"extensions": [*others, entry]}}


def test_builder_reproduces_the_spec_example() -> None:
    built = card_extension(
        agent_id="prf_agent_donuts01",
        scope_requirements={
            "check-menu": ScopeRequirement(permissions=("read_menu", "read_availability")),
            "order-donuts": {
                "permissions": ["read_menu", "create_order"],
                "minimum_authorization_modality": "attested",
            },
        },
    )
    assert built.to_dict() == SPEC_ENTRY


def test_parse_the_spec_example() -> None:
    parsed = parse_card_extension(card(SPEC_ENTRY, {"uri": "https://other/ext"}))
    assert parsed is not None
    assert parsed.agent_id == "prf_agent_donuts01"
    assert parsed.required is False
    assert set(parsed.scope_requirements) == {"check-menu", "order-donuts"}
    assert parsed.scope_requirements["order-donuts"].minimum_authorization_modality == "attested"
    assert parsed.to_dict() == SPEC_ENTRY


def test_every_member_round_trips() -> None:
    scope = {
        "permissions": ["create_order"],
        "minimum_authorization_modality": "delegated",
        "minimum_identity_assurance": "claimed",
        "minimum_verification_tier": "domain_verified",
        "minimum_initiator_proof": "pop",
        "exclusions": ["issue_refund"],
        "trusted_issuers": [{"name": "Bank", "iss": "https://bank", "kid": "k1", "jkt": "abc"}],
        "minimum_tenure_days": 30,
        "minimum_session_completion_rate": 0.9,
        "maximum_denied_requests_30d": 3,
        "minimum_unique_counterparties": 2,
        "minimum_handshake_success_rate": 0.5,
        "x_future_member": {"kept": True},
    }
    entry = copy.deepcopy(SPEC_ENTRY)
    entry["required"] = True
    entry["params"]["minimum_identity_assurance"] = "claimed"
    entry["params"]["scope_requirements"] = {"order": scope}
    parsed = parse_card_extension(card(entry))
    assert parsed is not None
    requirement = parsed.scope_requirements["order"]
    assert requirement.trusted_issuers == (
        TrustedIssuer(jkt="abc", name="Bank", iss="https://bank", kid="k1"),
    )
    assert requirement.extra["minimum_tenure_days"] == 30
    assert parsed.required is True
    assert parsed.to_dict()["params"]["scope_requirements"]["order"] == scope


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.pop("agent_id"),
        lambda p: p.__setitem__("broker_url", 5),
        lambda p: p.pop("minimum_identity_assurance"),
        lambda p: p.__setitem__("minimum_identity_assurance", "verified"),
        lambda p: p.__setitem__("scope_requirements", []),
        lambda p: p.pop("scope_requirements"),
        lambda p: p["scope_requirements"].__setitem__("bad", "entry"),
        lambda p: p["scope_requirements"]["check-menu"].pop("permissions"),
        lambda p: p["scope_requirements"]["check-menu"].__setitem__("permissions", "read_menu"),
        lambda p: p["scope_requirements"]["check-menu"].__setitem__(
            "minimum_authorization_modality", "high"
        ),
        lambda p: p["scope_requirements"]["check-menu"].__setitem__(
            "minimum_authorization_modality", None
        ),
        lambda p: p["scope_requirements"]["check-menu"].__setitem__(
            "minimum_identity_assurance", "x"
        ),
        lambda p: p["scope_requirements"]["check-menu"].__setitem__(
            "minimum_verification_tier", "gold"
        ),
        lambda p: p["scope_requirements"]["check-menu"].__setitem__("exclusions", "x"),
        lambda p: p["scope_requirements"]["check-menu"].__setitem__(
            "trusted_issuers", {"jkt": "a"}
        ),
        lambda p: p["scope_requirements"]["check-menu"].__setitem__(
            "trusted_issuers", [{"name": "no jkt"}]
        ),
        lambda p: p["scope_requirements"]["check-menu"].__setitem__(
            "trusted_issuers", [{"jkt": ""}]
        ),
    ],
)
def test_one_bad_member_voids_the_whole_entry(change: Any) -> None:
    entry = copy.deepcopy(SPEC_ENTRY)
    change(entry["params"])
    assert parse_card_extension(card(entry)) is None


def test_what_the_parser_leaves_alone() -> None:
    entry = copy.deepcopy(SPEC_ENTRY)
    scopes = entry["params"]["scope_requirements"]
    scopes["check-menu"].pop("minimum_authorization_modality")  # optional in the parser
    scopes["order-donuts"]["minimum_initiator_proof"] = 5  # not validated
    scopes["order-donuts"]["minimum_tenure_days"] = "many"  # not validated
    parsed = parse_card_extension(card(entry))
    assert parsed is not None
    assert parsed.scope_requirements["check-menu"].minimum_authorization_modality is None
    assert parsed.scope_requirements["order-donuts"].minimum_initiator_proof is None
    assert parsed.to_dict() == entry


def test_list_elements_are_not_type_checked() -> None:
    # The reference's parser checks that permissions and exclusions are arrays, not what they
    # hold; a non-string element cannot permit an action (actions are strings).
    entry = copy.deepcopy(SPEC_ENTRY)
    scopes = entry["params"]["scope_requirements"]
    scopes["check-menu"]["permissions"] = [1]
    scopes["order-donuts"]["permissions"] = ["read_menu", None, {"a": 1}]
    scopes["order-donuts"]["exclusions"] = [2, "issue_refund", []]
    parsed = parse_card_extension(card(entry))
    assert parsed is not None
    assert parsed.scope_requirements["check-menu"].permissions == (1,)
    assert parsed.scope_requirements["order-donuts"].exclusions == (2, "issue_refund", [])
    assert parsed.to_dict() == entry


def test_trusted_issuers_pass_through() -> None:
    # The reference checks only `jkt` (a non-empty string) and passes each entry on unchanged.
    issuers = [
        {"jkt": "abc", "name": 5, "iss": None, "kid": ["k"], "x_note": {"kept": True}},
        {"jkt": "def", "name": "Bank", "weight": 2},
    ]
    entry = copy.deepcopy(SPEC_ENTRY)
    entry["params"]["scope_requirements"]["order-donuts"]["trusted_issuers"] = issuers
    parsed = parse_card_extension(card(entry))
    assert parsed is not None
    kept = parsed.scope_requirements["order-donuts"].trusted_issuers
    assert kept is not None
    assert [issuer.to_dict() for issuer in kept] == issuers
    assert kept[0].name is None  # not a string: passed through, not read
    assert kept[1].name == "Bank"
    assert parsed.to_dict() == entry


def test_policies_copy_numeric_floors_and_non_empty_issuer_names() -> None:
    # `scopeRequirementsFromPolicies`: floors only when they are numbers; an issuer's name,
    # iss and kid only when they are non-empty.
    issuer_key = generate_private_jwk("ES256")
    scopes = scope_requirements_from_policies(
        {
            "s": {
                "permissions": ["a"],
                "minimum_tenure_days": "30",
                "minimum_session_completion_rate": 0.9,
                "maximum_denied_requests_30d": True,
                "minimum_unique_counterparties": 0,
                "minimum_handshake_success_rate": None,
                "ap2_trusted_issuers": [
                    {"jwk": issuer_key.public.to_dict(), "name": "", "iss": "", "kid": ""},
                    {"jwk": issuer_key.public.to_dict(), "name": "Bank", "kid": "k"},
                ],
            }
        }
    )
    requirement = scopes["s"]
    assert requirement.extra == {
        "minimum_session_completion_rate": 0.9,
        "minimum_unique_counterparties": 0,
    }
    assert requirement.to_dict()["trusted_issuers"] == [
        {"jkt": issuer_key.public.thumbprint},
        {"jkt": issuer_key.public.thumbprint, "name": "Bank", "kid": "k"},
    ]


@pytest.mark.parametrize(
    "value",
    [
        None,
        [],
        {"capabilities": None},
        {"capabilities": {"extensions": {}}},
        card({**SPEC_ENTRY, "uri": "https://github.com/getparafe/parafe-a2a-extension/v1"}),
        card({**SPEC_ENTRY, "params": None}),
        card("not an entry"),
    ],
)
def test_no_entry(value: Any) -> None:
    assert parse_card_extension(value) is None


def test_builder_refuses_what_readers_would_refuse() -> None:
    with pytest.raises(ValueError, match="modality"):
        card_extension(
            agent_id="a",
            scope_requirements={"s": ScopeRequirement(("x",), minimum_authorization_modality=None)},
        )
    with pytest.raises(ValueError, match="minimum_initiator_proof"):
        card_extension(
            agent_id="a",
            scope_requirements={"s": ScopeRequirement(("x",), minimum_initiator_proof="maybe")},
        )
    with pytest.raises(ValueError, match="minimum_identity_assurance"):
        card_extension(agent_id="a", scope_requirements={}, minimum_identity_assurance="top")
    with pytest.raises(ValueError, match="scope 's'"):
        card_extension(agent_id="a", scope_requirements={"s": {"permissions": "x"}})
    with pytest.raises(ValueError, match="agent_id"):
        card_extension(agent_id="", scope_requirements={})
    built = card_extension(agent_id="a", scope_requirements={}, broker_url="https://b.example///")
    assert built.broker_url == "https://b.example"


def test_scope_requirements_from_policies() -> None:
    issuer_key = generate_private_jwk("ES256")
    policies = {
        "scope_policies": {
            "place-order": {
                "permissions": ["create_order"],
                "exclusions": ["issue_refund"],
                "minimum_identity_assurance": "registered",
                "minimum_verification_tier": None,
                "minimum_tenure_days": 7,
                "ap2_trusted_issuers": [
                    {"jwk": issuer_key.public.to_dict(), "kid": "k", "name": "Bank"}
                ],
                "internal_note": "not copied",
            },
            "browse": {"permissions": ["read_menu"], "minimum_authorization_modality": "attested"},
        }
    }
    scopes = scope_requirements_from_policies(policies)
    order = scopes["place-order"]
    assert order.minimum_authorization_modality == "autonomous"  # the default
    assert order.trusted_issuers == (
        TrustedIssuer(jkt=issuer_key.public.thumbprint, name="Bank", kid="k"),
    )
    assert "jwk" not in str(order.to_dict())  # no key lands on the card
    assert "internal_note" not in order.to_dict()
    assert order.extra == {"minimum_tenure_days": 7}
    assert scopes["browse"].minimum_authorization_modality == "attested"
    with pytest.raises(ValueError):
        scope_requirements_from_policies(
            {"s": {"permissions": ["a"], "ap2_trusted_issuers": [{"jwk": 5}]}}
        )
    with pytest.raises(ValueError):
        scope_requirements_from_policies({"s": "nope"})


def test_a_verifier_for_our_own_card() -> None:
    built = card_extension(
        agent_id="prf_agent_donuts01", scope_requirements=SPEC_ENTRY["params"]["scope_requirements"]
    )
    assert isinstance(built, CardExtension)
    verifier = ParafeVerifier.for_card(built, StaticBrokerKeys({"keys": []}))
    assert verifier.agent_id == "prf_agent_donuts01"
    assert verifier.scope_requirements is not None
    assert set(verifier.scope_requirements) == {"check-menu", "order-donuts"}
