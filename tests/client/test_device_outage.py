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

from collections.abc import Iterator

import pytest

from pactmw.client import (
    AgentCredentials,
    AgentSigner,
    DelegationScheme,
    DeviceCodeClient,
    JwksHost,
    OAuthErrorResponse,
    delegation_scheme,
    fetch_card,
)
from tests.client.support import (
    FakeTime,
    Provided,
    run_provider,
)
from tests.support.pg import PostgresServer, pg_start, pg_stop, postgres_server_fixture

postgres_server = postgres_server_fixture(scope="module")


@pytest.fixture(scope="module")
def on_postgres(
    signer: AgentSigner, jwks_host: JwksHost, postgres_server: PostgresServer
) -> Iterator[Provided]:
    with run_provider(signer, jwks_host.url, store=postgres_server.dsn) as running:
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
