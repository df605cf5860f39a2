"""Property tests: every parser and verifier entry point, fed arbitrary input, gives a result or
one of the project's documented errors, never another exception; `Provider.handle` never
answers 5xx (SECURITY.md, "Parsing differentials": "Property tests feed arbitrary input to
every parser").

The documented errors: `MalformedInput` (encoding, JSON, JWKs), `JoseError` (JWS),
`AuthenticationFailed` and its `DelegationRejected` (credentials), `A2AError` (A2A requests),
`OAuthError` (forms of the authorization server). The Provider runs in-process on the memory
store with a fixed clock, holding a real delegation grant, so generated requests reach every
flow: the card, `message:send` with and without delegation (and step-up), the OAuth endpoints
and the consent pages.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from pactmw.core.encoding import b64url_decode, b64url_encode, json_loads
from pactmw.core.errors import A2AError, AuthenticationFailed, JoseError, MalformedInput
from pactmw.core.http import Request, Response
from pactmw.core.jose import JWS, HeaderCache, parse_compact
from pactmw.core.jwk import (
    KeySet,
    PublicJWK,
    generate_private_jwk,
    import_public_jwk,
    parse_jwks,
    public_key_set,
)
from pactmw.protocols.delegation import (
    Delegation,
    DelegationRejected,
    SigningKeys,
    verify_access_token,
)
from pactmw.protocols.identity import (
    AgentRegistry,
    IdentityVerifier,
    PersonalAgent,
    RegisteredAgent,
    parse_bearer,
)
from pactmw.provider import Brand, Provider
from pactmw.provider.a2a import A2A_REASONS
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.delegated import (
    DEVICE_CODE_GRANT,
    OAuthError,
    SignedInUser,
    normalize_user_code,
    parse_form,
)
from pactmw.provider.messages import SendMessage, parse_page_size, parse_send_message
from pactmw.provider.ratelimit import RateLimit
from pactmw.provider.routes import PUBLIC_OPERATIONS, Route, match, routed_method
from pactmw.store import open_store
from tests.advisories.support import DELEGATION_CLAIMS, IDENTITY_CLAIMS, INTERFACE, NOW, sign_raw
from tests.delegated.support import LOGIN_URL, SCOPES, hidden, make_tools
from tests.support.parties import AUDIENCE, ISSUER

BASE = "https://provider.example"
USER_CODE = re.compile(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}")

PA_KEY = generate_private_jwk("ES256", kid="pa-1")
PROVIDER_KEY = generate_private_jwk("ES256", kid="provider-1")
RSA_KEY = generate_private_jwk("RS256", kid="rsa-1")
ED_KEY = generate_private_jwk("EdDSA", kid="ed-1")
REAL_JWKS = [key.public.to_dict() for key in (PA_KEY, RSA_KEY, ED_KEY)]
ALICE = SignedInUser(account="acct-alice", label="alice@example.com")


FEW = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def attempt(call: Callable[[], Any], *errors: type[Exception]) -> Any:
    """`call()`'s result, or the exception it raised if it is one of `errors` (any other
    exception propagates and fails the property)."""
    try:
        return call()
    except errors as exc:
        return exc


# -- strategies ------------------------------------------------------------------------------------

#: Any code point, lone surrogates and NUL included (what `\\ud800` and `\\u0000` decode to).
any_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=30)
#: What an adapter can hand over as a header value or query: latin-1 decoded bytes.
latin1_text = st.text(alphabet=st.characters(max_codepoint=255), max_size=60)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    any_text,
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)
json_tokens = st.sampled_from(
    [
        "{", "}", "[", "]", ":", ",", " ", '"', "\\", '"a"', '"a":', "1", "-0", "1e999",
        "1.5e-3", "NaN", "Infinity", "-Infinity", "true", "null", '"\\u0000"', '"\\ud800"',
        '"\\udfff\\ud800"', "\ufeff", '{"a":1,"a":2}', "[" * 40, "]" * 40, "\x00", "é", "0" * 5000,
    ]
)  # fmt: skip
jsonish = st.lists(json_tokens, max_size=25).map("".join)


def dumps(value: Any) -> str:
    """JSON that can carry lone surrogates (as `\\ud800` escapes), as a hostile client sends."""
    return json.dumps(value, ensure_ascii=True)


segments = st.one_of(
    st.binary(max_size=80).map(b64url_encode),
    st.text(max_size=20),
    jsonish.map(lambda t: b64url_encode(t.encode("utf-8", "surrogatepass"))),
    json_values.map(lambda v: b64url_encode(dumps(v).encode())),
    st.sampled_from(["", "e30", "eyJhbGciOiJFUzI1NiJ9", "eyJhbGciOiJSUzI1NiJ9", "bnVsbA"]),
)
compact_tokens = st.one_of(
    st.text(max_size=120), st.tuples(segments, segments, segments).map(".".join)
)
header_members = st.dictionaries(
    st.sampled_from(["alg", "kid", "typ", "crit", "b64", "jku", "jwk", "x5c", "cty", "zip", "x"]),
    json_values,
    max_size=4,
)
algs = st.one_of(
    st.sampled_from(["ES256", "RS256", "EdDSA", "HS256", "none", "es256"]), json_values
)

HEADER_CACHE = HeaderCache()

# -- core: encoding, JWS, JWK ----------------------------------------------------------------------


@MANY
@given(st.one_of(st.text(), st.binary(), st.text(alphabet="ABCDEFabcdef0123456789-_=+/. \n")))
def test_b64url_decode_gives_bytes_or_malformed_input(text: str | bytes) -> None:
    data = attempt(lambda: b64url_decode(text), MalformedInput)
    if isinstance(data, MalformedInput):
        return
    # And one spelling per value: what decodes is exactly the canonical encoding.
    assert b64url_encode(data) == (text if isinstance(text, str) else text.decode("ascii"))


@MANY
@given(
    st.one_of(
        st.binary(max_size=200),
        any_text,
        jsonish,
        jsonish.map(lambda t: t.encode("utf-8", "surrogatepass")),
        json_values.map(dumps),
    )
)
def test_json_loads_gives_a_value_or_malformed_input(data: str | bytes) -> None:
    attempt(lambda: json_loads(data), MalformedInput)


@MANY
@given(compact_tokens, st.frozensets(st.sampled_from(["ES256", "RS256", "EdDSA"])), st.booleans())
def test_parse_compact_gives_a_checked_jws_or_jose_error(
    token: str, allowed: frozenset[str], cached: bool
) -> None:
    cache = HEADER_CACHE if cached else None
    jws = attempt(lambda: parse_compact(token, allowed_algs=allowed, header_cache=cache), JoseError)
    if isinstance(jws, JoseError):
        assert jws.code in {"malformed", "alg_not_allowed"}
        return
    assert isinstance(jws, JWS)
    assert jws.alg in allowed
    assert "crit" not in jws.header
    assert "b64" not in jws.header
    assert jws.kid is None or isinstance(jws.kid, str)
    claims = attempt(jws.claims, JoseError)
    assert isinstance(claims, dict) or claims.code == "malformed"


coordinates = st.one_of(
    st.binary(max_size=40).map(b64url_encode),
    st.integers(min_value=0, max_value=2**300).map(lambda n: b64url_encode(n.to_bytes(40, "big"))),
    st.sampled_from([REAL_JWKS[0]["x"], REAL_JWKS[0]["y"], REAL_JWKS[1]["n"], "AQAB", "AA", ""]),
    json_values,
)
jwk_members = st.sampled_from(
    ["kty", "crv", "x", "y", "n", "e", "alg", "kid", "use", "d", "k", "key_ops"]
)
jwks_entries = st.one_of(
    # A real public key with one member replaced, added or dropped.
    st.builds(
        lambda base, name, value: {**base, name: value},
        st.sampled_from(REAL_JWKS),
        jwk_members,
        st.one_of(coordinates, algs),
    ),
    st.builds(
        lambda base, name: {k: v for k, v in base.items() if k != name},
        st.sampled_from(REAL_JWKS),
        jwk_members,
    ),
    st.dictionaries(
        jwk_members,
        st.one_of(coordinates, algs, st.sampled_from(["EC", "RSA", "OKP", "P-256", "Ed25519"])),
        max_size=6,
    ),
    json_values,
)


@MANY
@given(jwks_entries)
def test_import_public_jwk_gives_a_key_or_malformed_input(entry: Any) -> None:
    key = attempt(lambda: import_public_jwk(entry), MalformedInput)
    if isinstance(key, MalformedInput):
        return
    assert isinstance(key, PublicJWK)
    assert key.thumbprint
    assert key.alg is None or key.fits(key.alg)


@FEW
@given(
    st.one_of(
        st.lists(jwks_entries, max_size=4).map(lambda keys: {"keys": keys}),
        json_values,
        jsonish,
        st.binary(max_size=100),
    )
)
def test_parse_jwks_gives_a_key_set_or_malformed_input(document: Any) -> None:
    keys = attempt(lambda: parse_jwks(document), MalformedInput)
    if isinstance(keys, MalformedInput):
        return
    assert isinstance(keys, KeySet)
    for key in keys.keys:
        assert key.thumbprint


# -- credentials -----------------------------------------------------------------------------------


@MANY
@given(st.one_of(st.none(), any_text, any_text.map(lambda t: "Bearer " + t), latin1_text))
def test_parse_bearer_gives_one_token_or_authentication_failed(header: str | None) -> None:
    token = attempt(lambda: parse_bearer(header), AuthenticationFailed)
    if isinstance(token, AuthenticationFailed):
        assert token.reason in {"missing_token", "malformed_header"}
        return
    assert token
    assert token.split() == [token]


IDENTITY = IdentityVerifier(
    audience=AUDIENCE,
    registry=AgentRegistry(
        [RegisteredAgent(issuer=ISSUER, jwks=public_key_set([PA_KEY, RSA_KEY]))]
    ),
    clock=lambda: NOW,
)
identity_claims = st.builds(
    lambda overrides: {**IDENTITY_CLAIMS, **overrides},
    st.dictionaries(
        st.sampled_from(["iss", "sub", "aud", "iat", "exp", "nbf", "x"]), json_values, max_size=2
    ),
)


@MANY
@given(
    st.one_of(
        # A genuine signature over a hostile header and, often, hostile claims.
        st.builds(
            lambda alg, members, claims: (
                "Bearer "
                + sign_raw(
                    PA_KEY,
                    dumps({"alg": alg, "kid": "pa-1", **members}).encode(),
                    dumps(claims).encode(),
                )
            ),
            st.one_of(st.just("ES256"), algs),
            header_members,
            identity_claims,
        ),
        compact_tokens.map(lambda t: "Bearer " + t),
        st.none(),
        latin1_text,
    )
)
def test_identity_verify_gives_a_personal_agent_or_authentication_failed(
    header: str | None,
) -> None:
    agent = attempt(lambda: IDENTITY.verify(header), AuthenticationFailed)
    if isinstance(agent, AuthenticationFailed):
        assert agent.reason
        return
    assert isinstance(agent, PersonalAgent)
    assert agent.issuer == ISSUER
    assert agent.actor_id.startswith("pa:")


delegation_claims = st.builds(
    lambda overrides: {**DELEGATION_CLAIMS, **overrides},
    st.dictionaries(
        st.sampled_from(["iss", "aud", "sub", "client_id", "scope", "grant_id", "iat", "exp", "x"]),
        json_values,
        max_size=2,
    ),
)


@MANY
@given(
    st.one_of(
        st.builds(
            lambda typ, members, claims: (
                "Bearer "
                + sign_raw(
                    PROVIDER_KEY,
                    dumps({"alg": "ES256", **members, "typ": typ}).encode(),
                    dumps(claims).encode(),
                )
            ),
            st.one_of(st.just("at+jwt"), json_values),
            header_members.map(lambda m: {k: v for k, v in m.items() if k != "alg"}),
            delegation_claims,
        ),
        compact_tokens.map(lambda t: "Bearer " + t),
        st.none(),
        latin1_text,
    ),
    st.sampled_from([ISSUER, "https://other-pa.example", ""]),
    st.sampled_from([NOW, NOW + 3600, NOW - 10**9]),
)
def test_verify_access_token_gives_a_delegation_or_delegation_rejected(
    header: str | None, client_id: str, now: float
) -> None:
    keys = public_key_set([PROVIDER_KEY])
    delegation = attempt(
        lambda: verify_access_token(
            header, keys=keys, interface_url=INTERFACE, client_id=client_id, now=now
        ),
        DelegationRejected,
    )
    if isinstance(delegation, DelegationRejected):
        assert delegation.reason
        return
    assert isinstance(delegation, Delegation)
    assert delegation.client_id == client_id
    assert isinstance(delegation.account, str)
    assert delegation.account


# -- the A2A and OAuth request parsers -------------------------------------------------------------

parts = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"text": any_text},
            optional={"mediaType": json_values, "metadata": json_values, "filename": json_values},
        ),
        st.dictionaries(
            st.sampled_from(
                ["text", "raw", "url", "data", "metadata", "filename", "mediaType", "x"]
            ),
            json_values,
            max_size=3,
        ),
        json_values,
    ),
    max_size=3,
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "messageId": st.one_of(any_text, json_values),
        "role": st.one_of(
            st.sampled_from(["ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED"]), json_values
        ),
        "parts": st.one_of(parts, json_values),
        "contextId": st.one_of(any_text, json_values),
        "taskId": json_values,
        "metadata": json_values,
        "extensions": st.one_of(st.lists(any_text, max_size=2), json_values),
        "referenceTaskIds": json_values,
    },
)
send_bodies = st.one_of(
    messages.map(lambda m: dumps({"message": m}).encode()),
    json_values.map(lambda v: dumps(v).encode()),
    jsonish.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=200),
)


@MANY
@given(send_bodies)
def test_parse_send_message_gives_a_message_or_an_a2a_error(body: bytes) -> None:
    message = attempt(lambda: parse_send_message(body), A2AError)
    if isinstance(message, A2AError):
        assert message.reason in A2A_REASONS  # so the envelope can always be rendered
        return
    assert isinstance(message, SendMessage)
    assert message.message_id
    assert message.text.strip()
    message.text.encode("utf-8")  # storable: no lone surrogates
    assert "\x00" not in message.text


@MANY
@given(
    st.one_of(
        latin1_text,
        latin1_text.map(lambda t: "pageSize=" + t),
        st.lists(
            st.sampled_from(
                [
                    "pageSize=5",
                    "pageSize=",
                    "pageSize=%35",
                    "a=1",
                    "&",
                    "%",
                    "pageSize=1e2",
                    "pageSize=١",
                ]
            ),
            max_size=4,
        ).map("&".join),
    )
)
def test_parse_page_size_gives_1_to_100_or_invalid_params(query: str) -> None:
    size = attempt(lambda: parse_page_size(query), A2AError)
    if isinstance(size, A2AError):
        assert (size.reason, size.message) == ("INVALID_PARAMS", "Invalid pageSize")
        return
    assert 1 <= size <= 100


OPERATION_PATHS = [
    "message:send", "message%3Asend", "message%3asend", "message:stream", "tasks", "tasks/t-1",
    "tasks/t-1:cancel", "tasks/t-1:subscribe", "tasks/t-1/pushNotificationConfigs",
    "tasks/t-1/pushNotificationConfigs/c-1", "extendedAgentCard", ".well-known/agent-card.json",
    "oauth/device_authorization", "oauth/token", "oauth/.well-known/oauth-authorization-server",
    "oauth/jwks.json", "oauth/consent", "oauth/consent/decision", "oauth/connected", "",
]  # fmt: skip
methods = st.one_of(
    st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
    st.text(max_size=8),
)
brand_ids = st.one_of(
    st.sampled_from(["acme", "plain", "nobody", "%61cme", "", "acme%2F"]), st.text(max_size=8)
)
paths = st.one_of(
    st.builds(
        lambda brand, rest, tail: f"/a2a/{brand}/{rest}{tail}",
        brand_ids,
        st.sampled_from(OPERATION_PATHS),
        st.one_of(st.just(""), st.text(max_size=10)),
    ),
    st.builds(lambda brand, rest: f"/a2a/{brand}/{rest}", brand_ids, any_text),
    any_text,
)


@MANY
@given(methods, paths)
@example("HEAD", "/a2a/acme/.well-known/agent-card.json")  # failed only when generated
def test_match_gives_a_route_or_none(method: str, path: str) -> None:
    route = match(method, path)
    if route is None:
        return
    assert isinstance(route, Route)
    assert route.brand_id
    assert path.startswith("/a2a/")
    if route.operation in PUBLIC_OPERATIONS:
        # HEAD is routed as GET (RFC 9110 §9.3.2): the generated methods include it.
        assert routed_method(method) in ("GET", "POST")


@MANY
@given(
    st.one_of(
        any_text, st.text(alphabet="BCDFGHJKLMNPQRSTVWXZbcdfghjklmnpqrstvwxzß -ＢᴮﬀK", max_size=12)
    )
)
def test_normalize_user_code_gives_a_code_or_none(typed: str) -> None:
    code = normalize_user_code(typed)
    if code is None:
        return
    assert USER_CODE.fullmatch(code)
    assert normalize_user_code(code) == code


form_fields = st.sampled_from(
    [
        "client_id",
        "scope",
        "grant_type",
        "device_code",
        "refresh_token",
        "session",
        "decision",
        "assertion",
        "x",
    ]
)
form_bodies = st.one_of(
    st.binary(max_size=200),
    st.lists(
        st.tuples(
            form_fields,
            any_text.map(lambda t: t.encode("utf-8", "surrogatepass").decode("utf-8", "replace")),
        ),
        max_size=6,
    ).map(lambda pairs: urlencode(pairs).encode()),
    latin1_text.map(lambda t: t.encode("latin-1")),
    st.just(b"&".join(b"f%d=1" % i for i in range(150))),
)


@MANY
@given(form_bodies)
def test_parse_form_gives_fields_or_oauth_error(body: bytes) -> None:
    form = attempt(lambda: parse_form(body), OAuthError)
    if isinstance(form, OAuthError):
        assert (form.error, form.status) == ("invalid_request", 400)
        return
    assert all(isinstance(k, str) and isinstance(v, list) for k, v in form.items())


# -- Provider.handle -------------------------------------------------------------------------------


def _bot(turn: Any) -> str:
    # (A bot that raises is a documented 500; this one only uses tools its Brand has.)
    if "orders" in turn.text and turn.brand.delegation is not None:  # step-up without a grant
        return "orders: " + ", ".join(turn.tools.list_orders())
    return "hi"


class World:
    """A Provider with a delegated Brand and a plain one, and real credentials for both."""

    def __init__(self) -> None:
        registry = AgentRegistry(
            [RegisteredAgent(issuer=ISSUER, name="PA", jwks=public_key_set([PA_KEY]))]
        )
        self.provider = Provider(
            base_url=BASE,
            verifier=IdentityVerifier(audience=AUDIENCE, registry=registry, clock=lambda: NOW),
            store=open_store("memory://"),
            brands=[
                Brand(
                    id="acme",
                    name="Acme",
                    handler=_bot,
                    delegation=DelegationConfig(
                        scopes=SCOPES, login_url=LOGIN_URL, tools=make_tools([]), interval=1
                    ),
                ),
                Brand(id="plain", name="Plain", handler=_bot),
            ],
            signing_keys=SigningKeys((PROVIDER_KEY,)),
            consent_rate_limit=RateLimit(per_agent=10**9),
            clock=lambda: NOW,
        )
        self.pact = "Bearer " + sign_raw(PA_KEY, {"alg": "ES256", "kid": "pa-1"}, IDENTITY_CLAIMS)
        self.user_code, self.device_code, self.session = self._pending()
        self.access = self._connect()
        body = b'{"message":{"messageId":"w-0","role":"ROLE_USER","parts":[{"text":"hi"}]}}'
        started = json.loads(self.call("POST", "/a2a/acme/message:send", body).body)
        self.context = started["message"]["contextId"]

    def call(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        query: str = "",
        user: SignedInUser | None = None,
    ) -> Response:
        headers: tuple[tuple[str, str], ...] = (
            (("authorization", self.pact),) if "/consent" not in path else ()
        )
        if method == "POST" and "/oauth/" in path:  # the OAuth endpoints read forms only
            headers = (*headers, ("content-type", "application/x-www-form-urlencoded"))
        request = Request(method=method, path=path, query=query, headers=headers)
        return self.provider.handle(request, lambda limit: body, lambda: user)

    def _pending(self) -> tuple[str, str, str]:
        form = urlencode({"client_id": ISSUER, "scope": "orders:read orders:cancel"}).encode()
        started = json.loads(self.call("POST", "/a2a/acme/oauth/device_authorization", form).body)
        query = urlencode({"user_code": started["user_code"]})
        page = self.call("GET", "/a2a/acme/oauth/consent", query=query, user=ALICE)
        return started["user_code"], started["device_code"], hidden(page.body.decode(), "session")

    def _connect(self) -> str:
        form = urlencode({"session": self.session, "decision": "allow", "scope": "orders:read"})
        decided = self.call("POST", "/a2a/acme/oauth/consent/decision", form.encode(), user=ALICE)
        assert decided.status == 303, decided.body
        form = urlencode(
            {"client_id": ISSUER, "grant_type": DEVICE_CODE_GRANT, "device_code": self.device_code}
        )
        tokens = json.loads(self.call("POST", "/a2a/acme/oauth/token", form.encode()).body)
        access: str = tokens["access_token"]
        # A second pending authorization keeps a live session for the decision route.
        self.user_code, self.device_code, self.session = self._pending()
        return access


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    built = World()
    yield built
    built.provider.close()


def _fill(world: World, text: str) -> str:
    """Put the world's genuine credentials where a generated value has placeholders."""
    return (
        text.replace("<pact-token>", world.pact.split(" ", 1)[1])
        .replace("<pact>", world.pact)
        .replace("<access>", world.access)
        .replace("<session>", world.session)
        .replace("<user_code>", world.user_code)
        .replace("<device_code>", world.device_code)
        .replace("<context>", world.context)
    )


#: (method, operation path) of every route the Provider serves.
ROUTES = [
    ("POST", "message:send"), ("POST", "message:stream"),
    ("GET", "tasks"), ("GET", "tasks/t-1"), ("POST", "tasks/t-1:cancel"),
    ("POST", "tasks/t-1:subscribe"), ("GET", "tasks/t-1/pushNotificationConfigs"),
    ("DELETE", "tasks/t-1/pushNotificationConfigs/c-1"), ("GET", "extendedAgentCard"),
    ("GET", ".well-known/agent-card.json"), ("POST", "oauth/device_authorization"),
    ("POST", "oauth/token"), ("GET", "oauth/.well-known/oauth-authorization-server"),
    ("GET", "oauth/jwks.json"), ("GET", "oauth/consent"), ("POST", "oauth/consent"),
    ("POST", "oauth/consent/decision"), ("GET", "oauth/connected"),
]  # fmt: skip
routed = st.builds(
    lambda route, brand: (route[0], f"/a2a/{brand}/{route[1]}"),
    st.sampled_from(ROUTES),
    st.sampled_from(["acme"] * 6 + ["plain", "nobody"]),
)
# `one_of` picks its branches about evenly: most requests carry a valid JWT.
authorizations = st.one_of(
    st.just("<pact>"),
    st.just("<pact>"),
    st.just("<pact>"),
    st.just("<pact>"),
    st.sampled_from([None, "Bearer x.y.z", "Basic abc", "Bearer <access>", "<pact> <pact>"]),
    latin1_text,
)
delegations = st.one_of(
    st.none(),
    st.none(),
    st.sampled_from(
        ["Bearer <access>", "Bearer <pact-token>", "Bearer <session>", "Bearer", "<access>"]
    ),
    latin1_text,
)
other_headers = st.lists(
    st.one_of(
        st.tuples(st.just("origin"), st.sampled_from([BASE, "https://evil.example", "null", ""])),
        # A form's own type, often: the OAuth endpoints refuse any other before reading.
        st.just(("content-type", "application/x-www-form-urlencoded")),
        st.tuples(st.sampled_from(["content-type", "content-length", "cookie", "x"]), latin1_text),
        st.tuples(latin1_text.map(str.lower), latin1_text),
        st.tuples(st.sampled_from(["authorization", "x-a2a-user-delegation"]), latin1_text),
    ),
    max_size=3,
)
queries = st.one_of(
    st.sampled_from(
        [
            "",
            "pageSize=5",
            "pageSize=0",
            "user_code=<user_code>",
            "user_code=bcdf",
            "status=approved&scope=orders:read",
        ]
    ),
    latin1_text,
)
GOOD_BODIES = [
    b'{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"show my orders"}]}}',
    b'{"message":{"messageId":"m-2","role":"ROLE_USER","parts":[{"text":"hello"}]}}',
    b'{"message":{"messageId":"m-3","contextId":"<context>","role":"ROLE_USER",'
    b'"parts":[{"text":"my orders again"}]}}',
    b"client_id=https%3A%2F%2Fpa.example&scope=orders%3Aread",
    b"client_id=https%3A%2F%2Fpa.example&grant_type=" + DEVICE_CODE_GRANT.encode()
    + b"&device_code=<device_code>",
    b"client_id=https%3A%2F%2Fpa.example&grant_type=refresh_token&refresh_token=rt_x",
    b"session=<session>&decision=allow&scope=orders%3Aread",
    b"session=<session>&decision=deny",
    b"assertion=x.y.z",
]  # fmt: skip
request_bodies = st.one_of(
    st.sampled_from(GOOD_BODIES), st.sampled_from(GOOD_BODIES), send_bodies, form_bodies
)


def requests(method_paths: st.SearchStrategy[tuple[str, str]]) -> st.SearchStrategy[Any]:
    return st.tuples(
        method_paths,
        queries,
        authorizations,
        delegations,
        other_headers,
        request_bodies,
        st.sampled_from([None, ALICE]),
        st.sampled_from([None, "127.0.0.1"]),
    )


def _request(world: World, case: tuple[Any, ...]) -> tuple[Request, bytes, SignedInUser | None]:
    (method, path), query, authorization, delegation, others, body, user, client = case
    headers = [("authorization", authorization), ("x-a2a-user-delegation", delegation), *others]
    filled = tuple((name, _fill(world, value)) for name, value in headers if value is not None)
    request = Request(method, path, query=_fill(world, query), headers=filled, client=client)
    return request, _fill(world, body.decode("latin-1")).encode("latin-1"), user


def _check(response: Response) -> None:
    assert isinstance(response, Response)
    event(f"HTTP {response.status}")  # see `--hypothesis-show-statistics`
    assert 100 <= response.status < 500, (response.status, response.body[:300])
    assert isinstance(response.body, bytes)
    for name, value in response.headers:
        # Every header must be sendable as is: latin-1, no line breaks (no header injection).
        name.encode("latin-1")
        value.encode("latin-1")
        assert not {"\r", "\n"} & set(name + value), (name, value)


def _handle(world: World, case: tuple[Any, ...]) -> Response:
    request, body, user = _request(world, case)
    return world.provider.handle(
        request, lambda limit: None if len(body) > limit else body, lambda: user
    )


@MANY
@given(requests(routed))
def test_provider_handle_never_answers_5xx_on_its_routes(
    world: World, case: tuple[Any, ...]
) -> None:
    _check(_handle(world, case))


@FEW
@given(requests(st.tuples(methods, paths)))
def test_provider_handle_never_answers_5xx_on_any_method_and_path(
    world: World, case: tuple[Any, ...]
) -> None:
    _check(_handle(world, case))


@FEW
@given(requests(routed))
def test_provider_ahandle_never_answers_5xx(world: World, case: tuple[Any, ...]) -> None:
    request, body, user = _request(world, case)

    async def read(limit: int) -> bytes | None:
        return None if len(body) > limit else body

    async def current_user() -> SignedInUser | None:
        return user

    _check(asyncio.run(world.provider.ahandle(request, read, current_user)))


def test_the_world_reaches_the_deep_flows(world: World) -> None:
    """The control for the two properties above: the generated credentials are genuine."""
    body = b'{"message":{"messageId":"w-1","role":"ROLE_USER","parts":[{"text":"show my orders"}]}}'
    plain = Request("POST", "/a2a/acme/message:send", headers=(("authorization", world.pact),))
    step_up = json.loads(world.provider.handle(plain, lambda limit: body).body)
    assert step_up["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    delegation = ("x-a2a-user-delegation", "Bearer " + world.access)
    delegated = Request(
        "POST", "/a2a/acme/message:send", headers=(("authorization", world.pact), delegation)
    )
    body = body.replace(b"w-1", b"w-2")
    reply = json.loads(world.provider.handle(delegated, lambda limit: body).body)
    assert reply["message"]["parts"][0]["text"] == "orders: A-1001, A-1002"
    assert "pact.receipt" in reply["message"]["metadata"]
