"""A Brand's `[brands.ID.poppy]` settings are checked at startup, and each refusal names the
key to fix (docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pactmw.config import ConfigError
from pactmw.provider import Provider, ProviderSettings
from pactmw.provider.poppy import PoppyConfig
from tests.support.poppy_world import bot

HANDLER = "tests.support.poppy_world:bot"
API = {"type": "openapi", "url": "https://shop.example/openapi.json", "description": "Orders"}


def settings(base_url: str = "https://shop.example", **poppy: Any) -> dict[str, Any]:
    table: dict[str, Any] = {"domain": "shop.example", "agents": "any", "apis": [API]}
    table.update(poppy)
    table = {k: v for k, v in table.items() if v is not None}
    return {
        "audience": base_url + "/a2a",
        "base_url": base_url,
        "store": "memory://",
        "brands": {"shop": {"handler": HANDLER, "poppy": table}},
    }


def test_a_valid_table_gives_the_brand_its_poppy_config() -> None:
    parsed = ProviderSettings.from_mapping(
        settings(domains=["shop.example", "www.shop.example"], session_seconds=1800)
    )
    (brand,) = parsed.brands
    assert isinstance(brand.poppy, PoppyConfig)
    assert brand.poppy.domains == ("shop.example", "www.shop.example")
    assert brand.poppy.session_seconds == 1800
    assert brand.poppy.admits("https://anyone.example/agent.json")


def test_an_agents_list_admits_only_those() -> None:
    parsed = ProviderSettings.from_mapping(settings(agents=["https://atlas.example/agent.json"]))
    poppy = parsed.brands[0].poppy
    assert poppy is not None
    assert poppy.admits("https://atlas.example/agent.json")
    assert not poppy.admits("https://plain.example/agent.json")


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"base_url": "http://shop.example"}, "base_url must be an https URL"),
        ({"agents": None}, "brands.shop.poppy.agents is required"),
        ({"agents": "some"}, "brands.shop.poppy.agents"),
        ({"agents": []}, "brands.shop.poppy.agents"),
        ({"agents": ["http://atlas.example/agent.json"]}, "brands.shop.poppy.agents"),
        ({"domain": None}, "brands.shop.poppy.domain is required"),
        ({"domain": "not a domain"}, "brands.shop.poppy.domain"),
        ({"domains": ["www.shop.example"]}, "brands.shop.poppy.domains"),
        ({"apis": [{**API, "type": "graphql"}]}, "brands.shop.poppy.apis[0]"),
        ({"apis": [{**API, "url": "http://shop.example/o"}]}, "brands.shop.poppy.apis[0]"),
        ({"session_seconds": 0}, "brands.shop.poppy.session_seconds"),
        ({"session_seconds": 2 * 86_400}, "brands.shop.poppy.session_seconds"),
        # Found by the Poppy trial: half a second was taken, and the token's whole seconds
        # (expires_in 0) made every Session expire as it started.
        ({"session_seconds": 0.5}, "brands.shop.poppy.session_seconds"),
        ({"custom_scopes": {"bad scope": "x"}}, "brands.shop.poppy.custom_scopes"),
        ({"colour": "red"}, "unknown configuration key brands.shop.poppy.colour"),
        ({"operations": "yes"}, "brands.shop.poppy.operations must be a table"),
        ({"operations": {}}, "brands.shop.poppy.operations.executors is required"),
        (
            {"operations": {"executors": {"refund": "no_such_module:fn"}}},
            "brands.shop.poppy.operations.executors.refund 'no_such_module:fn' cannot be",
        ),
        (
            {"operations": {"executors": {"refund": "tests.support.poppy_world:SHOP"}}},
            "brands.shop.poppy.operations.executors.refund must be a callable",
        ),
        (
            {"operations": {"executors": {"": HANDLER}}},
            "brands.shop.poppy.operations.executors has an empty action name",
        ),
        (
            {"operations": {"executors": {"refund": HANDLER}, "proposal_seconds": 0}},
            "brands.shop.poppy.operations.proposal_seconds",
        ),
        (
            {"operations": {"executors": {"refund": HANDLER}, "proposal_seconds": 86_400 * 31}},
            "brands.shop.poppy.operations.proposal_seconds",
        ),
        (
            {"operations": {"executors": {"refund": HANDLER}, "retries": 3}},
            "unknown configuration key brands.shop.poppy.operations.retries",
        ),
    ],
)
def test_a_bad_setting_is_refused_at_startup_naming_its_key(
    changes: dict[str, Any], named: str
) -> None:
    base_url = changes.pop("base_url", "https://shop.example")
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        ProviderSettings.from_mapping(settings(base_url, **changes))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"domains": "shop.example"}, "brands.shop.poppy.domains must be a list of strings"),
        ({"session_seconds": 0}, "brands.shop.poppy.session_seconds must be a positive number"),
        ({"session_seconds": "3600"}, "brands.shop.poppy.session_seconds must be a positive"),
        ({"session_seconds": True}, "brands.shop.poppy.session_seconds must be a positive"),
    ],
)
def test_a_refusal_names_its_key_once(changes: dict[str, Any], message: str) -> None:
    # Found by the Poppy trial: these said "brands.shop.poppy.brands.shop.poppy.domains ...",
    # the key's table named twice, so the message named no key as it is written.
    with pytest.raises(ConfigError) as raised:
        ProviderSettings.from_mapping(settings(**changes))
    assert str(raised.value).startswith(message), str(raised.value)


def test_a_brand_without_apis_publishes_its_conversation_endpoint() -> None:
    # Conversations are enough for a Company (§3: conversations or APIs); none were before.
    from pactmw.provider import Provider

    parsed = ProviderSettings.from_mapping(settings(apis=[]))
    provider = Provider.from_settings(parsed)
    try:
        assert provider.poppy is not None
        company = provider.poppy.brands["shop"].company
        assert company.apis == ()
        assert company.conversations_endpoint == "https://shop.example/a2a/shop/poppy/conversations"
    finally:
        provider.close()


def test_an_operations_table_enables_operations_v1() -> None:
    table = {"executors": {"refund": HANDLER}, "proposal_seconds": 600, "idempotency_seconds": 60}
    parsed = ProviderSettings.from_mapping(settings(operations=table))
    poppy = parsed.brands[0].poppy
    assert poppy is not None
    assert poppy.operations is not None
    assert poppy.operations.executors["refund"] is bot  # type: ignore[comparison-overlap]
    assert poppy.operations.proposal_seconds == 600
    assert poppy.operations.idempotency_seconds == 60
    provider = Provider.from_settings(parsed)
    try:
        assert provider.poppy is not None
        company = provider.poppy.brands["shop"].company
        assert company.operations_endpoint == "https://shop.example/a2a/shop/poppy/operations"
    finally:
        provider.close()


def test_two_brands_cannot_publish_on_one_domain() -> None:
    data = settings()
    data["brands"]["other"] = {"handler": HANDLER, "poppy": data["brands"]["shop"]["poppy"]}
    with pytest.raises(ConfigError, match=r"brands\.other\.poppy\.domains.*brands\.shop"):
        ProviderSettings.from_mapping(data)


def _with_delegation(tmp_path: Path, **delegation: Any) -> dict[str, Any]:
    data = settings()
    data["data_dir"] = str(tmp_path)  # the development signing key goes here
    table: dict[str, Any] = {"scopes": {"orders:read": "Read your orders"}, "login_url": "/login"}
    table.update(delegation)
    data["brands"]["shop"]["delegation"] = table
    return data


def test_pap_4_6_a_poppy_brand_with_delegation_offers_device_sign_in(tmp_path: Path) -> None:
    provider = Provider.from_settings(ProviderSettings.from_mapping(_with_delegation(tmp_path)))
    try:
        assert provider.poppy is not None
        company = provider.poppy.brands["shop"].company
        assert company.device_authorization_endpoint == (
            "https://shop.example/a2a/shop/poppy/device"
        )
        assert company.device_scopes == ("orders:read",)
    finally:
        provider.close()


def test_pap_4_6_02_a_brand_login_elsewhere_is_refused_naming_the_setting(tmp_path: Path) -> None:
    data = _with_delegation(
        tmp_path,
        login="brand",
        login_url="https://login.elsewhere.example/signin",
        brand_issuer="https://login.elsewhere.example",
        brand_jwks_uri="https://login.elsewhere.example/jwks.json",
    )
    # A ConfigError, as every startup refusal is (`pactmw serve` took this ValueError for
    # the store's, Flask's init_app let it out as a bare ValueError).
    with pytest.raises(ConfigError, match=r"brands\.shop\.delegation\.login_url must be on"):
        Provider.from_settings(ProviderSettings.from_mapping(data))
