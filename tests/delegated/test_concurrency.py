"""One refresh token, one device code: exactly one winner under concurrency, on every backend.

Two Providers share one database (sqlite file or PostgreSQL), each behind its own uvicorn
server, like two workers behind a load balancer (both use the same public base URL and
signing keys). Twelve requests are released together by a barrier, alternating servers.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.delegation import SigningKeys
from tests.delegated.support import (
    DEVICE_CODE_GRANT,
    Env,
    delegated_brand,
    jws_claims,
    new_sub,
    serve,
)
from tests.support.net import free_port, loopback_client
from tests.support.parties import ISSUER
from tests.support.pg import PostgresServer, postgres_server_fixture

RACERS = 12
ROUNDS = 3
TOKEN_PATH = "/a2a/acme/oauth/token"


postgres = postgres_server_fixture(scope="module")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/shared.db"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database()


@pytest.fixture
def reuse_interval() -> float:
    """The Brand's `refresh_reuse_interval` (the default); a test may parametrize it."""
    return 5.0


@pytest.fixture
def pair(store_url: str, reuse_interval: float) -> Iterator[tuple[Env, Env]]:
    keys = SigningKeys((generate_private_jwk("ES256"),))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    calls: list[tuple[str, str, dict[str, Any]]] = []

    def brands() -> list[Any]:
        return [delegated_brand("acme", "Acme", calls, refresh_reuse_interval=reuse_interval)]

    with (
        serve(store_url, brands, keys=keys, port=port, calls=calls) as first,
        serve(store_url, brands, keys=keys, base_url=base, calls=calls) as second,
    ):
        # `second` listens on its own port but answers as the same public site.
        yield first, second


def race(
    envs: tuple[Env, Env], form: dict[str, str], sub: str, racers: int = RACERS
) -> list[httpx.Response]:
    """POST `form` to the token endpoint `racers` times at once, alternating servers."""
    barrier = threading.Barrier(racers)

    def one(index: int) -> httpx.Response:
        env = envs[index % 2]
        # Each server is reached on its own port, whatever its public base URL says.
        url = f"http://127.0.0.1:{env.port}{TOKEN_PATH}"
        headers = env.pa(sub)
        with loopback_client(timeout=60) as client:
            barrier.wait(timeout=30)
            return client.post(url, data=form, headers=headers)

    with concurrent.futures.ThreadPoolExecutor(racers) as pool:
        return list(pool.map(one, range(racers)))


def tally(responses: list[httpx.Response]) -> tuple[list[httpx.Response], list[str]]:
    winners = [r for r in responses if r.status_code == 200]
    errors = [r.json()["error"] for r in responses if r.status_code != 200]
    assert all(r.status_code in (200, 400) for r in responses), [r.text for r in responses]
    return winners, errors


def test_simultaneous_polls_issue_exactly_one_token(pair: tuple[Env, Env]) -> None:
    first, _ = pair
    for _ in range(ROUNDS):
        sub = new_sub()
        started, action, session = first.open_consent("acme", "orders:read", sub=sub)
        assert first.decide(action, session, ["orders:read"], user="alice").status_code == 303
        form = {
            "client_id": ISSUER,
            "grant_type": DEVICE_CODE_GRANT,
            "device_code": started["device_code"],
        }
        winners, errors = tally(race(pair, form, sub))
        assert len(winners) == 1, errors
        assert errors == ["invalid_grant"] * (RACERS - 1)
        token = winners[0].json()["access_token"]
        assert jws_claims(token)["scope"] == "orders:read"
        # The one token works on either server.
        for env in pair:
            answer = env.http.post(
                f"http://127.0.0.1:{env.port}/a2a/acme/message:send",
                json={
                    "message": {
                        "messageId": f"m-{time.time_ns()}",
                        "role": "ROLE_USER",
                        "parts": [{"text": "hello"}],
                    }
                },
                headers={**env.pa(sub), "x-a2a-user-delegation": "Bearer " + token},
            )
            assert answer.status_code == 200, answer.text


def test_twenty_simultaneous_refreshes_share_one_rotation(pair: tuple[Env, Env]) -> None:
    """Within the reuse interval: one rotation, and all 20 callers get its very pair."""
    first, _ = pair
    for _ in range(ROUNDS):
        sub = new_sub()
        tokens = first.connect("acme", "orders:read", sub=sub)
        form = {
            "client_id": ISSUER,
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
        }
        answers = race(pair, form, sub, racers=20)
        assert [r.status_code for r in answers] == [200] * 20, [r.text for r in answers]
        assert len({r.content for r in answers}) == 1
        pair_issued = answers[0].json()
        assert pair_issued["scope"] == "orders:read"
        assert pair_issued["refresh_token"] != tokens["refresh_token"]
        grant = first.provider.store.get_grant(tokens["grant_id"])
        assert grant is not None
        assert grant.revoked_at is None
        # Exactly one rotation: its refresh token is the one live token of the grant, and
        # it rotates on (on either server) like any other.
        form["refresh_token"] = pair_issued["refresh_token"]
        for env in pair:
            url = f"http://127.0.0.1:{env.port}{TOKEN_PATH}"
            again = env.http.post(url, data=form, headers=env.pa(sub))
            assert again.status_code == 200, again.text
            form["refresh_token"] = again.json()["refresh_token"]


@pytest.mark.parametrize("reuse_interval", [0.0])
def test_simultaneous_refreshes_rotate_exactly_once(pair: tuple[Env, Env]) -> None:
    """Without a reuse interval (0): the strict rule, each loser's replay revokes."""
    first, _ = pair
    for _ in range(ROUNDS):
        sub = new_sub()
        tokens = first.connect("acme", "orders:read", sub=sub)
        form = {
            "client_id": ISSUER,
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
        }
        winners, errors = tally(race(pair, form, sub))
        assert len(winners) == 1, errors
        assert errors == ["invalid_grant"] * (RACERS - 1)
        assert winners[0].json()["scope"] == "orders:read"
        # The store's documented contract: the losers presented a spent token, which reads as
        # a replay, so the whole grant (the winner's new tokens included) is revoked.
        grant = first.provider.store.get_grant(tokens["grant_id"])
        assert grant is not None
        assert grant.revoked_at is not None
