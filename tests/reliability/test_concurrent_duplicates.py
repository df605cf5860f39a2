"""Concurrent duplicates over HTTP resolve to exactly one winner, on every store.

What the rest of the suite already covers: duplicate `message:send` retries in one process
(tests/provider/test_flow.py, memory and sqlite), across two `pactmw serve` on PostgreSQL
(tests/test_two_processes_postgres.py), device-code polls and refresh rotations over HTTP on
sqlite and PostgreSQL (tests/delegated/test_concurrency.py), consent decisions over HTTP on
sqlite (tests/delegated/test_consent_attacks.py), and every atomic store operation across
threads and processes (tests/store/). Added here, at the HTTP level:

* a burst of identical `message:send` requests released together, against one `pactmw serve`
  on the memory store and two `pactmw serve` processes sharing a sqlite file or a PostgreSQL
  database: the bot runs once, every 200 carries the same bytes, the rest are "pending";
* simultaneous consent decisions on PostgreSQL (the sqlite case lives in the consent tests);
* one Brand-login assertion posted many times at once (sqlite and PostgreSQL): one consent
  page, every other post refused as already used.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.protocols.delegation import mint_login_assertion
from pactmw.provider import Brand
from pactmw.provider.brand import DelegationConfig
from tests.delegated.support import SCOPES, Env, bot, delegated_brand, make_tools, new_sub, serve
from tests.reliability.support import (
    assert_reply,
    bearer,
    bot_env,
    bot_runs,
    inline_agent,
    is_pending,
    send,
    write_config,
)
from tests.support.net import free_port, loopback_client
from tests.support.pg import PostgresServer, postgres_server_fixture
from tests.support.servers import process_server, serve_argv

RACERS = 12


postgres = postgres_server_fixture(scope="module")


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="dup-1")


@attrs.define
class Servers:
    bases: list[str]
    runs: Path


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def servers(request: pytest.FixtureRequest, tmp_path: Path, key: PrivateJWK) -> Iterator[Servers]:
    runs = tmp_path / "runs.txt"
    if request.param == "memory":
        store, count = "memory://", 1  # a memory store cannot be shared by processes
    elif request.param == "sqlite":
        store, count = f"sqlite:///{tmp_path}/shared.db", 2
    else:
        store, count = request.getfixturevalue("postgres").create_database(), 2
    ports = [free_port() for _ in range(count)]
    config = write_config(
        tmp_path / "pactmw.toml", port=ports[0], store=store, agents=[inline_agent(key)]
    )
    with ExitStack() as stack:
        for port in ports:
            stack.enter_context(
                process_server(
                    serve_argv(config, port),
                    port,
                    env=bot_env(runs, slow_seconds=1.0),
                    log=tmp_path / f"serve-{port}.log",
                )
            )
        yield Servers([f"http://127.0.0.1:{port}" for port in ports], runs)


def _race(count: int, call: Any) -> list[Any]:
    """Run `call(index)` `count` times at once, released together by a barrier."""
    barrier = threading.Barrier(count)

    def one(index: int) -> Any:
        barrier.wait(timeout=30)
        return call(index)

    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def test_duplicate_messages_have_one_winner(servers: Servers, key: PrivateJWK) -> None:
    bases = servers.bases
    with loopback_client(timeout=30) as client:
        opened = send(client, bases[0], bearer(key), "hello", "first")
        context_id = assert_reply(opened, message_id="first", text="hello", earlier=[])["contextId"]
    text = "[slow] the same message, many times"

    def duplicate(index: int) -> httpx.Response:
        with loopback_client(timeout=30) as client:
            return send(client, bases[index % len(bases)], bearer(key), text, "dup", context_id)

    answers = _race(RACERS, duplicate)
    assert bot_runs(servers.runs)["dup"] == 1
    replies = [a for a in answers if a.status_code == 200]
    assert len(replies) >= 1
    assert len({a.content for a in replies}) == 1
    assert all(a.status_code == 200 or is_pending(a) for a in answers), [
        (a.status_code, a.text) for a in answers
    ]
    assert_reply(replies[0], message_id="dup", text=text, earlier=["first"], context_id=context_id)
    # Once answered, retries on every process get the stored bytes; the bot ran once.
    for base in bases:
        with loopback_client(timeout=30) as client:
            again = send(client, base, bearer(key), text, "dup", context_id)
        assert again.content == replies[0].content
    assert bot_runs(servers.runs) == {"first": 1, "dup": 1}


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/delegated.db"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database()


def test_simultaneous_consent_decisions_on_postgres_decide_once(postgres: PostgresServer) -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = []
    with serve(postgres.create_database(), [delegated_brand("acme", "Acme", calls)]) as env:
        sub = new_sub()
        started, action, session = env.open_consent("acme", "orders:read", user="alice", sub=sub)

        def decide(index: int) -> int:
            with loopback_client(timeout=30) as client:
                return client.post(
                    action,
                    data={
                        "session": session,
                        "decision": "allow" if index % 2 else "deny",
                        "scope": "orders:read",
                    },
                    headers={"cookie": "sid=alice"},
                ).status_code

        statuses = _race(8, decide)
        assert sorted(statuses) == [303] + [400] * 7, statuses
        assert env.poll("acme", started["device_code"], sub=sub).status_code in (200, 400)


BRAND_ISSUER = "https://skyline.example"


def test_one_brand_assertion_posted_at_once_opens_one_consent_page(store_url: str) -> None:
    brand_key = generate_private_jwk("ES256", kid="brand-1")
    calls: list[tuple[str, str, dict[str, Any]]] = []
    skyline = Brand(
        id="skyline",
        name="Skyline",
        handler=bot,
        delegation=DelegationConfig(
            scopes=SCOPES,
            login_url="https://skyline.example/login",
            mode="brand",
            brand_issuer=BRAND_ISSUER,
            brand_jwks=public_key_set([brand_key]),
            tools=make_tools(calls),
            interval=1,
        ),
    )
    with serve(store_url, [skyline], calls=calls) as env:
        answers = _replay_race(env, brand_key)
    pages = [a for a in answers if a.status_code == 200]
    assert len(pages) == 1, [(a.status_code, a.text[:200]) for a in answers]
    assert 'name="session"' in pages[0].text
    refused = [a for a in answers if a.status_code != 200]
    assert all(a.status_code == 400 and "already used" in a.text for a in refused), [
        (a.status_code, a.text[:300]) for a in refused
    ]


def _replay_race(env: Env, brand_key: PrivateJWK) -> list[httpx.Response]:
    started = env.device_authorization("skyline", "orders:read", sub=new_sub())
    assert started.status_code == 200, started.text
    consent_url = env.oauth("skyline", "consent")
    assertion = mint_login_assertion(
        key=brand_key,
        brand_issuer=BRAND_ISSUER,
        consent_url=consent_url,
        account="sky-1",
        user_code=started.json()["user_code"],
    )

    def post(_: int) -> httpx.Response:
        with loopback_client(timeout=30) as client:
            return client.post(consent_url, data={"assertion": assertion})

    return _race(8, post)
