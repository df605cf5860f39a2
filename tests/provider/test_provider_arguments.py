"""A Provider built in Python code is checked as its settings are: a wrong argument is an
error where it is built, naming it, never a 500 (or an unreachable Brand) later."""

from __future__ import annotations

from typing import Any

import pytest

from pactmw.config import ConfigError, Settings
from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider, ProviderSettings
from pactmw.provider.brand import Turn
from pactmw.store import open_store
from tests.support.parties import AUDIENCE, ISSUER

VERIFIER = IdentityVerifier(audience=AUDIENCE, registry=AgentRegistry([]))


def bot(turn: Turn) -> str:
    return "hi"


def build(**changes: Any) -> Provider:
    arguments: dict[str, Any] = {
        "base_url": "https://provider.example",
        "verifier": VERIFIER,
        "store": open_store("memory://"),
        "brands": [Brand(id="acme", name="Acme", handler=bot)],
    }
    arguments.update(changes)
    return Provider(**arguments)


_KEYS = public_key_set([generate_private_jwk()])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param(
            {"verifier": Settings.from_mapping({"audience": AUDIENCE})},
            "verifier must be an IdentityVerifier (Settings.build_verifier() makes one), "
            "not Settings",
            id="settings-for-verifier",
        ),
        pytest.param(
            {"store": "memory://"},
            "store must be a Store (pactmw.store.open_store(url) opens one), not a str",
            id="store-url",
        ),
        pytest.param(
            {"base_url": "provider.example"},
            "base_url must be an http:// or https:// URL (got 'provider.example')",
            id="base-url-without-scheme",
        ),
        pytest.param(
            {"brands": {"acme": Brand(id="acme", name="Acme", handler=bot)}},
            "brands must be Brand values, not str",
            id="brands-dict",
        ),
        pytest.param(
            {"brands": [Brand(id="acme", name="Acme", handler=bot)] * 2},
            "brands: each id may be listed once ('acme' is twice)",
            id="brand-twice",
        ),
    ],
)
def test_a_wrong_argument_is_refused_where_the_provider_is_built(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        build(**changes)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": ""}, "a Brand's id must be one URL path segment (got '')"),
        ({"id": "acme/eu"}, "a Brand's id must be one URL path segment (got 'acme/eu')"),
        ({"id": ".."}, "a Brand's id must be one URL path segment (got '..')"),
        ({"id": "acme\n"}, "a Brand's id must be one URL path segment (got 'acme\\n')"),
        ({"name": ""}, "a Brand's name must be a non-empty string"),
        ({"handler": "examples.bots:order_bot"}, "a Brand's handler must be callable, not str"),
    ],
)
def test_a_brand_no_request_could_reach_or_run_is_refused(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        Brand(**{"id": "acme", "name": "Acme", "handler": bot, **fields})
    assert str(caught.value) == message


def test_the_settings_name_the_brand_whose_id_no_request_could_reach() -> None:
    data = {
        "base_url": "https://provider.example",
        "audience": AUDIENCE,
        "brands": {"acme/eu": {"handler": "examples.bots:order_bot"}},
    }
    with pytest.raises(ConfigError) as caught:
        ProviderSettings.from_mapping(data)
    assert str(caught.value) == (
        "brands.acme/eu: a Brand's id must be one URL path segment (got 'acme/eu')"
    )


def test_a_brand_id_with_a_space_is_still_one_segment() -> None:
    provider = build(brands=[Brand(id="acme co", name="Acme", handler=bot)])
    try:
        assert set(provider.brands) == {"acme co"}
    finally:
        provider.close()


@pytest.mark.parametrize(
    ("settings", "runtime", "warned"),
    [
        (Settings(audience=AUDIENCE), None, True),
        (Settings(audience=AUDIENCE, open_mode=True), None, False),
        (Settings(audience=AUDIENCE), open_store("memory://"), False),
    ],
)
def test_settings_that_verify_no_agent_say_so_when_built(
    settings: Settings, runtime: Any, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # No agent listed, no store to register one, no open mode: every caller would be refused.
    caplog.set_level("WARNING", logger="pactmw.identity")
    settings.build_verifier(runtime=runtime)
    said = [r.getMessage() for r in caplog.records if r.name == "pactmw.identity"]
    assert said == (["agents is empty: no personal agent can be verified, every caller is "
                     "refused (list the agents in agents, or serve brands, whose store keeps "
                     "agents added with `pactmw agents add`)"] if warned else [])  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"agents": (RegisteredAgent(issuer=ISSUER, jwks_uri="http://pa.example/jwks"),)},
            "agents[0].jwks_uri must be https (http only to 127.0.0.1/::1/localhost with "
            "allow_http_jwks_on_loopback = true)",
        ),
        (
            {"agents": (RegisteredAgent(issuer=ISSUER, jwks=_KEYS),) * 2},
            "agents: each issuer may be listed once",
        ),
        ({"clock_skew": 301.0}, "clock_skew must be between 0 and 300 seconds"),
        ({"jwks_timeout": 0.0}, "jwks_timeout must be between 0 and 60 seconds"),
    ],
)
def test_settings_built_in_code_are_checked_as_a_mapping_is(
    changes: dict[str, Any], message: str
) -> None:
    # Only `Settings.from_mapping` checked these: settings built in code took a JWKS URL no
    # fetch may reach (every token then jwks_unavailable) or a skew of an hour, silently.
    with pytest.raises(ConfigError) as caught:
        Settings(audience=AUDIENCE, **changes)
    assert str(caught.value) == message
    with pytest.raises(ConfigError) as read:
        Settings.from_mapping({"audience": AUDIENCE, **_as_mapping(changes)})
    assert str(read.value) == message


def _document(agent: RegisteredAgent) -> dict[str, Any]:
    assert agent.jwks is not None
    return agent.jwks.to_dict()


def _as_mapping(changes: dict[str, Any]) -> dict[str, Any]:
    """`changes` as a settings dict says them (agents as tables)."""
    agents = [
        {"issuer": agent.issuer, "jwks_uri": agent.jwks_uri}
        if agent.jwks_uri
        else {"issuer": agent.issuer, "jwks": _document(agent)}
        for agent in changes.get("agents", ())
    ]
    return {**changes, "agents": agents} if agents else changes
