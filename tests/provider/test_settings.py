"""Provider configuration: the TOML of the issue, and every way a configuration is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import examples.bots
import pytest

from pactmw.config import ConfigError, Settings
from pactmw.core.http import Request
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.protocols.identity import RegisteredAgent
from pactmw.provider import Provider, ProviderSettings, RateLimit, Skill, load_toml
from pactmw.provider.guard import guard_settings
from pactmw.provider.settings import (
    ACCEPTED_WITHOUT_BRANDS,
    DEFAULT_STORE,
    PROVIDER_KEYS,
    PROVIDER_ONLY_KEYS,
    import_handler,
)
from pactmw.store import open_store
from tests.provider import START, BodyReader, assert_a2a, assert_error, message_body, must_not_read
from tests.support.clock import FakeClock
from tests.support.parties import ISSUER

ISSUE_TOML = """\
base_url = "http://127.0.0.1:8000"
audience = "http://127.0.0.1:8000/a2a"
identity_scheme = "platformJwt"
store = "sqlite:///.pactmw/pactmw.db"
allow_http_jwks_on_loopback = true

[[agents]]
issuer = "https://pa.example"
jwks_uri = "http://127.0.0.1:9000/.well-known/jwks.json"
name = "Example Assistant"
enabled = true

[brands.acme]
name = "Acme Support"
description = "Orders and returns."
handler = "examples.bots:order_bot"
"""


@pytest.fixture
def issue_config(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "pactmw.toml"
    path.write_text(ISSUE_TOML, encoding="utf-8")
    return load_toml(str(path))


def minimal(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "base_url": "https://provider.example",
        "audience": "https://provider.example/a2a",
        "brands": {"acme": {"handler": "examples.bots:order_bot"}},
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def refused(data: dict[str, Any], **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        ProviderSettings.from_mapping(data, **kwargs)
    return str(caught.value)


# -- the issue's TOML ------------------------------------------------------------------------


def test_issue_toml_parses(issue_config: dict[str, Any]) -> None:
    settings = ProviderSettings.from_mapping(issue_config)
    assert settings.base_url == "http://127.0.0.1:8000"
    assert settings.identity.audience == "http://127.0.0.1:8000/a2a"
    assert settings.identity.allow_http_jwks_on_loopback is True
    assert settings.identity_scheme == "platformJwt"
    assert settings.store == "sqlite:///.pactmw/pactmw.db"
    (agent,) = settings.identity.agents
    assert agent.issuer == "https://pa.example"
    assert agent.jwks_uri == "http://127.0.0.1:9000/.well-known/jwks.json"
    assert agent.jwks is None
    assert agent.name == "Example Assistant"
    assert agent.enabled is True
    (brand,) = settings.brands
    assert brand.id == "acme"
    assert brand.name == "Acme Support"
    assert brand.description == "Orders and returns."
    assert brand.handler is examples.bots.order_bot
    assert brand.skills == ()
    assert brand.version == "0.1.0"
    # Defaults for everything the TOML leaves out.
    assert settings.organization == ""
    assert settings.rate_limit == RateLimit()
    assert not settings.rate_limit.enabled
    assert settings.max_body_bytes == 1024 * 1024
    assert settings.conversation_idle_timeout is None
    assert settings.claim_lease_seconds == 120.0


def test_issue_toml_builds_a_provider(issue_config: dict[str, Any], tmp_path: Path) -> None:
    settings = ProviderSettings.from_mapping(issue_config)
    settings = attrs.evolve(settings, store=f"sqlite:///{tmp_path}/pactmw.db")
    provider = Provider.from_settings(settings)
    try:
        assert (tmp_path / "pactmw.db").exists()
        request_path = "/a2a/acme/.well-known/agent-card.json"
        card = assert_a2a(provider.handle(Request("GET", request_path), must_not_read), 200)
        assert card["name"] == "Acme Support"
        assert card["description"] == "Orders and returns."
        assert card["supportedInterfaces"][0] == {
            "url": "http://127.0.0.1:8000/a2a/acme",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        }
        assert list(card["securitySchemes"]) == ["platformJwt"]
        assert card["provider"]["url"] == "http://127.0.0.1:8000"
    finally:
        provider.close()


def test_issue_toml_runs_the_example_bot(
    issue_config: dict[str, Any], tmp_path: Path, pa_keys: dict[str, PrivateJWK]
) -> None:
    """The issue's configuration end to end, with the agent's JWKS inline (nothing fetched)."""
    key = pa_keys[ISSUER]
    agent = dict(issue_config["agents"][0])
    del agent["jwks_uri"]
    agent["jwks"] = public_key_set([key]).to_dict()
    issue_config["agents"] = [agent]
    settings = ProviderSettings.from_mapping(issue_config)
    clock = FakeClock(START)
    provider = Provider.from_settings(
        settings, store=open_store(f"sqlite:///{tmp_path}/bot.db"), clock=clock
    )

    def say(
        text: str, context_id: str | None = None, aud: str = "http://127.0.0.1:8000/a2a"
    ) -> Any:
        now = int(clock())
        claims = {
            "iss": ISSUER,
            "sub": "user-1",
            "aud": aud,
            "iat": now,
            "exp": now + 120,
        }
        token = "Bearer " + sign_compact(claims, key, typ="JWT")
        # `Request.path` is decoded already (the server decoded `message%3Asend` once).
        request = Request("POST", "/a2a/acme/message:send", headers=(("authorization", token),))
        return provider.handle(request, BodyReader(message_body(text, context_id=context_id)))

    try:
        first = assert_a2a(say("I want to return something"), 200)["message"]
        assert first["parts"] == [{"text": examples.bots.ASK_FOR_NUMBER}]
        context_id = first["contextId"]
        second = assert_a2a(say("It's A-1001", context_id), 200)["message"]
        assert second["contextId"] == context_id
        assert second["parts"][0]["text"].startswith("I've started a return for order A-1001")
        third = assert_a2a(say("thanks, bye", context_id), 200)["message"]
        assert third["parts"] == [{"text": "You're welcome. Have a good day!"}]
        # The bot closed the conversation.
        assert_error(
            say("one more thing", context_id), "UNSUPPORTED_OPERATION", "Conversation is closed"
        )
        # The audience is the configured one, not the interface URL.
        assert say("hello", aud="http://127.0.0.1:8000/a2a/acme").status == 401
    finally:
        provider.close()


def test_examples_package_is_importable() -> None:
    # Compared as objects: describe_order is not a turn handler, and import_handler does not
    # check what it imports.
    order_bot: object = import_handler("examples.bots:order_bot")
    assert order_bot is examples.bots.order_bot
    describe_order: object = import_handler("examples.bots:describe_order")
    assert describe_order is examples.bots.describe_order


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"basee_url": "x"}, "basee_url"),
        ({"brand": {}}, "brand"),
        ({"rate_limits": {}}, "rate_limits"),
        (
            {"agents": [{"issuer": "https://pa.example", "jwks_url": "https://pa.example/j"}]},
            "agents[0].jwks_url",
        ),
        (
            {"brands": {"acme": {"handler": "examples.bots:order_bot", "handlr": "x"}}},
            "brands.acme.handlr",
        ),
        (
            {
                "brands": {
                    "acme": {
                        "handler": "examples.bots:order_bot",
                        "skills": [{"id": "a", "name": "A", "description": "d", "tag": []}],
                    }
                }
            },
            "brands.acme.skills[0].tag",
        ),
        ({"rate_limit": {"per_agent": 5, "per_agnet": 5}}, "rate_limit.per_agnet"),
    ],
)
def test_unknown_keys_are_named(change: dict[str, Any], key: str) -> None:
    message = refused(minimal(**change))
    assert f"unknown configuration key {key}" in message


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("name", 1, "agents[0].name must be a str"),
        ("enabled", "yes", "agents[0].enabled must be a bool"),
        ("audience", 1, "agents[0].audience must be a non-empty string"),
        ("jwks_uri", 1, "agents[0].jwks_uri must be a non-empty string"),
    ],
)
def test_an_agent_key_of_the_wrong_type_is_named_once(key: str, value: Any, expected: str) -> None:
    agent = {"issuer": "https://pa.example", "jwks_uri": "https://pa.example/j", key: value}
    assert refused(minimal(agents=[agent])) == expected


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ({}, "agents[0].jwks_uri or jwks is required"),
        (
            {"jwks_uri": "https://pa.example/j", "jwks": {"keys": []}},
            "agents[0].jwks_uri and jwks are both set: give one",
        ),
    ],
)
def test_an_agent_without_exactly_one_key_source_names_it_once(
    keys: dict[str, Any], expected: str
) -> None:
    """The entry is named once, by its place, not again by its issuer inside the sentence."""
    assert refused(minimal(agents=[{"issuer": "https://pa.example", **keys}])) == expected


def test_an_agent_name_with_a_bidi_control_is_refused() -> None:
    """As `pactmw agents add` refuses it: a label the pages isolate needs no override, and one
    could reorder the sentence around the name (tests/advisories/test_bidi_names.py)."""
    agent = {"issuer": "https://pa.example", "jwks_uri": "https://pa.example/j"}
    message = refused(minimal(agents=[{**agent, "name": "Helper\u2069\u202eX"}]))
    assert message == "agents[0].name must not hold bidirectional controls (U+2069)"
    kept = ProviderSettings.from_mapping(minimal(agents=[{**agent, "name": "مساعد \u200f2"}]))
    assert [a.name for a in kept.identity.agents] == ["مساعد \u200f2"]


def test_unknown_key_in_the_issue_toml(issue_config: dict[str, Any]) -> None:
    issue_config["brands"]["acme"]["greeting"] = "hi"
    assert "brands.acme.greeting" in refused(issue_config)
    del issue_config["brands"]["acme"]["greeting"]
    issue_config["listen"] = "0.0.0.0"
    assert "listen" in refused(issue_config)


@pytest.mark.parametrize("audience", [None, "", 5])
def test_audience_is_required(audience: Any) -> None:
    data = minimal()
    if audience is None:
        del data["audience"]
    else:
        data["audience"] = audience
    assert "audience" in refused(data)


@pytest.mark.parametrize("base_url", [None, "", "provider.example", "ftp://x.example", 5])
def test_base_url_is_required(base_url: Any) -> None:
    data = minimal()
    if base_url is None:
        del data["base_url"]
    else:
        data["base_url"] = base_url
    assert "base_url" in refused(data)


@pytest.mark.parametrize("base_url", ["127.0.0.1:8000", "provider.example", "ftp://x.example"])
def test_a_base_url_without_its_scheme_is_named_as_written_not_as_missing(base_url: str) -> None:
    # A Django or Flask settings dict that holds "127.0.0.1:8000" was told base_url "is
    # required", which sends its author looking for a key that is there.
    assert refused(minimal(base_url=base_url)) == (
        f"base_url must be an http:// or https:// URL (got {base_url!r})"
    )


@pytest.mark.parametrize("base_url", [None, "", 5])
def test_a_missing_base_url_is_required(base_url: Any) -> None:
    data = minimal()
    if base_url is None:
        del data["base_url"]
    else:
        data["base_url"] = base_url
    assert refused(data) == "base_url is required: the public http(s) URL of this Provider"


def test_base_url_trailing_slash_is_removed() -> None:
    settings = ProviderSettings.from_mapping(minimal(base_url="https://provider.example/"))
    assert settings.base_url == "https://provider.example"


@pytest.mark.parametrize("handler", [None, 5, ""])
def test_handler_is_required(handler: Any) -> None:
    brand: dict[str, Any] = {"name": "Acme"}
    if handler is not None:
        brand["handler"] = handler
    assert "handler" in refused(minimal(brands={"acme": brand}))


@pytest.mark.parametrize(
    "path",
    [
        "examples.bots:no_such_bot",
        "examples.no_such_module:order_bot",
        "no_such_package_pactmw.bots:bot",
        "examples.bots",
        ":order_bot",
        "examples.bots:",
        "examples.bots:ORDERS",  # not callable
        "examples.bots:ORDERS.get.nope",
    ],
)
def test_bad_handler_import_paths(path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        import_handler(path)
    assert path in str(caught.value)
    assert path in refused(minimal(brands={"acme": {"handler": path}}))


def test_handler_by_name_or_callable() -> None:
    def bot(turn: Any) -> str:
        return "hi"

    by_name = ProviderSettings.from_mapping(
        minimal(brands={"acme": {"handler": "mine"}}), handlers={"mine": bot}
    )
    assert by_name.brands[0].handler is bot
    direct = ProviderSettings.from_mapping(minimal(brands={"acme": {"handler": bot}}))
    assert direct.brands[0].handler is bot
    dotted = ProviderSettings.from_mapping(
        minimal(brands={"acme": {"handler": "examples.bots:ORDERS.get"}})
    )
    dotted_handler: object = dotted.brands[0].handler
    assert dotted_handler == examples.bots.ORDERS.get


@pytest.mark.parametrize("scheme", ["", "PAJWT", "platformjwt", "bearer", 5, None])
def test_identity_scheme_must_be_known(scheme: Any) -> None:
    data = minimal()
    data["identity_scheme"] = scheme
    assert "identity_scheme" in refused(data)


def test_identity_scheme_pa_jwt() -> None:
    settings = ProviderSettings.from_mapping(minimal(identity_scheme="paJwt"))
    assert settings.identity_scheme == "paJwt"
    provider = Provider.from_settings(settings, store=open_store("memory://"))
    try:
        assert list(provider.card("acme")["securitySchemes"]) == ["paJwt"]
    finally:
        provider.close()


# -- rate_limit and the other numbers -------------------------------------------------------


def test_rate_limit_parsing() -> None:
    settings = ProviderSettings.from_mapping(
        minimal(rate_limit={"per_agent": 20, "per_user": 5, "window": 30})
    )
    assert settings.rate_limit == RateLimit(per_agent=20, per_user=5, window=30.0)
    assert isinstance(settings.rate_limit.window, float)
    assert settings.rate_limit.enabled
    only_user = ProviderSettings.from_mapping(minimal(rate_limit={"per_user": 1}))
    assert only_user.rate_limit == RateLimit(per_user=1)
    assert ProviderSettings.from_mapping(minimal(rate_limit={})).rate_limit == RateLimit()


@pytest.mark.parametrize(
    ("rate", "needle"),
    [
        ({"per_agent": 0}, "rate_limit.per_agent"),
        ({"per_agent": -1}, "rate_limit.per_agent"),
        ({"per_agent": "20"}, "rate_limit.per_agent"),
        ({"per_agent": True}, "rate_limit.per_agent"),
        ({"per_user": 0}, "rate_limit.per_user"),
        ({"window": 0}, "rate_limit.window"),
        ({"window": "60"}, "rate_limit.window"),
        ("20/min", "rate_limit"),
        ([20], "rate_limit"),
    ],
)
def test_rate_limit_refusals(rate: Any, needle: str) -> None:
    assert needle in refused(minimal(rate_limit=rate))


def test_endpoint_rate_limits_and_sharing() -> None:
    settings = ProviderSettings.from_mapping(
        minimal(
            consent_rate_limit={"per_agent": 5},
            device_rate_limit={"per_user": 2, "window": 10},
            token_rate_limit={},
            shared_rate_limits=True,
        )
    )
    assert settings.consent_rate_limit == RateLimit(per_agent=5)
    assert settings.device_rate_limit == RateLimit(per_user=2, window=10.0)
    assert settings.token_rate_limit == RateLimit()  # an empty table: no limit
    assert settings.shared_rate_limits is True
    defaults = ProviderSettings.from_mapping(minimal())
    assert defaults.consent_rate_limit is None  # None: the Provider's defaults
    assert defaults.device_rate_limit is None
    assert defaults.token_rate_limit is None
    assert defaults.shared_rate_limits is None  # the store decides


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"device_rate_limit": {"per_user": 0}}, "device_rate_limit.per_user"),
        ({"token_rate_limit": {"per_agent": "5"}}, "token_rate_limit.per_agent"),
        ({"consent_rate_limit": {"burst": 5}}, "consent_rate_limit.burst"),
        ({"device_rate_limit": 30}, "device_rate_limit"),
        ({"shared_rate_limits": "yes"}, "shared_rate_limits"),
    ],
)
def test_endpoint_rate_limit_refusals(changes: dict[str, Any], needle: str) -> None:
    assert needle in refused(minimal(**changes))


def test_sharing_rate_limits_needs_a_store_that_counts() -> None:
    class NoCounters:
        """A store that keeps no rate-limit counters (a custom one)."""

        def __getattr__(self, name: str) -> Any:
            if name in ("count_request", "shares_rate_limits"):
                raise AttributeError(name)
            return getattr(backing, name)

    backing = open_store("memory://")
    settings = ProviderSettings.from_mapping(minimal(shared_rate_limits=True))
    with pytest.raises(ValueError, match="shared_rate_limits needs a store that keeps"):
        Provider.from_settings(settings, store=NoCounters())
    # Counting in the memory store works, and is what the Provider then uses.
    provider = Provider.from_settings(settings, store=backing)
    try:
        assert provider.rate_limiter.shared
    finally:
        provider.close()
    unshared = Provider.from_settings(
        ProviderSettings.from_mapping(minimal()), store=open_store("memory://")
    )
    try:
        assert not unshared.rate_limiter.shared  # memory: per process unless asked
    finally:
        unshared.close()


def test_other_numbers() -> None:
    settings = ProviderSettings.from_mapping(
        minimal(max_body_bytes=4096, conversation_idle_timeout=900, claim_lease_seconds=30)
    )
    assert settings.max_body_bytes == 4096
    assert settings.conversation_idle_timeout == 900
    assert settings.claim_lease_seconds == 30.0
    for key in ("max_body_bytes", "conversation_idle_timeout", "claim_lease_seconds"):
        for bad in (0, -5, "10", True, float("nan"), float("inf"), float("-inf")):
            assert key in refused(minimal(**{key: bad}))
    for bad_window in (float("nan"), float("inf")):
        assert "rate_limit.window" in refused(minimal(rate_limit={"window": bad_window}))


def test_retention_days_is_a_positive_finite_number_of_days_or_absent() -> None:
    assert ProviderSettings.from_mapping(minimal()).retention_days is None  # keep forever
    assert ProviderSettings.from_mapping(minimal(retention_days=30)).retention_days == 30.0
    assert ProviderSettings.from_mapping(minimal(retention_days=0.5)).retention_days == 0.5
    for bad in (0, -1, "30", True, float("inf"), float("nan"), [30]):
        message = refused(minimal(retention_days=bad))
        assert message.startswith("retention_days must be a positive number"), (bad, message)


def test_retention_days_reaches_the_provider(tmp_path: Path) -> None:
    settings = ProviderSettings.from_mapping(
        minimal(retention_days=7, store=f"sqlite:///{tmp_path}/pactmw.db")
    )
    provider = Provider.from_settings(settings)
    try:
        assert provider.retention_days == 7.0
    finally:
        provider.close()


def test_store_organization_and_brands_shapes() -> None:
    assert ProviderSettings.from_mapping(minimal()).store == DEFAULT_STORE
    assert ProviderSettings.from_mapping(minimal(store="memory://")).store == "memory://"
    assert "store" in refused(minimal(store=""))
    assert "store" in refused(minimal(store=5))
    assert "organization" in refused(minimal(organization=5))
    assert "brands" in refused(minimal(brands=["acme"]))
    assert "brands.acme" in refused(minimal(brands={"acme": "examples.bots:order_bot"}))


def test_brand_fields() -> None:
    settings = ProviderSettings.from_mapping(
        minimal(
            organization="Example Provider",
            brands={
                "acme": {
                    "handler": "examples.bots:order_bot",
                    "version": "1.2.0",
                    "skills": [
                        {
                            "id": "orders",
                            "name": "Orders",
                            "description": "Order status.",
                            "tags": ["orders"],
                            "examples": ["Where is A-1001?"],
                        }
                    ],
                },
                "globex": {"handler": "examples.bots:order_bot", "name": "Globex"},
            },
        )
    )
    acme, globex = settings.brands
    assert acme.name == "acme"  # the id when no name is given
    assert acme.version == "1.2.0"
    assert acme.skills == (
        Skill(
            id="orders",
            name="Orders",
            description="Order status.",
            tags=("orders",),
            examples=("Where is A-1001?",),
        ),
    )
    assert globex.name == "Globex"
    assert settings.organization == "Example Provider"
    for brand in (
        {"handler": "examples.bots:order_bot", "name": ""},
        {"handler": "examples.bots:order_bot", "description": 5},
        {"handler": "examples.bots:order_bot", "skills": {"id": "x"}},
        {"handler": "examples.bots:order_bot", "skills": [{"id": "x", "name": "X"}]},
        {
            "handler": "examples.bots:order_bot",
            "skills": [{"id": "x", "name": "X", "description": "d", "tags": "orders"}],
        },
    ):
        assert "brands.acme" in refused(minimal(brands={"acme": brand}))


# -- load_toml -------------------------------------------------------------------------------


def test_load_toml_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_toml(str(tmp_path / "missing.toml"))
    broken = tmp_path / "broken.toml"
    broken.write_text('base_url = "http://x\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_toml(str(broken))


def test_load_toml_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(ISSUE_TOML + "\n[rate_limit]\nper_agent = 20\n", encoding="utf-8")
    data = load_toml(str(path))
    assert json.loads(json.dumps(data))["brands"]["acme"]["name"] == "Acme Support"
    assert ProviderSettings.from_mapping(data).rate_limit == RateLimit(per_agent=20)


@pytest.mark.parametrize(
    ("key", "value"),
    [("max_body_bytes", 1.5), ("rate_limit", {"per_agent": 1.5}), ("rate_limit", {"per_user": 0})],
)
def test_counts_must_be_positive_whole_numbers(key: str, value: object) -> None:
    data = minimal(**{key: value})
    with pytest.raises(ConfigError, match="whole number"):
        ProviderSettings.from_mapping(data)


@pytest.mark.parametrize(
    ("uri", "allow_http"),
    [
        ("ftp://pa.example/jwks.json", True),
        ("http://pa.example/jwks.json", True),
        ("http://127.0.0.1:9000/jwks.json", False),
        ("jwks.json", True),
    ],
)
def test_a_jwks_uri_that_could_never_be_fetched_is_refused_at_load(
    uri: str, allow_http: bool
) -> None:
    data = minimal(allow_http_jwks_on_loopback=allow_http)
    data["agents"] = [{"issuer": "https://pa.example", "jwks_uri": uri}]
    with pytest.raises(ConfigError, match=r"agents\[0\]\.jwks_uri"):
        ProviderSettings.from_mapping(data)


@pytest.mark.parametrize(
    "uri", ["https://pa.example/jwks.json", "http://127.0.0.1:9000/j", "http://localhost/j"]
)
def test_fetchable_jwks_uris_load(uri: str) -> None:
    data = minimal(allow_http_jwks_on_loopback=True)
    data["agents"] = [{"issuer": "https://pa.example", "jwks_uri": uri}]
    assert ProviderSettings.from_mapping(data).identity.agents[0].jwks_uri == uri


ISSUER_RULE = (
    "must be an absolute http(s) URL, exactly as the agent's tokens have it in iss "
    "(e.g. https://pa.example)"
)


@pytest.mark.parametrize(
    "issuer",
    [
        "pa.example",  # a new user's trial: accepted, then every token was unknown_issuer
        "pa.example/agents/7",
        "127.0.0.1:9000",
        "urn:example:pa",
        "ftp://pa.example",
        "https://",
        "https://[::1",
        "https://pa.example ",  # iss is matched exactly: a stray space matches no token
        " https://pa.example",
        "https://pa.example/\tx",
    ],
)
def test_an_issuer_that_no_token_could_match_is_refused_at_load(issuer: str) -> None:
    data = minimal(agents=[{"issuer": issuer, "jwks_uri": "https://pa.example/jwks.json"}])
    assert refused(data) == f"agents[0].issuer {ISSUER_RULE}: {issuer!r}"
    # The identity-only settings of an app that serves no Provider read agents alike.
    identity = {"audience": "https://api.example", "agents": data["agents"]}
    with pytest.raises(ConfigError, match=r"^agents\[0\]\.issuer must be an absolute"):
        guard_settings(identity)


@pytest.mark.parametrize(
    "issuer", ["https://pa.example", "http://127.0.0.1:9000", "https://café.example/agents/7"]
)
def test_absolute_http_issuers_load(issuer: str) -> None:
    data = minimal(agents=[{"issuer": issuer, "jwks_uri": "https://pa.example/jwks.json"}])
    assert ProviderSettings.from_mapping(data).identity.agents[0].issuer == issuer


def test_a_second_agent_with_a_bad_issuer_is_named_by_its_index() -> None:
    good = {"issuer": "https://pa.example", "jwks_uri": "https://pa.example/jwks.json"}
    bad = {"issuer": "pa2.example", "jwks_uri": "https://pa2.example/jwks.json"}
    assert refused(minimal(agents=[good, bad])) == f"agents[1].issuer {ISSUER_RULE}: 'pa2.example'"


def test_settings_built_in_code_refuse_a_bad_issuer_too() -> None:
    # `Settings(...)` skips `from_mapping`: its agents are checked all the same, at startup.
    keys = public_key_set([generate_private_jwk()])
    good = RegisteredAgent(issuer="https://pa.example", jwks=keys)
    bad = RegisteredAgent(issuer="pa.example", jwks=keys)
    with pytest.raises(ConfigError) as caught:
        Settings(audience="https://api.example", agents=(good, bad))
    assert str(caught.value) == f"agents[1].issuer {ISSUER_RULE}: 'pa.example'"
    assert Settings(audience="https://api.example", agents=(good,)).agents == (good,)


def test_turn_timeout_is_a_positive_finite_number_of_seconds_or_absent() -> None:
    assert ProviderSettings.from_mapping(minimal()).turn_timeout is None  # wait for the bot
    assert ProviderSettings.from_mapping(minimal(turn_timeout=45)).turn_timeout == 45.0
    assert ProviderSettings.from_mapping(minimal(turn_timeout=0.5)).turn_timeout == 0.5
    for bad in (0, -1, "30", True, float("inf"), float("nan"), [30]):
        message = refused(minimal(turn_timeout=bad))
        assert message.startswith("turn_timeout must be a positive number"), (bad, message)


def test_turn_timeout_reaches_the_message_sender(tmp_path: Path) -> None:
    settings = ProviderSettings.from_mapping(
        minimal(turn_timeout=12, store=f"sqlite:///{tmp_path}/pactmw.db")
    )
    provider = Provider.from_settings(settings)
    try:
        assert provider._sender.turn_timeout == 12.0
    finally:
        provider.close()


def _with_delegation(**delegation: Any) -> dict[str, Any]:
    table = {"login_url": "/login", "scopes": {"orders:read": "See your orders"}, **delegation}
    return minimal(brands={"acme": {"handler": "examples.bots:order_bot", "delegation": table}})


def test_refresh_reuse_interval_defaults_to_a_few_seconds_and_is_bounded() -> None:
    def interval(**delegation: Any) -> float:
        settings = ProviderSettings.from_mapping(_with_delegation(**delegation))
        config = settings.brands[0].delegation
        assert config is not None
        return config.refresh_reuse_interval

    assert interval() == 5.0
    assert interval(refresh_reuse_interval=0) == 0  # off: the strict RFC 9700 rule
    assert interval(refresh_reuse_interval=60) == 60
    assert interval(refresh_reuse_interval=2.5) == 2.5
    for bad in (-1, 61, "5", True, float("inf"), float("nan"), [5]):
        message = refused(_with_delegation(refresh_reuse_interval=bad))
        assert message.startswith(
            "brands.acme.delegation: refresh_reuse_interval must be a number of seconds"
        ), (bad, message)


def test_device_code_seconds_defaults_to_ten_minutes_and_is_bounded() -> None:
    def lifetime(**delegation: Any) -> int:
        settings = ProviderSettings.from_mapping(_with_delegation(**delegation))
        config = settings.brands[0].delegation
        assert config is not None
        return config.device_code_seconds

    assert lifetime() == 600
    assert lifetime(device_code_seconds=1) == 1
    assert lifetime(device_code_seconds=3600) == 3600
    for bad in (0, -1, 3601, 2.5, "600", True, float("inf"), float("nan"), [600]):
        message = refused(_with_delegation(device_code_seconds=bad))
        assert message.startswith(
            "brands.acme.delegation: device_code_seconds must be a whole number of seconds "
            "from 1 to 3600"
        ), (bad, message)


def test_a_bad_grant_days_or_interval_names_its_table_once() -> None:
    # The table's name, once: not "brands.acme.delegation: brands.acme.delegation.grant_days".
    for key, kind in (("grant_days", "number"), ("interval", "whole number")):
        message = refused(_with_delegation(**{key: "30"}))
        assert message == f"brands.acme.delegation.{key} must be a positive {kind}", message


def test_a_missing_login_url_is_said_to_be_required() -> None:
    table = {"scopes": {"orders:read": "See your orders"}}
    brand = {"handler": "examples.bots:order_bot", "delegation": table}
    message = refused(minimal(brands={"acme": brand}))
    assert message.startswith("brands.acme.delegation.login_url is required"), message
    # A value that is there but wrong keeps its own words.
    message = refused(_with_delegation(login_url="login"))
    assert message == "brands.acme.delegation.login_url must be an absolute URL or a path"


# -- without brands: an app that only verifies identities (guard_settings) -------------------

IDENTITY_ONLY = {"audience": "https://provider.example/a2a"}

#: A valid value of every key only a Provider reads (each builds with `brands`, see below).
PROVIDER_ONLY_VALUES: dict[str, Any] = {
    "base_url": "https://provider.example",
    "identity_scheme": "paJwt",
    "store": "postgresql://nouser@127.0.0.1:1/x",
    "organization": "Acme Corp",
    "rate_limit": {"per_agent": 5},
    "consent_rate_limit": {"per_agent": 5},
    "device_rate_limit": {"per_user": 5},
    "token_rate_limit": {"per_user": 5},
    "shared_rate_limits": False,
    "max_body_bytes": 2048,
    "conversation_idle_timeout": 600,
    "claim_lease_seconds": 60,
    "turn_timeout": 30,
    "retention_days": 30,
    "signing_keys": [],
    "data_dir": ".pactmw-elsewhere",
    "admin_show_message_text": True,
    "audit": "tests.support.audit_sink:record",
}


def test_every_provider_key_is_either_provider_only_or_accepted_without_brands() -> None:
    # A new Provider key must be sorted into one of the two (and get a value above).
    assert set(PROVIDER_ONLY_VALUES) == PROVIDER_ONLY_KEYS
    assert frozenset({"brands", "templates", "delegation_brand", "parafe_brand"}) == (
        ACCEPTED_WITHOUT_BRANDS
    )
    assert PROVIDER_ONLY_KEYS | ACCEPTED_WITHOUT_BRANDS == PROVIDER_KEYS


@pytest.mark.parametrize(("key", "value"), sorted(PROVIDER_ONLY_VALUES.items()))
def test_a_provider_key_without_brands_is_refused_naming_it(key: str, value: Any) -> None:
    # The value is fine: with brands it builds (nothing is opened yet).
    assert guard_settings(minimal(**{key: value})).provider is not None
    with pytest.raises(ConfigError) as caught:
        guard_settings({**IDENTITY_ONLY, key: value})
    assert str(caught.value) == (
        f"{key} is a Provider setting: it needs brands (add brands, or remove {key})"
    )


def test_the_first_provider_key_is_named_whichever_comes_first() -> None:
    with pytest.raises(ConfigError, match=r"^retention_days is a Provider setting"):
        guard_settings({**IDENTITY_ONLY, "store": "memory://", "retention_days": 3})


def test_a_misspelt_brands_is_named_as_the_unknown_key_it_is() -> None:
    # "brand" for "brands": the Provider keys written beside it are not what is wrong.
    misspelt = {**IDENTITY_ONLY, "base_url": "https://shop.example", "brand": {"acme": {}}}
    with pytest.raises(ConfigError) as caught:
        guard_settings(misspelt)
    assert str(caught.value) == "unknown configuration key brand (did you mean brands?)"


def test_templates_alone_without_brands_is_an_identity_only_app(tmp_path: Path) -> None:
    for templates in (str(tmp_path), [str(tmp_path)]):
        settings = guard_settings({**IDENTITY_ONLY, "templates": templates})
        assert settings.provider is None
        assert settings.identity.audience == IDENTITY_ONLY["audience"]


def test_delegation_and_parafe_brand_without_brands_keep_their_own_words() -> None:
    assert guard_settings({**IDENTITY_ONLY, "delegation_brand": None}).provider is None
    with pytest.raises(ConfigError) as caught:
        guard_settings({**IDENTITY_ONLY, "delegation_brand": "acme"})
    assert str(caught.value) == "delegation_brand 'acme' is not one of brands"
    with pytest.raises(ConfigError) as caught:
        guard_settings({**IDENTITY_ONLY, "parafe_brand": "acme"})
    assert str(caught.value) == "parafe_brand 'acme' has no [brands.X.parafe]"


@pytest.mark.parametrize("written", ["pa-jwks.json", "/etc/pactmw/pa-jwks.json", "keys.jwks"])
def test_a_jwks_given_as_a_file_name_says_it_takes_the_document(written: str) -> None:
    data = minimal()
    data["agents"] = [{"issuer": "https://pa.example", "jwks": written}]
    assert refused(data) == (
        f"agents[0].jwks: {written!r} is not a JWKS document; jwks takes the document itself "
        "(a table, or its JSON text), not a file name: read the file, or serve it and give "
        "jwks_uri"
    )


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"audiance": "x"}, "unknown configuration key audiance (did you mean audience?)"),
        # Flask's own settings are upper case (JWT_SECRET_KEY); PACTMW's keys are not.
        (
            {"PROTECT_PREFIX": "/api/"},
            "unknown configuration key PROTECT_PREFIX (did you mean protect_prefix?)",
        ),
        (
            {"brands": {"acme": {"handlr": "examples.bots:order_bot"}}},
            "unknown configuration key brands.acme.handlr (did you mean brands.acme.handler?)",
        ),
        (
            {"rate_limit": {"per_agnet": 5}},
            "unknown configuration key rate_limit.per_agnet (did you mean rate_limit.per_agent?)",
        ),
        ({"bogus": 1}, "unknown configuration key bogus"),  # nothing near it: no guess
    ],
)
def test_a_misspelt_key_is_named_with_the_key_it_is_closest_to(
    change: dict[str, Any], said: str
) -> None:
    # Found in a Flask trial: "unknown configuration key audiance" left its reader to find
    # the right spelling in the docs' table.
    assert refused(minimal(**change)) == said


@pytest.mark.parametrize(
    ("base_url", "part"),
    [
        ("https://provider.example?x=1", "a query"),
        ("https://provider.example/?x=1", "a query"),
        ("https://provider.example#top", "a fragment"),
        ("https://provider.example/a2a#", "a fragment"),
    ],
)
def test_a_base_url_with_a_query_or_fragment_is_refused(base_url: str, part: str) -> None:
    # Every URL pactmw publishes is base_url plus a path: "https://provider.example?x=1"
    # would advertise "https://provider.example?x=1/a2a/acme", which reaches no interface,
    # and the deployment would fail only when an agent follows the card.
    assert refused(minimal(base_url=base_url)) == (
        f"base_url must not have {part}: every URL pactmw publishes is base_url plus a path"
        f" (got {base_url!r})"
    )


@pytest.mark.parametrize(
    "base_url",
    [
        "https://ops:s3cret-pw@provider.example",
        "https://ops@provider.example/",
        "http://:s3cret-pw@h",
    ],
)
def test_a_base_url_with_credentials_is_refused_without_repeating_them(base_url: str) -> None:
    # The Agent Cards and every link would publish the user name and password to anyone;
    # and the error must not print the password into a log either.
    message = refused(minimal(base_url=base_url))
    assert message.startswith("base_url must not hold a user name or password")
    assert "s3cret-pw" not in message
    assert "ops" not in message


@pytest.mark.parametrize(
    "document",
    [
        {"keys": []},
        {"keys": [{"kty": "oct", "k": "c2VjcmV0"}]},
        # An Ed25519 key verifies neither ES256 nor RS256, the identity JWT's algorithms.
        {
            "keys": [
                {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
            ]
        },
    ],
)
def test_an_inline_jwks_without_a_key_for_identity_jwts_is_refused_at_load(
    document: dict[str, Any],
) -> None:
    """Every token of that agent would be refused as `unknown_kid`, with nothing saying why."""
    data = minimal()
    data["agents"] = [{"issuer": "https://pa.example", "jwks": document}]
    assert refused(data) == (
        "agents[0].jwks has no public key that verifies an identity JWT (ES256 or RS256): "
        "every token of this agent would be refused"
    )


def test_an_inline_jwks_with_one_usable_key_among_others_loads() -> None:
    usable = public_key_set([generate_private_jwk()]).to_dict()
    document = {"keys": [{"kty": "oct", "k": "c2VjcmV0"}, *usable["keys"]]}
    data = minimal()
    data["agents"] = [{"issuer": "https://pa.example", "jwks": document}]
    (agent,) = ProviderSettings.from_mapping(data).identity.agents
    assert agent.jwks is not None
    assert len(agent.jwks.keys) == 1
