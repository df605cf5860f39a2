"""JSON parsing differentials: a token that two JSON parsers would read differently is refused,
not interpreted (SECURITY.md, "Parsing differentials").

Every token here carries a genuine signature over exactly the bytes shown, so the JSON trick
is the only thing wrong with it: repeated claim names (refused, not last-wins), deep nesting,
numbers that are not NumericDates, NUL in `aud`, and payloads that are not strict UTF-8 (bad
bytes, BOMs, UTF-16/32, overlong and surrogate encodings). Parse-level refusals come before
any key is fetched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pytest

from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.core.keys import JwksCache
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from tests.advisories.support import (
    INTERFACE,
    NOW,
    POLICY,
    Raw,
    delegation_outcome,
    identity_outcome,
    json_object,
    sign_raw,
)
from tests.support.jwks_server import JwksServer
from tests.support.parties import AUDIENCE, ISSUER

EVIL = "https://evil.example"

PA_KEY = generate_private_jwk("ES256", kid="pa-1")
PROVIDER_KEY = generate_private_jwk("ES256", kid="provider-1")

Members = list[tuple[str, Any]]

#: The genuine claims, member by member; `note` is an extra claim both verifiers ignore, the
#: place where byte-level tricks are planted.
IDENTITY: Members = [
    ("iss", ISSUER),
    ("sub", "u1"),
    ("aud", AUDIENCE),
    ("iat", NOW),
    ("exp", NOW + 120),
    ("note", "hello"),
]
DELEGATION: Members = [
    ("iss", INTERFACE + "/oauth"),
    ("aud", INTERFACE),
    ("sub", "acct-1"),
    ("client_id", ISSUER),
    ("scope", "orders:read"),
    ("grant_id", "a2agrant_1"),
    ("iat", NOW),
    ("exp", NOW + 3600),
    ("note", "hello"),
]


def replaced(members: Members, **values: Any) -> Members:
    return [(name, values.get(name, value)) for name, value in members]


@pytest.fixture(scope="module")
def jwks_server() -> Iterator[JwksServer]:
    with JwksServer(public_key_set([PA_KEY])) as server:
        yield server


@pytest.fixture
def jwks(jwks_server: JwksServer) -> JwksServer:
    jwks_server.reset()
    return jwks_server


class Outcome(Protocol):
    """Verify `payload` (with `header`) signed by the agent: a refusal reason or "accepted"."""

    def __call__(self, payload: bytes, header: Any = None) -> str: ...


@pytest.fixture
def identity(jwks: JwksServer) -> Outcome:
    """Sign `payload` as the agent and verify it; the outcome is a reason or "accepted"."""
    registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks_uri=jwks.url)])
    verifier = IdentityVerifier(
        audience=AUDIENCE, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
    )

    def outcome(payload: bytes, header: Any = None) -> str:
        token = sign_raw(PA_KEY, header or {"alg": "ES256", "kid": "pa-1"}, payload)
        return identity_outcome(verifier, token)

    return outcome


def delegation(payload: bytes, header: Any = None) -> str:
    """Sign `payload` as the Provider and verify it as a delegation token."""
    token = sign_raw(PROVIDER_KEY, header or {"alg": "ES256", "typ": "at+jwt"}, payload)
    return delegation_outcome(PROVIDER_KEY, token)


def test_the_genuine_payloads_are_accepted(identity: Outcome) -> None:
    """The control: the same member-by-member writer, with no trick, gives accepted tokens."""
    assert identity(json_object(*IDENTITY)) == "accepted"
    assert delegation(json_object(*DELEGATION)) == "accepted"


# -- repeated claim names: refused, neither first- nor last-wins -----------------------------------

IDENTITY_REPEATS: dict[str, Members] = {
    "aud-evil-then-genuine": [("aud", EVIL), *IDENTITY],
    "aud-genuine-then-evil": [*IDENTITY, ("aud", EVIL)],
    "iss-evil-then-genuine": [("iss", EVIL), *IDENTITY],
    "iss-genuine-then-evil": [*IDENTITY, ("iss", EVIL)],
    "sub-twice": [*IDENTITY, ("sub", "admin")],
    "exp-twice": [*IDENTITY, ("exp", NOW + 10**6)],
    "aud-twice-the-same": [*IDENTITY, ("aud", AUDIENCE)],
    "aud-escaped-name": [*IDENTITY, (Raw('"a\\u0075d"'), EVIL)],
    "aud-escaped-name-first": [(Raw('"\\u0061ud"'), EVIL), *IDENTITY],
    "repeat-in-a-nested-object": [*IDENTITY, ("ext", Raw('{"a":1,"a":2}'))],
}
DELEGATION_REPEATS: dict[str, Members] = {
    "aud-other-brand-then-genuine": [("aud", AUDIENCE + "/globex"), *DELEGATION],
    "iss-twice": [*DELEGATION, ("iss", AUDIENCE + "/globex/oauth")],
    "sub-twice": [*DELEGATION, ("sub", "acct-admin")],
    "client_id-other-agent-first": [("client_id", EVIL), *DELEGATION],
    "client_id-other-agent-last": [*DELEGATION, ("client_id", EVIL)],
    "grant_id-twice": [*DELEGATION, ("grant_id", "a2agrant_2")],
    "scope-twice": [*DELEGATION, ("scope", "orders:read orders:cancel")],
    "exp-twice": [*DELEGATION, ("exp", NOW + 10**6)],
    "scope-escaped-name": [*DELEGATION, (Raw('"sc\\u006fpe"'), "orders:cancel")],
}


@pytest.mark.parametrize("case", sorted(IDENTITY_REPEATS))
def test_identity_refuses_repeated_claims_before_any_fetch(
    identity: Outcome, jwks: JwksServer, case: str
) -> None:
    assert identity(json_object(*IDENTITY_REPEATS[case])) == "malformed_token"
    assert jwks.total_hits == 0


@pytest.mark.parametrize("case", sorted(DELEGATION_REPEATS))
def test_delegation_refuses_repeated_claims(case: str) -> None:
    assert delegation(json_object(*DELEGATION_REPEATS[case])) == "malformed_token"


# -- nesting ---------------------------------------------------------------------------------------


def _nested(depth: int) -> Raw:
    return Raw("[" * depth + "]" * depth)


def test_nesting_is_bounded_at_32_levels(identity: Outcome) -> None:
    # The claims object is the first level.
    assert identity(json_object(*IDENTITY, ("x", _nested(31)))) == "accepted"
    assert identity(json_object(*IDENTITY, ("x", _nested(32)))) == "malformed_token"
    assert delegation(json_object(*DELEGATION, ("x", _nested(31)))) == "accepted"
    assert delegation(json_object(*DELEGATION, ("x", _nested(32)))) == "malformed_token"


def test_deep_nesting_is_refused_before_any_fetch(identity: Outcome, jwks: JwksServer) -> None:
    deep = json_object(*IDENTITY, ("x", _nested(5000)))
    assert identity(deep) == "malformed_token"
    assert jwks.total_hits == 0
    assert delegation(json_object(*DELEGATION, ("x", _nested(5000)))) == "malformed_token"
    objects = Raw('{"a":' * 5000 + "1" + "}" * 5000)
    assert delegation(json_object(*DELEGATION, ("x", objects))) == "malformed_token"


def test_brackets_inside_strings_are_not_nesting(identity: Outcome) -> None:
    text = "[{" * 500 + '\\"' + "}]" * 500
    assert identity(json_object(*IDENTITY, ("x", text))) == "accepted"


# -- numbers that are not NumericDates ----------------------------------------------------------

IDENTITY_EXP: dict[str, tuple[Any, str]] = {
    "1e309": (Raw("1e309"), "bad_claims"),
    "-1e309": (Raw("-1e309"), "bad_claims"),
    "400-digit-int": (Raw("1" + "0" * 400), "bad_claims"),
    "5000-digit-int": (Raw("1" + "0" * 5000), "malformed_token"),
    "NaN": (Raw("NaN"), "malformed_token"),
    "Infinity": (Raw("Infinity"), "malformed_token"),
    "-Infinity": (Raw("-Infinity"), "malformed_token"),
    "string": (str(NOW + 120), "bad_claims"),
    "true": (True, "bad_claims"),
    "false": (False, "bad_claims"),
    "null": (None, "bad_claims"),
    "hex": (Raw("0x6B49D278"), "malformed_token"),
    "leading-zero": (Raw("0" + str(NOW + 120)), "malformed_token"),
    "plus-sign": (Raw("+" + str(NOW + 120)), "malformed_token"),
    "underscores": (Raw("1_800_000_120"), "malformed_token"),
    "fraction": (Raw(f"{NOW + 120}.5"), "accepted"),
    "exponent": (Raw("1.80000012e9"), "accepted"),
    "negative-exponent": (Raw("18000001200e-1"), "accepted"),
}


@pytest.mark.parametrize("case", sorted(IDENTITY_EXP))
def test_identity_exp_spellings(identity: Outcome, case: str) -> None:
    value, expected = IDENTITY_EXP[case]
    assert identity(json_object(*replaced(IDENTITY, exp=value))) == expected


@pytest.mark.parametrize("name", ["iat", "nbf"])
@pytest.mark.parametrize("literal", ["1e309", "1" + "0" * 400, "NaN", '"1800000000"', "true"])
def test_identity_other_numeric_dates_are_as_strict(
    identity: Outcome, name: str, literal: str
) -> None:
    if name == "iat":
        members = replaced(IDENTITY, iat=Raw(literal))
    else:
        members = [*IDENTITY, ("nbf", Raw(literal))]
    expected = "malformed_token" if literal == "NaN" else "bad_claims"
    assert identity(json_object(*members)) == expected


DELEGATION_EXP: dict[str, tuple[Any, str]] = {
    "1e309": (Raw("1e309"), "bad_claims"),
    "5000-digit-int": (Raw("1" + "0" * 5000), "malformed_token"),
    "NaN": (Raw("NaN"), "malformed_token"),
    "Infinity": (Raw("Infinity"), "malformed_token"),
    "string": (str(NOW + 3600), "bad_claims"),
    "float": (Raw(f"{NOW + 3600}.0"), "bad_claims"),
    "exponent": (Raw("1.8000036e9"), "bad_claims"),
    "true": (True, "bad_claims"),
    "null": (None, "bad_claims"),
    "array": ([NOW + 3600], "bad_claims"),
}


@pytest.mark.parametrize("case", sorted(DELEGATION_EXP))
def test_delegation_exp_spellings(case: str) -> None:
    value, expected = DELEGATION_EXP[case]
    assert delegation(json_object(*replaced(DELEGATION, exp=value))) == expected


# -- NUL and invisible characters in compared strings ----------------------------------------------


@pytest.mark.parametrize(
    ("aud", "expected"),
    [
        pytest.param(AUDIENCE + "\x00", "bad_audience", id="trailing-NUL"),
        pytest.param("\x00" + AUDIENCE, "bad_audience", id="leading-NUL"),
        pytest.param(AUDIENCE + "\x00" + EVIL, "bad_audience", id="NUL-then-more"),
        pytest.param(AUDIENCE + "\u200b", "bad_audience", id="zero-width-space"),
        pytest.param(AUDIENCE + "\ufeff", "bad_audience", id="BOM-character"),
        pytest.param(Raw('"' + AUDIENCE + '\x00"'), "malformed_token", id="raw-NUL-byte"),
        pytest.param(Raw('"' + AUDIENCE + '\n"'), "malformed_token", id="raw-newline"),
    ],
)
def test_identity_aud_with_nul_or_invisible_characters(
    identity: Outcome, aud: Any, expected: str
) -> None:
    assert identity(json_object(*replaced(IDENTITY, aud=aud))) == expected


@pytest.mark.parametrize(
    ("claim", "value", "expected"),
    [
        ("aud", INTERFACE + "\x00", "bad_audience"),
        ("aud", INTERFACE + "\x00/../globex", "bad_audience"),
        ("iss", INTERFACE + "/oauth\x00", "bad_issuer"),
        ("client_id", ISSUER + "\x00", "wrong_client"),
        ("aud", Raw('"' + INTERFACE + '\x00"'), "malformed_token"),
    ],
)
def test_delegation_claims_with_nul(claim: str, value: Any, expected: str) -> None:
    assert delegation(json_object(*replaced(DELEGATION, **{claim: value}))) == expected


# -- payloads that are not strict UTF-8 JSON -------------------------------------------------------


def _in_note(raw: bytes) -> Callable[[bytes], bytes]:
    """Put `raw` bytes inside the `note` string."""
    return lambda payload: payload.replace(b'"hello"', b'"hel' + raw + b'lo"')


ENCODINGS: dict[str, Callable[[bytes], bytes]] = {
    "utf8-bom": lambda p: b"\xef\xbb\xbf" + p,
    "utf16-with-bom": lambda p: p.decode().encode("utf-16"),
    "utf16-le": lambda p: p.decode().encode("utf-16-le"),
    "utf16-be": lambda p: p.decode().encode("utf-16-be"),
    "utf32": lambda p: p.decode().encode("utf-32"),
    "latin1-e-acute": _in_note(b"\xe9"),
    "stray-ff": _in_note(b"\xff"),
    "lone-continuation-byte": _in_note(b"\x80"),
    "truncated-sequence": _in_note(b"\xe2\x82"),
    "overlong-slash": _in_note(b"\xc0\xaf"),
    "overlong-quote": _in_note(b'\xc0\xa2,"aud":"' + EVIL.encode() + b'"'),
    "overlong-nul": _in_note(b"\xc0\x80"),
    "overlong-3-byte": _in_note(b"\xe0\x80\xaf"),
    "cesu-surrogate": _in_note(b"\xed\xa0\x80"),
    "beyond-u10ffff": _in_note(b"\xf4\x90\x80\x80"),
    "five-byte-sequence": _in_note(b"\xf8\x88\x80\x80\x80"),
    "trailing-garbage": lambda p: p + b"x",
    "two-objects": lambda p: p + p,
    "comment": lambda p: b"/* hi */" + p,
    "single-quotes": lambda p: p.replace(b'"note"', b"'note'"),
}


@pytest.mark.parametrize("case", sorted(ENCODINGS))
def test_identity_refuses_payloads_that_are_not_strict_utf8_json_before_any_fetch(
    identity: Outcome, jwks: JwksServer, case: str
) -> None:
    assert identity(ENCODINGS[case](json_object(*IDENTITY))) == "malformed_token"
    assert jwks.total_hits == 0


@pytest.mark.parametrize("case", sorted(ENCODINGS))
def test_delegation_refuses_payloads_that_are_not_strict_utf8_json(case: str) -> None:
    assert delegation(ENCODINGS[case](json_object(*DELEGATION))) == "malformed_token"


@pytest.mark.parametrize("case", ["utf8-bom", "utf16-with-bom", "utf16-le", "stray-ff"])
def test_headers_that_are_not_strict_utf8_json_are_refused(
    identity: Outcome, jwks: JwksServer, case: str
) -> None:
    header = json_object(("alg", "ES256"), ("kid", "pa-1"), ("note", "hello"))
    assert identity(json_object(*IDENTITY), ENCODINGS[case](header)) == "malformed_token"
    assert jwks.total_hits == 0
    header = json_object(("alg", "ES256"), ("typ", "at+jwt"), ("note", "hello"))
    assert delegation(json_object(*DELEGATION), ENCODINGS[case](header)) == "malformed_token"


def test_genuine_non_ascii_text_is_accepted(identity: Outcome) -> None:
    """The control for the byte tricks: real UTF-8 (and escapes) in a claim are fine."""
    members = [
        *replaced(IDENTITY, note="Zoë 😀 \u00e9"),
        ("escaped", Raw('"\\u00e9\\ud83d\\ude00"')),
    ]
    assert identity(json_object(*members)) == "accepted"
