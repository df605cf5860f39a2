"""Unicode look-alikes, extending `tests/protocols/test_advisory_lookalikes.py` (SECURITY.md,
"Identity": issuers are matched as exact strings).

That file proves a look-alike of a registered issuer is unknown and fetches nothing. Here: the
registry side (two registered issuers that differ by one homoglyph, or by NFC/NFD, or by
Unicode/punycode spelling, each keep their own keys and users), more spellings that must stay
unknown, look-alike `sub`s that never share a conversation, and a delegation token bound to
one issuer that its look-alike cannot use.
"""

from __future__ import annotations

import json
import time
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest

from pactmw.core.errors import AuthenticationFailed
from pactmw.core.http import Request
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.core.keys import JwksCache
from pactmw.protocols.delegation import (
    DelegationRejected,
    mint_access_token,
    verify_access_token,
)
from pactmw.protocols.identity import (
    AgentRegistry,
    IdentityVerifier,
    PersonalAgent,
    RegisteredAgent,
)
from pactmw.provider import Brand, Provider
from pactmw.store import open_store
from tests.advisories.support import NOW, POLICY
from tests.support.jwks_server import JwksServer
from tests.support.parties import AUDIENCE

LATIN = "https://pa.example"
CYRILLIC = "https://p\u0430.example"  # а, U+0430
NFC = unicodedata.normalize("NFC", "https://café.example")
NFD = unicodedata.normalize("NFD", "https://café.example")
PUNYCODE = "https://xn--caf-dma.example"  # the IDNA spelling of café.example
assert NFC != NFD

# The same kid on purpose: only the issuer string can tell the keys apart.
KEYS = {issuer: generate_private_jwk("ES256", kid="k1") for issuer in (LATIN, CYRILLIC)}
INLINE_KEYS = {issuer: generate_private_jwk("ES256", kid="k1") for issuer in (NFC, NFD, PUNYCODE)}


def token(key: PrivateJWK, issuer: str, sub: str = "u1") -> str:
    claims = {"iss": issuer, "sub": sub, "aud": AUDIENCE, "iat": NOW, "exp": NOW + 120}
    return "Bearer " + sign_compact(claims, key, typ="JWT")


def outcome(verifier: IdentityVerifier, header: str) -> str | PersonalAgent:
    try:
        return verifier.verify(header)
    except AuthenticationFailed as exc:
        return exc.reason


@pytest.fixture(scope="module")
def key_servers() -> Iterator[dict[str, JwksServer]]:
    with (
        JwksServer(public_key_set([KEYS[LATIN]])) as latin,
        JwksServer(public_key_set([KEYS[CYRILLIC]])) as cyrillic,
    ):
        yield {LATIN: latin, CYRILLIC: cyrillic}


@pytest.fixture
def homoglyphs(key_servers: dict[str, JwksServer]) -> IdentityVerifier:
    for server in key_servers.values():
        server.reset()
    registry = AgentRegistry(
        [
            RegisteredAgent(issuer=LATIN, name="Latin PA", jwks_uri=key_servers[LATIN].url),
            RegisteredAgent(
                issuer=CYRILLIC, name="Cyrillic PA", jwks_uri=key_servers[CYRILLIC].url
            ),
        ]
    )
    return IdentityVerifier(
        audience=AUDIENCE, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
    )


def test_two_registered_homoglyph_issuers_each_keep_their_own_keys(
    homoglyphs: IdentityVerifier, key_servers: dict[str, JwksServer]
) -> None:
    latin = outcome(homoglyphs, token(KEYS[LATIN], LATIN))
    cyrillic = outcome(homoglyphs, token(KEYS[CYRILLIC], CYRILLIC))
    assert isinstance(latin, PersonalAgent)
    assert isinstance(cyrillic, PersonalAgent)
    assert (latin.issuer, latin.name) == (LATIN, "Latin PA")
    assert (cyrillic.issuer, cyrillic.name) == (CYRILLIC, "Cyrillic PA")
    # The same `sub` under two issuers is two people.
    assert latin.actor_id != cyrillic.actor_id
    # Each issuer's keys came from its own server, once.
    assert key_servers[LATIN].total_hits == 1
    assert key_servers[CYRILLIC].total_hits == 1


@pytest.mark.parametrize(
    ("claimed", "signer"), [(LATIN, CYRILLIC), (CYRILLIC, LATIN)], ids=["as-latin", "as-cyrillic"]
)
def test_a_homoglyph_issuer_cannot_speak_for_its_twin(
    homoglyphs: IdentityVerifier, key_servers: dict[str, JwksServer], claimed: str, signer: str
) -> None:
    assert outcome(homoglyphs, token(KEYS[signer], claimed)) == "bad_signature"
    # Only the claimed issuer's server was asked; the signer's key was never consulted.
    assert key_servers[claimed].total_hits == 1
    assert key_servers[signer].total_hits == 0


def _inline(*issuers: str) -> IdentityVerifier:
    registry = AgentRegistry(
        [RegisteredAgent(issuer=i, jwks=public_key_set([INLINE_KEYS[i]])) for i in issuers]
    )
    return IdentityVerifier(audience=AUDIENCE, registry=registry, clock=lambda: NOW)


@pytest.mark.parametrize(
    ("registered", "presented"),
    [(NFC, NFD), (NFD, NFC), (NFC, PUNYCODE), (PUNYCODE, NFC)],
    ids=["NFC-registered-NFD-presented", "NFD-NFC", "unicode-punycode", "punycode-unicode"],
)
def test_normalisation_and_idna_spellings_are_different_issuers(
    registered: str, presented: str
) -> None:
    alone = _inline(registered)
    # Even signed with the registered issuer's own key, the other spelling is unknown.
    assert outcome(alone, token(INLINE_KEYS[registered], presented)) == "unknown_issuer"
    # Both registered: each spelling is accepted with its own key only.
    both = _inline(registered, presented)
    for issuer in (registered, presented):
        agent = outcome(both, token(INLINE_KEYS[issuer], issuer))
        assert isinstance(agent, PersonalAgent)
        assert agent.issuer == issuer
    assert outcome(both, token(INLINE_KEYS[registered], presented)) == "bad_signature"


MORE_LOOKALIKES = [
    LATIN + ".",  # trailing dot: the same host to DNS, another string
    LATIN + ":443",
    LATIN + "#",
    LATIN + "?",
    "https://PA.EXAMPLE",
    "https://pa\u00adexample",  # soft hyphen
    "https://pa.example\u202e",  # right-to-left override
    "\ufeff" + LATIN,  # BOM
    " " + LATIN,
    LATIN + "\x00",
    "https://pa%2Eexample",
    "https://pa。example",  # ideographic full stop, which IDNA maps to "."
    "https://xn--p-8sb.example",  # punycode of the Cyrillic twin
]


@pytest.mark.parametrize("issuer", MORE_LOOKALIKES, ids=range(len(MORE_LOOKALIKES)))
def test_more_lookalikes_are_unknown_and_fetch_nothing(
    homoglyphs: IdentityVerifier, key_servers: dict[str, JwksServer], issuer: str
) -> None:
    assert outcome(homoglyphs, token(KEYS[LATIN], issuer)) == "unknown_issuer"
    assert sum(server.total_hits for server in key_servers.values()) == 0


# -- look-alike subs: different people, never one conversation -------------------------------------

SUB_TWINS = [
    (unicodedata.normalize("NFC", "José"), unicodedata.normalize("NFD", "José")),
    ("user", "u\u0455er"),  # Cyrillic ѕ
    ("alice", "alice\u200b"),
    ("Alice", "alice"),
]


@pytest.mark.parametrize(("sub", "twin"), SUB_TWINS, ids=["NFC-NFD", "homoglyph", "ZWSP", "case"])
def test_lookalike_subs_never_share_a_conversation(sub: str, twin: str) -> None:
    key = KEYS[LATIN]
    registry = AgentRegistry([RegisteredAgent(issuer=LATIN, jwks=public_key_set([key]))])
    provider = Provider(
        base_url="https://provider.example",
        verifier=IdentityVerifier(audience=AUDIENCE, registry=registry, clock=lambda: NOW),
        store=open_store("memory://"),
        brands=[Brand(id="acme", name="Acme", handler=lambda turn: f"hi {turn.caller.sub}")],
        clock=lambda: NOW,
    )
    try:

        def send(who: str, context: str | None = None) -> Any:
            message: dict[str, Any] = {
                "messageId": f"m-{time.monotonic_ns()}",
                "role": "ROLE_USER",
                "parts": [{"text": "hello"}],
            }
            if context is not None:
                message["contextId"] = context
            request = Request(
                method="POST",
                path="/a2a/acme/message:send",
                headers=(("authorization", token(key, LATIN, who)),),
            )
            answer = provider.handle(
                request, lambda limit: json.dumps({"message": message}).encode()
            )
            return answer.status, json.loads(answer.body)

        status, first = send(sub)
        assert status == 200
        context = first["message"]["contextId"]
        status, other = send(twin, context)
        assert status == 400
        assert other["error"]["message"] == "Unknown contextId"
        assert send(sub, context)[0] == 200
    finally:
        provider.close()


# -- delegation tokens are bound to the exact issuer -----------------------------------------------


@pytest.mark.parametrize(
    ("bound", "presenter"),
    [(LATIN, CYRILLIC), (CYRILLIC, LATIN), (NFC, NFD), (NFC, PUNYCODE)],
    ids=["latin-cyrillic", "cyrillic-latin", "NFC-NFD", "unicode-punycode"],
)
def test_a_delegation_token_is_refused_for_its_issuers_lookalike(
    bound: str, presenter: str
) -> None:
    provider_key = generate_private_jwk("ES256", kid="provider-1")
    interface = AUDIENCE + "/acme"
    access = mint_access_token(
        key=provider_key,
        interface_url=interface,
        account="acct-1",
        client_id=bound,
        scopes=["orders:read"],
        grant_id="a2agrant_1",
        now=NOW,
    )
    keys = public_key_set([provider_key])

    def verify(client_id: str) -> str:
        try:
            verify_access_token(
                "Bearer " + access, keys=keys, interface_url=interface, client_id=client_id, now=NOW
            )
        except DelegationRejected as exc:
            return exc.reason
        return "accepted"

    assert verify(bound) == "accepted"
    assert verify(presenter) == "wrong_client"
