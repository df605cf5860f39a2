"""Two `pactmw serve` processes on one PostgreSQL database share their rate limits.

Each process used to count on its own, so two allowed twice a limit. Now the counts live in
the store: requests split across both processes get 429 with `Retry-After` after exactly the
limit, whether they come one by one or all at once. The consent pages' per-address limit
(the connected agents page counts in it too) is shared the same way, and counts the address
the trusted proxy (here: the test, on 127.0.0.1, uvicorn's default trusted proxy) reports,
not one a client wrote itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from tests.support.agent import identity_token, user_message
from tests.support.net import free_port
from tests.support.parties import ISSUER
from tests.support.pg import postgres_server
from tests.support.servers import process_server, serve_argv
from tests.support.toml import toml_value

AUDIENCE = "pactmw-test-audience"
LIMIT = 5
WINDOW = 3600  # seconds; the servers count in wall-clock windows that start on the hour


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="k1")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, key: PrivateJWK) -> Iterator[list[str]]:
    tmp = tmp_path_factory.mktemp("shared_limits")
    runs = tmp / "runs.txt"
    runs.write_text("")
    with postgres_server() as pg:
        ports = (free_port(), free_port())
        config = tmp / "pactmw.toml"
        config.write_text(
            f'base_url = "http://127.0.0.1:{ports[0]}"\n'
            f'audience = "{AUDIENCE}"\n'
            f'store = "{pg.create_database()}"\n'
            f'data_dir = "{tmp / "data"}"\n'
            f"rate_limit = {{ per_user = {LIMIT}, window = {WINDOW} }}\n"
            f"consent_rate_limit = {{ per_agent = {LIMIT}, window = {WINDOW} }}\n"
            "[[agents]]\n"
            f'issuer = "{ISSUER}"\n'
            f"jwks = {toml_value({'keys': [key.public.to_dict()]})}\n"
            "[brands.acme]\n"
            'name = "Acme"\n'
            'handler = "tests.multiprocess_bot:counting_bot"\n'
            "[brands.acme.delegation]\n"
            'login_url = "/login"\n'
            'scopes = { "orders:read" = "Look up your orders" }\n'
        )
        env = {"PACTMW_TEST_RUNS": str(runs)}
        with (
            process_server(serve_argv(config, ports[0]), ports[0], env=env, log=tmp / "a.log"),
            process_server(serve_argv(config, ports[1]), ports[1], env=env, log=tmp / "b.log"),
        ):
            yield [f"http://127.0.0.1:{port}" for port in ports]


@pytest.fixture(autouse=True)
def one_window() -> None:
    """Start well inside a window, so that no test's requests straddle two of them."""
    left = WINDOW - time.time() % WINDOW
    if left < 60:
        time.sleep(left + 1)


def _send(base: str, key: PrivateJWK, sub: str, message_id: str) -> httpx.Response:
    return httpx.post(
        f"{base}/a2a/acme/message:send",
        json={"message": user_message("hello", message_id=message_id)},
        headers={"Authorization": "Bearer " + identity_token(key, ISSUER, AUDIENCE, sub=sub)},
        timeout=30,
    )


def _throttled(answer: httpx.Response) -> None:
    assert answer.status_code == 429, answer.text
    assert 1 <= int(answer.headers["retry-after"]) <= WINDOW
    assert answer.content == b""  # no A2A body (pact-provider.md §7)


def test_requests_split_across_both_processes_share_one_limit(
    servers: list[str], key: PrivateJWK
) -> None:
    answers = [_send(servers[i % 2], key, "alternating", f"m-{i}") for i in range(LIMIT + 3)]
    assert [a.status_code for a in answers[:LIMIT]] == [200] * LIMIT
    for answer in answers[LIMIT:]:
        _throttled(answer)
    # Another user of the agent has a count of its own.
    assert _send(servers[1], key, "someone-else", "m-0").status_code == 200


def test_concurrent_requests_across_both_processes_admit_exactly_the_limit(
    servers: list[str], key: PrivateJWK
) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(
            pool.map(lambda i: _send(servers[i % 2], key, "racing", f"r-{i}"), range(16))
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * LIMIT + [429] * (16 - LIMIT)
    for answer in answers:
        if answer.status_code == 429:
            _throttled(answer)


def _consent(base: str, forwarded_for: str, page: str = "consent") -> httpx.Response:
    # The code entry page (or, signed out, the connected agents page's redirect to the
    # login): no user code, no sign-in needed, counted per client address.
    return httpx.get(
        f"{base}/a2a/acme/oauth/{page}",
        headers={"X-Forwarded-For": forwarded_for},
        timeout=30,
    )


def test_the_consent_pages_limit_per_address_is_shared_and_not_spoofable(
    servers: list[str],
) -> None:
    # The proxy appends the address it saw; whatever the client wrote before it is ignored.
    answers = [_consent(servers[i % 2], f"203.0.113.{i}, 198.51.100.7") for i in range(LIMIT + 2)]
    assert [a.status_code for a in answers[:LIMIT]] == [200] * LIMIT
    for answer in answers[LIMIT:]:
        assert answer.status_code == 429
        assert 1 <= int(answer.headers["retry-after"]) <= WINDOW
    # Another client behind the same proxy is not affected: the bucket is the client's,
    # not the proxy's.
    assert _consent(servers[0], "198.51.100.8").status_code == 200


def test_the_connected_agents_page_counts_in_the_consent_pages_shared_bucket(
    servers: list[str],
) -> None:
    address = "198.51.100.9"
    # Signed out, the page sends the person to sign in: counted like any page request.
    answers = [_consent(servers[i % 2], address, "agents") for i in range(LIMIT + 2)]
    assert [a.status_code for a in answers[:LIMIT]] == [303] * LIMIT
    for answer in answers[LIMIT:]:  # each process refuses: the count is shared, not N times
        assert answer.status_code == 429
        assert 1 <= int(answer.headers["retry-after"]) <= WINDOW
    # One bucket for every page of that address: the consent page is spent too.
    assert _consent(servers[0], address).status_code == 429
    assert _consent(servers[1], address).status_code == 429
    # And the other way round: consent requests spend the connected agents page's count.
    other = "198.51.100.10"
    assert [_consent(servers[i % 2], other).status_code for i in range(LIMIT)] == [200] * LIMIT
    assert _consent(servers[1], other, "agents").status_code == 429
