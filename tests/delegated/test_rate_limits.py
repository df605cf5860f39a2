"""Per-(agent, sub) limits of the device authorization and token endpoints, over HTTP.

Past its limit the device authorization endpoint answers 429 `temporarily_unavailable` with
`Retry-After` (and a step-up task, which makes a device authorization too, is 429 with
`Retry-After` and no body, as past `rate_limit`); the token endpoint answers a device-code
poll with RFC 8628's `slow_down` and a refresh with that 429. Counted in the store when it
is shared (PostgreSQL), so two Providers on one database share one count.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from pactmw.provider.delegated import ConsentRefused
from pactmw.provider.ratelimit import RateLimit
from tests.delegated.support import Env, delegated_brand, new_sub, serve
from tests.support.clock import OffsetClock
from tests.support.pg import PostgresServer, postgres_server_fixture

postgres = postgres_server_fixture(scope="module")

WINDOW_START = 1_800_000_000.0  # a multiple of 60: a window starts here


def _refused(answer: httpx.Response, status: int, error: str) -> int:
    """Check a rate-limit refusal; return its Retry-After (seconds)."""
    assert answer.status_code == status, answer.text
    assert answer.json()["error"] == error
    assert answer.headers["cache-control"] == "no-store"
    wait = int(answer.headers["retry-after"])
    assert 1 <= wait <= 60
    return wait


@pytest.fixture
def clock() -> OffsetClock:
    """Wall-clock time shifted to start at a window's start; `advance` jumps ahead."""
    clock = OffsetClock()
    clock.advance(WINDOW_START - time.time())
    return clock


@pytest.fixture
def env(tmp_path: Path, clock: OffsetClock) -> Iterator[Env]:
    with serve(
        f"sqlite:///{tmp_path}/limits.db",
        [delegated_brand("acme", "Acme", [])],
        device_rate_limit=RateLimit(per_user=3, window=60),
        token_rate_limit=RateLimit(per_user=3, window=60),
        clock=clock,
    ) as running:
        yield running


def test_device_authorizations_are_limited_per_agent_user(env: Env, clock: OffsetClock) -> None:
    sub = new_sub()
    for _ in range(3):
        assert env.device_authorization("acme", sub=sub).status_code == 200
    refused = env.device_authorization("acme", sub=sub)
    _refused(refused, 429, "temporarily_unavailable")
    # Invalid requests count too: a loop of bad scopes is stopped the same way.
    assert env.device_authorization("acme", "nope", sub=sub).status_code == 429
    # Another user of the same agent has a bucket of its own.
    assert env.device_authorization("acme", sub=new_sub()).status_code == 200
    # A request for another client is still refused as such, before any counting.
    wrong = env.device_authorization("acme", sub=sub, client_id="https://other.example")
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "invalid_client"
    clock.advance(60)  # the next window
    assert env.device_authorization("acme", sub=sub).status_code == 200


def test_polls_past_the_limit_are_told_to_slow_down(env: Env, clock: OffsetClock) -> None:
    sub = new_sub()
    codes = [
        env.device_authorization("acme", "orders:read", sub=sub).json()["device_code"]
        for _ in range(3)
    ]
    # Three codes, each polled once: never too fast for any one code.
    for code in codes:
        assert env.poll("acme", code, sub=sub).json()["error"] == "authorization_pending"
    # The per-code interval's slow_down (RFC 8628 §3.5) has no Retry-After; this one also
    # says when the agent user's window ends.
    _refused(env.poll("acme", codes[0], sub=sub), 400, "slow_down")
    # Another agent user is not slowed down.
    other = new_sub()
    code = env.device_authorization("acme", "orders:read", sub=other).json()["device_code"]
    assert env.poll("acme", code, sub=other).json()["error"] == "authorization_pending"


def test_refreshes_past_the_limit_get_429_and_spend_nothing(env: Env, clock: OffsetClock) -> None:
    sub = new_sub()
    tokens = env.connect("acme", "orders:read", user="alice", sub=sub)  # 1 token request
    refresh = tokens["refresh_token"]
    for _ in range(2):
        answer = env.refresh("acme", refresh, sub=sub)
        assert answer.status_code == 200, answer.text
        refresh = answer.json()["refresh_token"]
    _refused(env.refresh("acme", refresh, sub=sub), 429, "temporarily_unavailable")
    clock.advance(60)
    # The refused refresh used nothing up: the same token still rotates (no reuse revocation).
    answer = env.refresh("acme", refresh, sub=sub)
    assert answer.status_code == 200, answer.text


def _step_up_task(answer: httpx.Response) -> None:
    assert answer.status_code == 200, answer.text
    assert answer.json()["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"


def test_step_up_tasks_count_against_the_device_authorization_limit(
    env: Env, clock: OffsetClock
) -> None:
    sub = new_sub()
    # A step-up task makes a device authorization (a consent link) for (agent, sub), so it
    # shares the device authorization endpoint's bucket: two of those and one step-up fill it.
    for _ in range(2):
        assert env.device_authorization("acme", sub=sub).status_code == 200
    _step_up_task(env.send("acme", "show my orders", sub=sub))
    # Past it, message:send answers a step-up as it answers past `rate_limit`: 429,
    # Retry-After, no body; the message stays unanswered.
    refused = env.send("acme", "show my orders", sub=sub, message_id="m-past")
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert refused.content == b""
    _refused(env.device_authorization("acme", sub=sub), 429, "temporarily_unavailable")
    # A turn that needs no consent link is not counted or refused (`rate_limit` is off).
    assert env.send("acme", "hello", sub=sub).status_code == 200
    # Another user of the same agent has a bucket of its own.
    _step_up_task(env.send("acme", "show my orders", sub=new_sub()))
    clock.advance(60)  # the next window: the refused message now gets its step-up task
    _step_up_task(env.send("acme", "show my orders", sub=sub, message_id="m-past"))


@contextlib.contextmanager
def _two_providers(
    dsn: str, clock: Callable[[], float], shared: bool | None
) -> Iterator[tuple[Env, Env]]:
    limit = RateLimit(per_user=4, window=60)
    brands = [delegated_brand("acme", "Acme", [])]
    with (
        serve(dsn, brands, device_rate_limit=limit, shared_rate_limits=shared, clock=clock) as a,
        serve(dsn, brands, device_rate_limit=limit, shared_rate_limits=shared, clock=clock) as b,
    ):
        yield a, b


@pytest.mark.parametrize("shared", [None, False])
def test_providers_on_one_postgresql_share_the_count(
    postgres: PostgresServer, clock: OffsetClock, shared: bool | None
) -> None:
    dsn = postgres.create_database()
    try:
        sub = new_sub()
        with _two_providers(dsn, clock, shared) as (a, b):
            answers = [
                (a, b)[i % 2].device_authorization("acme", sub=sub).status_code for i in range(9)
            ]
    finally:
        postgres.drop_database(dsn.rsplit("/", 1)[1])
    if shared is None:  # PostgreSQL counts in the store unless told not to: 4 in all
        assert answers == [200] * 4 + [429] * 5
    else:  # each Provider counts its own: 4 each, 8 in all
        assert answers == [200] * 8 + [429]


@pytest.mark.parametrize(
    ("wait", "said"),
    [
        (1, "a minute"),
        (60, "a minute"),
        (61, "2 minutes"),
        (120, "2 minutes"),
        (3599, "60 minutes"),
    ],
)
def test_the_pages_say_how_long_to_wait(wait: int, said: str) -> None:
    refused = ConsentRefused.rate_limited(wait)
    assert (refused.status, refused.headers) == (429, (("Retry-After", str(wait)),))
    assert str(refused).endswith(f"try again in {said}.")
