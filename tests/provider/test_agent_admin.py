"""The operator functions behind `pactmw agents|cleanup` and their Django and Flask twins
(`pactmw.provider.agent_admin`), on real Providers over a real store. The front-ends are
run for real in tests/adapters/test_agent_commands.py; these are the rules' corners."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pactmw.core.jwk import generate_private_jwk
from pactmw.provider import Provider, ProviderSettings
from pactmw.provider.agent_admin import (
    DAY,
    MAX_NAME_LENGTH,
    MAX_URL_LENGTH,
    AgentEntry,
    Outcome,
    add_agent,
    add_refusal,
    agent_json,
    agents_report,
    agents_table,
    check_issuer,
    list_agents,
    poppy_agent_ids,
    poppy_owner,
    remove_agent,
    run_cleanup,
    set_enabled,
    switch_refusal,
)
from pactmw.store import Cleanup, MemoryStore

NOW = 1_800_000_000.0
JWKS = {"keys": [generate_private_jwk("ES256", kid="k").public.to_dict()]}


def _provider(**changes: Any) -> Provider:
    data: dict[str, Any] = {
        "base_url": "https://provider.example",
        "audience": "https://provider.example/a2a",
        "agents": [
            {"issuer": "https://inline.example", "name": "Inline", "jwks": JWKS},
            {
                "issuer": "https://off.example",
                "jwks_uri": "https://off.example/j",
                "enabled": False,
            },
        ],
        "brands": {"acme": {"handler": "examples.bots:order_bot"}},
    }
    data.update(changes)
    return Provider.from_settings(ProviderSettings.from_mapping(data), store=MemoryStore())


@pytest.fixture
def provider() -> Iterator[Provider]:
    made = _provider()
    yield made
    made.close()


def _add(provider: Provider, issuer: str, jwks_uri: str = "https://pa.example/j") -> Outcome:
    return add_agent(provider, issuer=issuer, jwks_uri=jwks_uri, now=NOW)


def test_the_listing_merges_configured_and_runtime_agents(provider: Provider) -> None:
    assert _add(provider, "https://added.example").status == 0
    # A runtime record of a configured issuer (another process's configuration may lack it):
    # listed, but the configured agent is the one verification uses.
    provider.store.add_agent(
        issuer="https://inline.example", name="Stale", jwks_uri="https://x.example/j", now=NOW
    )
    entries = list_agents(provider)
    assert [(e.issuer, e.source, e.status) for e in entries] == [
        ("https://added.example", "runtime", "allowed"),
        ("https://inline.example", "config", "allowed"),
        ("https://inline.example", "runtime", "ignored"),
        ("https://off.example", "config", "blocked"),  # enabled = false in the settings
    ]
    assert agent_json(entries[0]) == {
        "issuer": "https://added.example",
        "name": "",
        "source": "runtime",
        "brand_id": None,
        "status": "allowed",
        "enabled": True,
        "jwks_uri": "https://pa.example/j",
        "added_at": "2027-01-15T08:00:00Z",
    }
    table = agents_table(entries).splitlines()
    assert table[0].split() == ["ISSUER", "NAME", "SOURCE", "STATUS", "JWKS", "ADDED"]
    inline = ["https://inline.example", "Inline", "config", "allowed", "(inline)", "-"]
    assert table[2].split() == inline
    assert table[1].split()[-3:] == ["2027-01-15", "08:00", "UTC"]


def test_an_empty_listing_says_how_to_add_one() -> None:
    empty = _provider(agents=[])
    try:
        entries: tuple[AgentEntry, ...] = list_agents(empty)
        assert agents_table(entries) == (
            "no agents (configure some under agents, or add one: agents add ISSUER JWKS_URI)"
        )
    finally:
        empty.close()


def test_a_statically_disabled_agent_is_allowed_by_an_override(provider: Provider) -> None:
    assert set_enabled(provider, "https://off.example", True) == Outcome(
        ("allowed https://off.example",)
    )
    agent = provider.verifier.registry.lookup("https://off.example")
    assert agent is not None
    assert agent.enabled
    assert set_enabled(provider, "https://off.example", True) == Outcome(
        ("https://off.example was already allowed",)
    )


def test_the_block_of_a_removed_agent_can_be_lifted(provider: Provider) -> None:
    """`agents remove` of a blocked agent says the block stays and that allow lifts it:
    allow does, though the agent is no longer added; blocking it again is still refused."""
    issuer = "https://removed.example"
    _add(provider, issuer)
    assert set_enabled(provider, issuer, False) == Outcome((f"blocked {issuer}",))
    assert remove_agent(provider, issuer).lines[-1] == (
        f"{issuer} stays blocked if it is added again (allow lifts that)"
    )
    assert set_enabled(provider, issuer, True) == Outcome((f"allowed {issuer}",))
    assert provider.store.agent_enabled(issuer) is True
    assert set_enabled(provider, issuer, True).status == 1  # nothing recorded to lift now
    assert set_enabled(provider, issuer, False).status == 1
    assert _add(provider, issuer).lines == (f"added {issuer} (keys from https://pa.example/j)",)


def test_an_open_mode_provider_can_block_any_issuer() -> None:
    open_provider = _provider(open_mode=True)
    try:
        assert set_enabled(open_provider, "https://open.example", True) == Outcome(
            ("https://open.example was already allowed",)
        )
        assert set_enabled(open_provider, "https://open.example", False) == Outcome(
            ("blocked https://open.example",)
        )
        assert open_provider.store.agent_enabled("https://open.example") is False
        assert set_enabled(open_provider, "https://open.example", True).lines == (
            "allowed https://open.example",
        )
    finally:
        open_provider.close()


def test_http_jwks_is_refused_where_the_configuration_does_not_allow_it(
    provider: Provider,
) -> None:
    done = _add(provider, "https://pa.example", "http://127.0.0.1:9000/jwks.json")
    assert done.status == 2
    assert done.error is not None
    assert "jwks_uri must be https" in done.error
    assert provider.store.list_agents() == ()
    allowing = _provider(allow_http_jwks_on_loopback=True)
    try:
        assert _add(allowing, "https://pa.example", "http://127.0.0.1:9000/jwks.json").status == 0
        assert _add(allowing, "https://pa2.example", "http://[::1]:9000/jwks.json").status == 0
        assert _add(allowing, "https://pa3.example", "http://localhost/jwks.json").status == 0
        assert _add(allowing, "https://pa4.example", "http://192.168.1.2/jwks.json").status == 2
    finally:
        allowing.close()


@pytest.mark.parametrize(
    "issuer",
    ["https://pa.example", "http://127.0.0.1:9000", "https://café.example/agents/7"],
)
def test_issuers_that_can_be_added(issuer: str) -> None:
    assert check_issuer(issuer) is None


@pytest.mark.parametrize(
    ("issuer", "needle"),
    [
        ("", "issuer is empty"),
        ("pa.example", "absolute http(s) URL"),
        ("https://", "absolute http(s) URL"),
        ("urn:example:pa", "absolute http(s) URL"),
        ("file:///etc/passwd", "absolute http(s) URL"),
        ("https://pa.example/\tx", "spaces or control characters"),
        ("https://pa.\u0085example", "spaces or control characters"),
        ("https://pa.example/\ud800", "characters a store cannot keep"),
        ("https://pa.example/" + "a" * MAX_URL_LENGTH, f"longer than {MAX_URL_LENGTH}"),
    ],
)
def test_issuers_that_are_refused(issuer: str, needle: str, provider: Provider) -> None:
    problem = check_issuer(issuer)
    assert problem is not None
    assert needle in problem
    done = _add(provider, issuer)
    assert done.status == 2
    assert done.error == f"nothing added: {problem}"
    assert provider.store.list_agents() == ()


def test_a_stored_issuer_the_rule_refuses_stays_readable(provider: Provider) -> None:
    # The issuer rule is checked where an issuer is given (the settings, `agents add`), not
    # where a stored one is read: a row written before it (or by hand) is still listed, looked
    # up and removable, not an error at every listing or request of its issuer.
    provider.store.add_agent(
        issuer="pa.example", name="Old", jwks_uri="https://pa.example/j", now=NOW
    )
    assert ("pa.example", "runtime") in [(e.issuer, e.source) for e in list_agents(provider)]
    agent = provider.verifier.registry.lookup("pa.example")
    assert agent is not None
    assert agent.jwks_uri == "https://pa.example/j"
    assert set_enabled(provider, "pa.example", False).error is None
    assert remove_agent(provider, "pa.example").error is None
    assert provider.store.get_agent("pa.example") is None


def test_names(provider: Provider) -> None:
    ok = add_agent(
        provider, issuer="https://a.example", jwks_uri="https://a.example/j", name="Ünïcode PA",
        now=NOW,
    )  # fmt: skip
    assert ok.status == 0
    for bad in ("x" * (MAX_NAME_LENGTH + 1), " padded", "tab\there"):
        done = add_agent(
            provider, issuer="https://b.example", jwks_uri="https://b.example/j", name=bad, now=NOW
        )
        assert done.status == 2, bad
    assert [agent.issuer for agent in provider.store.list_agents()] == ["https://a.example"]


def test_a_name_with_a_bidi_control_is_refused(provider: Provider) -> None:
    """The operator's name for an agent is a label the pages isolate: an override or isolate
    in it could only reorder the sentence around it (tests/advisories/test_bidi_names.py)."""
    for issuer, name in (
        ("https://a.example", "مساعد شخصي"),
        ("https://b.example", "ACME \u200fעוזר"),
    ):
        done = add_agent(provider, issuer=issuer, jwks_uri=f"{issuer}/j", name=name, now=NOW)
        assert done.status == 0, name
    for bad, control in (("\u202eecnaniF kcaB\u202c", "U+202E"), ("Helper\u2069\u202e", "U+2069")):
        done = add_agent(
            provider, issuer="https://c.example", jwks_uri="https://c.example/j", name=bad, now=NOW
        )
        assert done.status == 2, bad
        assert done.error == f"nothing added: name must not hold bidirectional controls ({control})"
    assert [agent.issuer for agent in provider.store.list_agents()] == [
        "https://a.example",
        "https://b.example",
    ]


def _conversation(provider: Provider, last_activity: float) -> str:
    return provider.store.create_conversation(
        brand_id="acme", issuer="https://inline.example", sub="u", now=last_activity
    )


def test_cleanup_without_retention_keeps_conversations(provider: Provider) -> None:
    ctx = _conversation(provider, NOW - 3650 * DAY)
    done = run_cleanup(provider, NOW)
    assert done.counts == Cleanup()
    assert done.lines[-1] == "conversations kept: retention_days is not set (keep forever)"
    assert provider.store.get_conversation(ctx) is not None


def test_cleanup_deletes_what_is_older_than_retention_days() -> None:
    provider = _provider(retention_days=2.5)
    try:
        gone = _conversation(provider, NOW - 2.5 * DAY - 0.001)
        edge = _conversation(provider, NOW - 2.5 * DAY)
        done = run_cleanup(provider, NOW)
        assert done.idle_before == NOW - 2.5 * DAY
        assert done.counts == Cleanup(conversations=1)
        assert done.lines[-1] == (
            "conversations deleted: 1, with 0 messages (no activity since 2027-01-12 20:00 UTC;"
            " retention_days = 2.5)"
        )
        assert provider.store.get_conversation(gone) is None
        assert provider.store.get_conversation(edge) is not None
    finally:
        provider.close()


def test_the_refusals_write_nothing_and_say_what_the_changes_would(provider: Provider) -> None:
    """What the Django admin's forms validate with: the very refusal of `add_agent` and
    `set_enabled`, without writing anything."""
    store = provider.store
    assert (
        add_refusal(provider, issuer="https://pa.example", jwks_uri="https://pa.example/j") is None
    )
    assert store.list_agents() == ()
    for issuer, jwks_uri in (
        ("pa.example", "https://pa.example/j"),  # no scheme
        ("https://pa.example", "http://10.0.0.7/j"),  # plain http off loopback
        ("https://inline.example", "https://pa.example/j"),  # configured
    ):
        refused = add_refusal(provider, issuer=issuer, jwks_uri=jwks_uri)
        assert refused == add_agent(provider, issuer=issuer, jwks_uri=jwks_uri, now=NOW)
    assert _add(provider, "https://pa.example").error is None
    again = add_refusal(provider, issuer="https://pa.example", jwks_uri="https://x.example/j")
    assert again is not None
    assert again == _add(provider, "https://pa.example", "https://x.example/j")
    assert again.status == 1

    assert switch_refusal(provider, "https://pa.example", False) is None
    assert store.agent_enabled("https://pa.example") is None  # nothing written
    unknown = switch_refusal(provider, "https://nobody.example", False)
    assert unknown == set_enabled(provider, "https://nobody.example", False)
    assert unknown is not None
    assert unknown.status == 1


# -- Poppy agents ----------------------------------------------------------------------------

POPPY_AGENT = "https://atlas.example/agent.json"
POPPY_BRANDS = {
    "acme": {"handler": "examples.bots:order_bot"},
    "shop": {
        "name": "Shop",
        "handler": "examples.bots:order_bot",
        "poppy": {"domain": "shop.example", "agents": [POPPY_AGENT]},
    },
}


def _grant(
    provider: Provider,
    grant_id: str,
    brand_id: str,
    client_id: str,
    account: str,
    expires_at: float = NOW + DAY,
) -> None:
    # What a Poppy Device Sign-In's poll writes (the grant of the Session's User ID).
    provider.store.upsert_grant(
        grant_id=grant_id,
        brand_id=brand_id,
        account=account,
        client_id=client_id,
        pa_sub="user-" + account,
        scopes=("orders:read",),
        now=NOW,
        expires_at=expires_at,
    )


def test_a_poppy_agent_holding_a_grant_is_listed_with_its_brand() -> None:
    provider = _provider(brands=POPPY_BRANDS)
    try:
        _grant(provider, "g-1", "shop", POPPY_AGENT, "jane")
        _grant(provider, "g-2", "shop", POPPY_AGENT, "john")  # one row per agent and Brand
        # A PACT agent's grant at the same Brand is not Poppy's; nor is any grant at a
        # Brand without Poppy.
        _grant(provider, "g-3", "shop", "https://inline.example", "jane")
        _grant(provider, "g-4", "acme", "https://other.example/agent.json", "jane")
        # A grant of an agent the Brand no longer admits: the next request is refused.
        _grant(provider, "g-5", "shop", "https://gone.example/agent.json", "jane")
        entries = list_agents(provider, now=NOW + 60)
        assert [(e.issuer, e.source, e.brand_id, e.status) for e in entries] == [
            ("https://inline.example", "config", None, "allowed"),
            ("https://off.example", "config", None, "blocked"),
            ("https://atlas.example/agent.json", "poppy", "shop", "allowed"),
            ("https://gone.example/agent.json", "poppy", "shop", "blocked"),
        ]
        poppy = entries[2]
        assert agent_json(poppy) == {
            "issuer": POPPY_AGENT,
            "name": "",
            "source": "poppy",
            "brand_id": "shop",
            "status": "allowed",
            "enabled": True,
            "jwks_uri": None,
            "added_at": "2027-01-15T08:00:00Z",  # its oldest live grant
        }
        row = agents_table(entries).splitlines()[3]
        assert row.split() == [
            POPPY_AGENT, "-", "poppy", "at", "shop", "allowed", "(client", "metadata)",
            "2027-01-15", "08:00", "UTC",
        ]  # fmt: skip
        # Revoked and expired grants hold nothing: the agent is no longer listed.
        provider.store.revoke_account_grants("jane", now=NOW + 1)
        provider.store.revoke_account_grants("john", now=NOW + 1)
        assert [e.source for e in list_agents(provider, now=NOW + 60)] == ["config", "config"]
    finally:
        provider.close()


def _session(
    provider: Provider,
    session_id: str,
    brand_id: str,
    client_id: str,
    expires_at: float = NOW + DAY,
) -> None:
    # What a Poppy token request writes: a signed-out Session, whoever its user is.
    provider.store.create_session(
        session_id=session_id,
        brand_id=brand_id,
        client_id=client_id,
        user_id="usr-" + session_id,
        jkt="jkt-" + session_id,
        token_hash="hash-" + session_id,
        now=NOW,
        expires_at=expires_at,
    )


def test_a_poppy_agent_with_only_live_sessions_is_listed_with_its_brand() -> None:
    """An agent admitted at a Brand may talk to the company signed out, holding no grant:
    its live Sessions list it, with no ADDED (that is its oldest live grant's)."""
    acme = {"domain": "acme.example", "agents": "any"}
    brands = {**POPPY_BRANDS, "acme": {"handler": "examples.bots:order_bot", "poppy": acme}}
    provider = _provider(agents=[], brands=brands)
    try:
        signed_out = "https://plain.example/agent.json"
        _session(provider, "ses-1", "shop", signed_out)
        _session(provider, "ses-2", "shop", signed_out)  # one row per agent and Brand
        _session(provider, "ses-3", "acme", signed_out)
        _session(provider, "ses-4", "shop", POPPY_AGENT)  # with a grant too: one row
        _grant(provider, "g-1", "shop", POPPY_AGENT, "jane")
        _session(provider, "ses-5", "gone", signed_out)  # a Brand no longer configured
        _session(provider, "ses-6", "shop", "https://old.example/a.json", expires_at=NOW + 30)
        entries = list_agents(provider, now=NOW + 60)
        assert [(e.issuer, e.source, e.brand_id, e.status, e.added_at) for e in entries] == [
            (POPPY_AGENT, "poppy", "shop", "allowed", NOW),
            (signed_out, "poppy", "acme", "allowed", None),
            (signed_out, "poppy", "shop", "blocked", None),  # shop's poppy.agents omits it
        ]
        row = agents_table(entries).splitlines()[2]
        assert row.split() == [
            signed_out, "-", "poppy", "at", "acme", "allowed", "(client", "metadata)", "-",
        ]  # fmt: skip
        assert agent_json(entries[1])["added_at"] is None
        assert poppy_agent_ids(provider, now=NOW + 60) == (POPPY_AGENT, signed_out)
        # Expired Sessions hold nothing: the agent is no longer listed.
        assert list_agents(provider, now=NOW + 2 * DAY) == ()
    finally:
        provider.close()


def test_the_poppy_agent_ids_are_the_listed_poppy_agents_once_each() -> None:
    """What the Django admin's agent filters offer beside the PACT agents: one id an agent
    holding live grants at several Brands or for several people; its conversations' agent
    is its `client_id` after "poppy ", as Poppy's conversations store it."""
    acme = {"domain": "acme.example", "agents": "any"}
    brands = {**POPPY_BRANDS, "acme": {"handler": "examples.bots:order_bot", "poppy": acme}}
    provider = _provider(brands=brands)
    try:
        assert poppy_agent_ids(provider, now=NOW) == ()
        _grant(provider, "g-1", "shop", POPPY_AGENT, "jane")
        _grant(provider, "g-2", "shop", POPPY_AGENT, "john")
        _grant(provider, "g-3", "acme", POPPY_AGENT, "jane")
        _grant(provider, "g-4", "shop", "https://inline.example", "jane")  # a PACT agent's
        _grant(provider, "g-5", "shop", "https://gone.example/agent.json", "jane")
        assert poppy_agent_ids(provider, now=NOW + 60) == (
            "https://atlas.example/agent.json",
            "https://gone.example/agent.json",
        )
        assert poppy_agent_ids(provider, now=NOW + 2 * DAY) == ()  # their grants expired
        assert poppy_owner(POPPY_AGENT) == "poppy https://atlas.example/agent.json"
    finally:
        provider.close()


def test_an_empty_listing_on_a_poppy_site_does_not_send_poppy_agents_to_agents_add() -> None:
    provider = _provider(agents=[], brands=POPPY_BRANDS)
    try:
        assert agents_report(provider, as_json=False, now=NOW) == (
            "no agents (no PACT agent is configured or added: agents add ISSUER JWKS_URI; "
            "no Poppy agent holds a live grant or Session: a Poppy agent is listed once it "
            "starts a Session)"
        )
        assert agents_report(provider, as_json=True, now=NOW) == "[]"
    finally:
        provider.close()


def test_block_and_allow_reach_a_poppy_agent() -> None:
    provider = _provider(brands=POPPY_BRANDS)
    try:
        # Live whenever the test runs: block and allow judge grants at the current time.
        # One named in the Brand's poppy.agents, one only holding a grant there.
        gone = "https://gone.example/agent.json"
        _grant(provider, "g-1", "shop", gone, "jane", expires_at=NOW + 3650 * DAY)
        for agent in (POPPY_AGENT, gone):
            assert switch_refusal(provider, agent, False) is None
            assert set_enabled(provider, agent, True) == Outcome((f"{agent} was already allowed",))
            assert set_enabled(provider, agent, False) == Outcome((f"blocked {agent}",))
            assert provider.store.agent_enabled(agent) is False  # what Poppy reads
            assert set_enabled(provider, agent, False) == Outcome((f"{agent} was already blocked",))
            assert set_enabled(provider, agent, True) == Outcome((f"allowed {agent}",))
            assert provider.store.agent_enabled(agent) is True
        # Listed blocked while blocked: the Brand admits it, the switch refuses it.
        _grant(provider, "g-2", "shop", POPPY_AGENT, "jane", expires_at=NOW + 3650 * DAY)
        set_enabled(provider, POPPY_AGENT, False)
        statuses = {e.issuer: e.status for e in list_agents(provider) if e.source == "poppy"}
        assert statuses == {POPPY_AGENT: "blocked", gone: "blocked"}  # gone: not admitted
    finally:
        provider.close()


def test_an_unknown_issuer_is_refused_unless_a_poppy_brand_admits_any_agent() -> None:
    # A Brand admitting any agent hears from agents holding no grant (signed-out Sessions):
    # any https client_id may be one of them, though agents list shows it only while it
    # holds a live Session.
    named = _provider(brands=POPPY_BRANDS)
    poppy = {"domain": "shop.example", "agents": "any"}
    anyone = _provider(brands={"shop": {"handler": "examples.bots:order_bot", "poppy": poppy}})
    try:
        stranger = "https://stranger.example/agent.json"
        refused = set_enabled(named, stranger, False)
        assert refused == Outcome(
            error=f"nothing blocked: no agent {stranger} is configured or added "
            "(agents list shows them)",
            status=1,
            field="issuer",  # a form shows it beside the issuer
        )
        assert named.store.agent_enabled(stranger) is None  # nothing written
        unlisted = (
            f"{stranger} is no agent agents list shows: a Poppy agent without a live grant "
            "or Session, or a misspelt id"
        )
        assert set_enabled(anyone, stranger, False) == Outcome((f"blocked {stranger}", unlisted))
        assert anyone.store.agent_enabled(stranger) is False
        assert set_enabled(anyone, stranger, True) == Outcome((f"allowed {stranger}", unlisted))
        assert set_enabled(anyone, "http://plain.example", False).status == 1  # no Poppy id
        # Once it starts a Session (live whenever the test runs), agents list shows it.
        _session(anyone, "ses-1", "shop", stranger, expires_at=NOW + 3650 * DAY)
        assert set_enabled(anyone, stranger, False) == Outcome((f"blocked {stranger}",))
        assert set_enabled(anyone, stranger, True) == Outcome((f"allowed {stranger}",))
    finally:
        named.close()
        anyone.close()


def test_an_open_mode_provider_blocks_a_grant_holder_and_a_poppy_agent() -> None:
    # Open mode accepts unregistered PACT issuers, whose grants look like a Poppy agent's:
    # one switch blocks either.
    provider = _provider(brands=POPPY_BRANDS, open_mode=True)
    try:
        other = "https://discovered.example"
        _grant(provider, "g-1", "shop", other, "jane", expires_at=NOW + 3650 * DAY)
        assert set_enabled(provider, other, False) == Outcome((f"blocked {other}",))
        assert set_enabled(provider, POPPY_AGENT, False) == Outcome((f"blocked {POPPY_AGENT}",))
    finally:
        provider.close()
