"""The device flow through a store outage: pactmw's Provider on PostgreSQL, stopped mid-flow.

While the store cannot answer, the agent's OAuth endpoints (device authorization and token,
RFC 8628) answer what an OAuth client reads: 503 with the JSON error
`temporarily_unavailable` (the code RFC 6749 §4.1.2.1 names for a server that is briefly
overloaded or in maintenance, and the one Authlib and oauthlib/django-oauth-toolkit raise),
`Cache-Control: no-store` and `Retry-After`. pactmw's client keeps polling through such an
answer until the device code expires, as it does through a network failure: the poll that
met the outage spent nothing (the store's transaction did not commit).

The cluster is this module's own: stopping it touches no other test's database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from pactmw.client import (
    AgentCredentials,
    AgentSigner,
    AsyncDeviceCodeClient,
    DelegationScheme,
    DeviceCodeClient,
    DeviceFlowTimeout,
    JwksHost,
    OAuthErrorResponse,
    TokenResponse,
    delegation_scheme,
    fetch_card,
)
from tests.client.support import (
    DEVICE_AUTHORIZATION,
    FakeTime,
    Person,
    Provided,
    Route,
    StaticServer,
    run_provider,
    static_scheme,
)
from tests.support.pg import PostgresServer, pg_start, pg_stop, postgres_server_fixture

postgres_server = postgres_server_fixture(scope="module")


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def on_postgres(
    request: pytest.FixtureRequest,
    signer: AgentSigner,
    jwks_host: JwksHost,
    postgres_server: PostgresServer,
) -> Iterator[Provided]:
    """The Provider on uvicorn (its async driver) and on Werkzeug (its blocking one)."""
    wsgi = request.param == "wsgi"
    with run_provider(signer, jwks_host.url, store=postgres_server.dsn, wsgi=wsgi) as running:
        yield running


@pytest.fixture(scope="module")
def scheme(on_postgres: Provided) -> DelegationScheme:
    found = delegation_scheme(fetch_card(on_postgres.card_url("acme")))
    assert found is not None
    return found


@pytest.fixture
def stopped(postgres_server: PostgresServer) -> Iterator[None]:
    """The store's database is down for the test's body, and up again afterwards."""
    pg_stop(postgres_server)
    try:
        yield
    finally:
        pg_start(postgres_server)


def _assert_temporarily_unavailable(error: OAuthErrorResponse) -> None:
    assert error.status == 503
    assert error.error == "temporarily_unavailable"
    assert error.description
    assert error.header("retry-after") == "1"
    assert error.header("cache-control") == "no-store"
    assert error.header("content-type") == "application/json"


def test_the_device_authorization_endpoint_says_temporarily_unavailable(
    scheme: DelegationScheme, me: AgentCredentials, stopped: None
) -> None:
    device = DeviceCodeClient(scheme, me, sleep=FakeTime().sleep)
    with pytest.raises(OAuthErrorResponse) as info:
        device.start(["orders:read"])
    _assert_temporarily_unavailable(info.value)


def test_the_token_endpoint_says_temporarily_unavailable(
    postgres_server: PostgresServer, scheme: DelegationScheme, me: AgentCredentials
) -> None:
    time = FakeTime()
    device = DeviceCodeClient(scheme, me, sleep=time.sleep, clock=time.clock)
    authorization = device.start(["orders:read"])
    pg_stop(postgres_server)
    try:
        with pytest.raises(OAuthErrorResponse) as info:
            device.poll(authorization)
    finally:
        pg_start(postgres_server)
    _assert_temporarily_unavailable(info.value)


def test_the_client_polls_through_an_outage(
    postgres_server: PostgresServer, scheme: DelegationScheme, me: AgentCredentials
) -> None:
    """Down during the first two polls, up for the third; the person approves meanwhile."""
    time = FakeTime()
    device = DeviceCodeClient(scheme, me, sleep=time.sleep, clock=time.clock)
    authorization = device.start(["orders:read"])

    def outage(seconds: float) -> None:
        if len(time.slept) == 1:
            pg_stop(postgres_server)
        elif len(time.slept) == 3:
            pg_start(postgres_server)
            Person().decide(authorization.verification_uri_complete)

    time.on_sleep = outage
    try:
        tokens = device.wait_for_token(authorization)
    finally:
        if len(time.slept) < 3:  # the client gave up while the database was down
            pg_start(postgres_server)
    assert tokens.scopes == ("orders:read",)
    # The interval (1 s) between polls, no shorter than the Retry-After (1 s) of the 503s.
    assert time.slept == [1, 1, 1]


# -- the client's waits, against fixed answers -------------------------------------------------

TOKEN = {"access_token": "at-1", "token_type": "Bearer", "expires_in": 60, "scope": "orders:read"}


@pytest.mark.parametrize("twin", ["sync", "async"])
@pytest.mark.parametrize(
    ("headers", "waits"),
    [
        ({"Retry-After": "7"}, [5, 7, 7]),  # longer than the interval: waited out
        ({"Retry-After": "2"}, [5, 5, 5]),  # never sooner than the interval
        ({}, [5, 5, 5]),
    ],
)
def test_a_503_is_polled_through_after_its_retry_after(
    static: StaticServer,
    me: AgentCredentials,
    headers: dict[str, str],
    waits: list[float],
    twin: str,
) -> None:
    """With the OAuth body, then bare (a proxy's), a 503 is "not now": the client polls on."""
    static.json("/oauth/device_authorization", DEVICE_AUTHORIZATION)
    static.json("/oauth/token", {"error": "temporarily_unavailable"}, status=503, **headers)
    time = FakeTime()

    def recover(seconds: float) -> None:
        if len(time.slept) == 2:
            static.route("/oauth/token", Route(503, b"Service Unavailable", headers))
        elif len(time.slept) == 3:
            static.json("/oauth/token", TOKEN)

    time.on_sleep = recover
    scheme = static_scheme(static)
    if twin == "sync":
        client = DeviceCodeClient(scheme, me, sleep=time.sleep, clock=time.clock)
        tokens = client.wait_for_token(client.start(["orders:read"]))
    else:
        aclient = AsyncDeviceCodeClient(scheme, me, sleep=time.asleep, clock=time.clock)

        async def wait() -> TokenResponse:
            return await aclient.wait_for_token(await aclient.start(["orders:read"]))

        tokens = asyncio.run(wait())
    assert tokens.access_token == "at-1"
    assert time.slept == waits


def test_an_outage_past_the_code_s_life_ends_in_a_timeout(
    static: StaticServer, me: AgentCredentials
) -> None:
    static.json("/oauth/device_authorization", {**DEVICE_AUTHORIZATION, "expires_in": 12})
    static.json("/oauth/token", {"error": "temporarily_unavailable"}, status=503)
    time = FakeTime()
    client = DeviceCodeClient(static_scheme(static), me, sleep=time.sleep, clock=time.clock)
    with pytest.raises(DeviceFlowTimeout):
        client.wait_for_token(client.start(["orders:read"]))
    assert time.slept == [5, 5]


def test_other_errors_still_end_the_wait(static: StaticServer, me: AgentCredentials) -> None:
    static.json("/oauth/device_authorization", DEVICE_AUTHORIZATION)
    static.json("/oauth/token", {"error": "server_error"}, status=500)
    time = FakeTime()
    client = DeviceCodeClient(static_scheme(static), me, sleep=time.sleep, clock=time.clock)
    with pytest.raises(OAuthErrorResponse) as info:
        client.wait_for_token(client.start(["orders:read"]))
    assert (info.value.status, info.value.error) == (500, "server_error")
    assert time.slept == [5]
