"""Forged and misused delegation tokens, through a real Provider over HTTP (SECURITY.md,
"Delegated profile").

Each token below is presented in `X-A2A-User-Delegation` next to a valid PACT JWT and must get
401 `WWW-Authenticate: Bearer realm="a2a", error="invalid_token"` with an empty body, before
the Brand's bot runs. Some forgeries carry the Provider's own signature (what a bug that let
an attacker mint claims would give them) to prove the grant check stands on its own: the
token must name a live grant of this Brand, account, agent and agent user.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.delegation import SigningKeys
from pactmw.provider import Brand
from pactmw.provider.brand import DelegationConfig
from tests.advisories.support import (
    IDENTITY_CHALLENGE,
    INVALID_TOKEN,
    serve_provider,
    sign_raw,
)
from tests.delegated.support import (
    LOGIN_URL,
    OTHER_ISSUER,
    PA_KEYS,
    SCOPES,
    Env,
    jws_claims,
    make_tools,
    new_sub,
)
from tests.support.clock import OffsetClock
from tests.support.parties import AUDIENCE, ISSUER

PROVIDER_KEY = generate_private_jwk("ES256", kid="provider-1")


class CountingBot:
    """The Brand's bot; it counts its turns so a test can prove a refusal came first."""

    def __init__(self) -> None:
        self.turns = 0

    def __call__(self, turn: Any) -> str:
        self.turns += 1
        return f"hi {turn.delegation.account if turn.delegation else 'stranger'}"


BOT = CountingBot()
CLOCK = OffsetClock()


def brand(brand_id: str, **config: Any) -> Brand:
    settings: dict[str, Any] = {
        "scopes": SCOPES,
        "login_url": LOGIN_URL,
        "tools": make_tools([]),
        "interval": 1,
        **config,
    }
    return Brand(id=brand_id, name=brand_id, handler=BOT, delegation=DelegationConfig(**settings))


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    brands = [brand("acme"), brand("globex"), brand("brief", grant_lifetime=60.0)]
    with serve_provider(brands, keys=SigningKeys((PROVIDER_KEY,)), clock=CLOCK) as running:
        yield running


@pytest.fixture
def granted(env: Env) -> dict[str, Any]:
    """A fresh grant at acme: its person, agent user and token response (with `claims`)."""
    CLOCK.offset, CLOCK.frozen = 0.0, None
    user, sub = env.new_user(), new_sub()
    tokens = env.connect("acme", "orders:read", user=user, sub=sub)
    return {"user": user, "sub": sub, **tokens}


def assert_invalid_token(response: httpx.Response) -> None:
    assert response.status_code == 401, (response.status_code, response.text)
    assert response.headers["www-authenticate"] == INVALID_TOKEN
    assert response.content == b""
    assert "content-type" not in response.headers


def refused(env: Env, brand_id: str, token: str, *, sub: str, issuer: str = ISSUER) -> None:
    before = BOT.turns
    assert_invalid_token(env.send(brand_id, "hello", token=token, sub=sub, issuer=issuer))
    assert BOT.turns == before


def provider_signed(claims: dict[str, Any], **overrides: Any) -> str:
    """A token signed with the Provider's own key: only the claims are forged."""
    return sign_compact({**claims, **overrides}, PROVIDER_KEY, typ="at+jwt")


def test_the_genuine_token_is_accepted(env: Env, granted: dict[str, Any]) -> None:
    """The control: the genuine token and a Provider-signed copy of its claims both work."""
    before = BOT.turns
    for token in (granted["access_token"], provider_signed(granted["claims"])):
        answer = env.send("acme", "hello", token=token, sub=granted["sub"])
        assert answer.status_code == 200, answer.text
        assert answer.json()["message"]["parts"][0]["text"] == f"hi acct-{granted['user']}"
    assert BOT.turns == before + 2


# -- audience and issuer -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "aud",
    ["globex", "base", "pact-audience", "trailing-slash", "array", "array-with-both", "missing"],
)
def test_wrong_aud_is_refused(env: Env, granted: dict[str, Any], aud: str) -> None:
    interface = env.interface("acme")
    values: dict[str, Any] = {
        "globex": env.interface("globex"),
        "base": env.base,
        "pact-audience": AUDIENCE,
        "trailing-slash": interface + "/",
        "array": [interface],
        "array-with-both": [interface, env.interface("globex")],
        "missing": None,
    }
    claims = {**granted["claims"], "aud": values[aud]}
    if values[aud] is None:
        del claims["aud"]
    refused(env, "acme", provider_signed(claims), sub=granted["sub"])


def test_another_brands_iss_is_refused(env: Env, granted: dict[str, Any]) -> None:
    token = provider_signed(granted["claims"], iss=env.interface("globex") + "/oauth")
    refused(env, "acme", token, sub=granted["sub"])


def test_another_brands_token_is_refused(env: Env, granted: dict[str, Any]) -> None:
    # Same Provider, same key, same person, agent and agent user: only the Brand differs.
    at_globex = env.connect("globex", "orders:read", user=granted["user"], sub=granted["sub"])
    refused(env, "acme", at_globex["access_token"], sub=granted["sub"])
    # And acme's genuine token, with its aud rewritten to globex (Provider-signed), at globex:
    # the grant belongs to acme.
    interface = env.interface("globex")
    token = provider_signed(granted["claims"], aud=interface, iss=interface + "/oauth")
    refused(env, "globex", token, sub=granted["sub"])


# -- who presents it -------------------------------------------------------------------------------


def test_another_agents_token_is_refused(env: Env, granted: dict[str, Any]) -> None:
    # The other agent presents the token with its own valid PACT JWT.
    refused(env, "acme", granted["access_token"], sub=granted["sub"], issuer=OTHER_ISSUER)
    # Even with client_id rewritten to match it, the grant is the first agent's.
    token = provider_signed(granted["claims"], client_id=OTHER_ISSUER)
    refused(env, "acme", token, sub=granted["sub"], issuer=OTHER_ISSUER)


def test_a_token_for_another_user_of_the_same_agent_is_refused(
    env: Env, granted: dict[str, Any]
) -> None:
    # The agent's other user (another PACT `sub`) presents the first user's token.
    refused(env, "acme", granted["access_token"], sub=new_sub())


def test_a_token_naming_another_account_under_this_grant_is_refused(
    env: Env, granted: dict[str, Any]
) -> None:
    victim = env.connect("acme", "orders:read", user=env.new_user(), sub=new_sub())
    # This grant's id, the victim's account.
    token = provider_signed(granted["claims"], sub=victim["claims"]["sub"])
    refused(env, "acme", token, sub=granted["sub"])
    # The victim's grant id, this account.
    token = provider_signed(granted["claims"], grant_id=victim["grant_id"])
    refused(env, "acme", token, sub=granted["sub"])
    # A grant id that does not exist.
    refused(
        env, "acme", provider_signed(granted["claims"], grant_id="a2agrant_x"), sub=granted["sub"]
    )


# -- signatures and types -------------------------------------------------------------------------


def test_a_token_resigned_with_the_agents_own_key_is_refused(
    env: Env, granted: dict[str, Any]
) -> None:
    agent_key = PA_KEYS[ISSUER]  # the ES256 key the agent signs its PACT JWTs with
    claims = granted["claims"]
    refused(env, "acme", sign_compact(claims, agent_key, typ="at+jwt"), sub=granted["sub"])
    for kid in ("provider-1", None):
        header = {"alg": "ES256", "typ": "at+jwt", **({"kid": kid} if kid else {})}
        refused(env, "acme", sign_raw(agent_key, header, claims), sub=granted["sub"])


@pytest.mark.parametrize("typ", ["JWT", None, "pact-receipt+jws", "pact-consent+jwt"])
def test_a_provider_signed_token_of_another_type_is_refused(
    env: Env, granted: dict[str, Any], typ: str | None
) -> None:
    token = sign_compact(granted["claims"], PROVIDER_KEY, typ=typ)
    refused(env, "acme", token, sub=granted["sub"])


def test_other_provider_signed_objects_are_not_delegation_tokens(
    env: Env, granted: dict[str, Any]
) -> None:
    # A receipt (signed by the Provider's key) from a genuine delegated turn.
    reply = env.send("acme", "hello", token=granted["access_token"], sub=granted["sub"])
    receipt = reply.json()["message"]["metadata"]["pact.receipt"]["jws"]
    refused(env, "acme", receipt, sub=granted["sub"])
    # A consent-page session (signed by the Provider's key, bound to a person and a code).
    _document, _action, session = env.open_consent(
        "acme", "orders:read", user=granted["user"], sub=granted["sub"]
    )
    refused(env, "acme", session, sub=granted["sub"])
    # The agent's own PACT JWT.
    pact_jwt = env.pa(granted["sub"])["authorization"].split(" ", 1)[1]
    refused(env, "acme", pact_jwt, sub=granted["sub"])


def test_a_delegation_token_is_not_a_pact_jwt(env: Env, granted: dict[str, Any]) -> None:
    answer = env.http.post(
        env.interface("acme") + "/message:send",
        json={"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
        headers={"authorization": "Bearer " + granted["access_token"]},
    )
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == IDENTITY_CHALLENGE
    assert answer.content == b""


# -- time and revocation --------------------------------------------------------------------------


def test_expired_by_one_second_is_refused_with_no_leeway(env: Env, granted: dict[str, Any]) -> None:
    now = int(time.time())
    CLOCK.frozen = float(now)
    try:
        for exp in (now - 1, now):
            token = provider_signed(granted["claims"], iat=now - 3600, exp=exp)
            refused(env, "acme", token, sub=granted["sub"])
        token = provider_signed(granted["claims"], iat=now - 3599, exp=now + 1)
        answer = env.send("acme", "hello", token=token, sub=granted["sub"])
        assert answer.status_code == 200, answer.text
    finally:
        CLOCK.frozen = None


def test_the_genuine_token_one_second_after_its_exp_is_refused(
    env: Env, granted: dict[str, Any]
) -> None:
    CLOCK.frozen = float(granted["claims"]["exp"] + 1)
    try:
        refused(env, "acme", granted["access_token"], sub=granted["sub"])
    finally:
        CLOCK.frozen = None


def test_a_revoked_grants_token_is_refused(env: Env, granted: dict[str, Any]) -> None:
    assert env.provider.revoke_grant(granted["grant_id"]) is True
    refused(env, "acme", granted["access_token"], sub=granted["sub"])
    # A fresh Provider-signed token for the revoked grant fares no better.
    refused(env, "acme", provider_signed(granted["claims"]), sub=granted["sub"])


def test_a_token_outliving_its_grant_is_refused(env: Env) -> None:
    sub = new_sub()
    brief = env.connect("brief", "orders:read", user=env.new_user(), sub=sub)
    # The genuine token lives no longer than its grant (60 s) ...
    assert brief["claims"]["exp"] - brief["claims"]["iat"] <= 60
    # ... and a Provider-signed one that claims an hour is refused once the grant has expired.
    long_lived = provider_signed(brief["claims"], exp=brief["claims"]["iat"] + 3600)
    assert env.send("brief", "hello", token=long_lived, sub=sub).status_code == 200
    CLOCK.offset = 120.0
    try:
        refused(env, "brief", long_lived, sub=sub)
    finally:
        CLOCK.offset = 0.0


def test_claims_of_a_real_token_are_what_the_forgeries_start_from(granted: dict[str, Any]) -> None:
    """Keeps the forgeries honest: they rewrite one claim of a genuine token."""
    claims = jws_claims(granted["access_token"])
    assert claims == granted["claims"]
    assert set(claims) == {"iss", "aud", "sub", "client_id", "scope", "grant_id", "iat", "exp"}
