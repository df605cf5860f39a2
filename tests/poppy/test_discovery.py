"""poppy.json and the issuer's RFC 8414 metadata: the SDK's own models accept what pactmw
builds, and a misconfigured company fails when it is built, naming the setting."""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from personal_agent_protocol.models import DiscoveryDocument, OAuthServerMetadata

from pactmw.protocols.poppy import (
    DISCOVERY_PATH,
    ApiDescriptor,
    PoppyCompany,
    PoppyConfigError,
    authorization_server_metadata,
    discovery_document,
    metadata_url,
)
from tests.poppy.conftest import conformance_cases, sdk_fixture

BASE = "https://shop.example/poppy/shop"


def company(**changes: Any) -> PoppyCompany:
    settings: dict[str, Any] = {
        "name": "Shop",
        "domain": "shop.example",
        "issuer": BASE,
        "token_endpoint": f"{BASE}/token",
        "revocation_endpoint": f"{BASE}/revoke",
        "device_authorization_endpoint": f"{BASE}/device",
        "device_scopes": ("orders:read", "orders:write"),
        "custom_scopes": {"orders:write": "Change your orders"},
        "conversations_endpoint": f"{BASE}/conversations",
        "operations_endpoint": f"{BASE}/operations",
        "feedback_endpoint": f"{BASE}/feedback",
        "apis": (ApiDescriptor("openapi", "https://shop.example/openapi.json", "Orders"),),
    }
    settings.update(changes)
    return PoppyCompany(**settings)


def test_pap_3_01_the_document_path() -> None:
    assert DISCOVERY_PATH == "/.well-known/poppy.json"


def test_the_sdks_discovery_model_accepts_the_document() -> None:
    document = discovery_document(company())
    parsed = DiscoveryDocument.model_validate(document)
    assert parsed.protocol_version == "0.2"
    assert parsed.organization.domain == "shop.example"
    assert parsed.auth is not None
    assert parsed.auth.issuer == BASE
    assert parsed.auth.device is not None
    assert parsed.auth.device.scopes == ["orders:read", "orders:write"]
    assert parsed.auth.direct is None  # not offered: left out, not null
    assert parsed.agent is not None
    assert parsed.agent.protocols[0].endpoint == f"{BASE}/conversations"
    assert parsed.feedback is not None
    assert parsed.extensions["operations"].version == "1"
    assert not has_null(document)  # optional members are left out, never null


def has_null(value: Any) -> bool:
    if isinstance(value, dict):
        return any(has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(has_null(v) for v in value)
    return value is None


def test_the_sdks_oauth_metadata_model_accepts_the_metadata() -> None:
    metadata = authorization_server_metadata(company())
    parsed = OAuthServerMetadata.model_validate(metadata)
    assert parsed.issuer == BASE
    assert parsed.poppy_domains == ["shop.example"]
    assert parsed.device_authorization_endpoint == f"{BASE}/device"
    assert parsed.authorization_endpoint is None
    # PAP-3.2-10: when listed, the DPoP algorithms include ES256.
    assert parsed.dpop_signing_alg_values_supported == ["ES256", "RS256"]
    assert metadata["token_endpoint_auth_methods_supported"] == ["private_key_jwt"]
    assert metadata["token_endpoint_auth_signing_alg_values_supported"] == ["ES256", "RS256"]
    assert "urn:ietf:params:oauth:grant-type:device_code" in metadata["grant_types_supported"]


def test_direct_sign_in_adds_pkce_s256() -> None:
    metadata = authorization_server_metadata(
        company(authorization_endpoint=f"{BASE}/authorize", direct_scopes=("orders:read",))
    )
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert OAuthServerMetadata.model_validate(metadata).authorization_endpoint


def test_the_fixture_documents_have_the_shape_pactmw_builds() -> None:
    """The SDK's own examples and pactmw's output have the same members (where both have
    them), so nothing pactmw writes is outside what the fixtures show."""
    ours = discovery_document(
        company(direct_scopes=("orders:read",), authorization_endpoint=f"{BASE}/authorize")
    )
    theirs = sdk_fixture("discovery-valid.json")
    assert set(ours) <= set(theirs)
    assert set(ours["auth"]) <= set(theirs["auth"])
    metadata = authorization_server_metadata(company())
    fixture = sdk_fixture("oauth-metadata-valid.json")
    assert set(fixture) - {"authorization_endpoint"} <= set(metadata)


@pytest.mark.parametrize(
    ("issuer", "expected"),
    [
        (
            "https://auth.example.com",
            "https://auth.example.com/.well-known/oauth-authorization-server",
        ),
        (
            "https://auth.provider.example/shop-a",
            "https://auth.provider.example/.well-known/oauth-authorization-server/shop-a",
        ),
        (
            "https://auth.provider.example/shop-a/",
            "https://auth.provider.example/.well-known/oauth-authorization-server/shop-a",
        ),
    ],
)
def test_metadata_url_is_rfc8414_path_insertion(issuer: str, expected: str) -> None:
    # protocol.issuer-with-a-path: the SDK's agents look exactly there.
    assert metadata_url(issuer) == expected


def test_protocol_issuer_with_a_path_case_is_what_the_builder_serves() -> None:
    case = conformance_cases("protocol", id="protocol.issuer-with-a-path")[0]
    issuer = case["expect"]["issuer"]
    metadata = authorization_server_metadata(company(issuer=issuer))
    assert metadata["issuer"] == issuer  # character for character (PAP-3.2-03)


def test_pap_3_2_06_every_domain_names_the_same_auth() -> None:
    many = company(poppy_domains=("shop.example", "www.shop.example", "shop-outlet.example"))
    documents = [discovery_document(many, d) for d in many.poppy_domains]
    assert [d["organization"]["domain"] for d in documents] == list(many.poppy_domains)
    assert all(d["auth"] == documents[0]["auth"] for d in documents)
    assert authorization_server_metadata(many)["poppy_domains"] == list(many.poppy_domains)
    with pytest.raises(PoppyConfigError, match="poppy_domains"):
        discovery_document(many, "other.example")


def test_domains_compare_without_case() -> None:
    assert discovery_document(company(domain="Shop.Example"))["organization"]["domain"] == (
        "shop.example"
    )
    assert discovery_document(company(), "SHOP.example")["organization"]["domain"] == (
        "shop.example"
    )


@pytest.mark.parametrize(
    ("changes", "setting"),
    [
        ({"issuer": "http://shop.example/poppy"}, "PoppyCompany.issuer"),
        ({"token_endpoint": "https://shop.example/t?x=1"}, "PoppyCompany.token_endpoint"),
        ({"feedback_endpoint": "http://shop.example/f"}, "PoppyCompany.feedback_endpoint"),
        ({"conversations_endpoint": "shop.example/c"}, "PoppyCompany.conversations_endpoint"),
        ({"domain": "shop.example:443"}, "PoppyCompany.domain"),
        ({"poppy_domains": ("other.example",)}, "PoppyCompany.poppy_domains"),
        ({"dpop_signing_algs": ("RS256",)}, "PoppyCompany.dpop_signing_algs"),
        ({"dpop_signing_algs": ("ES256", "HS256")}, "PoppyCompany.dpop_signing_algs"),
        ({"device_authorization_endpoint": None}, "PoppyCompany.device_scopes"),
        ({"direct_scopes": ("a",)}, "PoppyCompany.direct_scopes"),
        ({"device_scopes": ("two words",)}, "PoppyCompany.device_scopes"),
        ({"name": " "}, "PoppyCompany.name"),
        ({"conversations_endpoint": None, "apis": ()}, "conversations_endpoint"),
    ],
)
def test_misconfiguration_names_the_setting(changes: dict[str, Any], setting: str) -> None:
    with pytest.raises(PoppyConfigError, match=setting.replace(".", r"\.")):
        company(**changes)


def test_pap_6_01_api_types() -> None:
    with pytest.raises(PoppyConfigError, match="openapi or mcp"):
        ApiDescriptor("graphql", "https://shop.example/graphql", "Orders")
    with pytest.raises(PoppyConfigError, match="https"):
        ApiDescriptor("openapi", "http://shop.example/openapi.json", "Orders")
    mcp = company(apis=(ApiDescriptor("mcp", "https://shop.example/mcp", "Search"),))
    assert DiscoveryDocument.model_validate(discovery_document(mcp)).apis[0].type == "mcp"


def test_optional_parts_are_left_out() -> None:
    bare = company(
        device_authorization_endpoint=None,
        device_scopes=None,
        custom_scopes={},
        operations_endpoint=None,
        feedback_endpoint=None,
        apis=(),
    )
    document = discovery_document(bare)
    assert set(document) == {"protocol_version", "organization", "auth", "agent"}
    assert document["auth"] == {"issuer": BASE}
    metadata = authorization_server_metadata(bare)
    assert "device_authorization_endpoint" not in metadata
    assert "scopes_supported" not in metadata
    DiscoveryDocument.model_validate(document)
    OAuthServerMetadata.model_validate(metadata)


def test_companies_are_values() -> None:
    one = company()
    assert evolve(one, name="Other").name == "Other"
    assert one == company()
