"""The agent's (or the Brand login's) JWKS server misbehaves: requests fail closed, quickly.

Every failure mode of `tests.support.jwks_server.JwksServer` (500, slow, dripping body or headers,
garbage, oversized with and without Content-Length, redirect, nothing listening):

* through a real `pactmw serve` (jwks_timeout = 2 s): an agent whose keys were never fetched
  gets a 401 with the PACT challenge within the fetch timeout (+3 s), never a 5xx, and its
  concurrent requests share one fetch; an agent whose keys were fetched before keeps working
  with its known key while an unknown kid is refused;
* through an in-process Provider whose key cache expires after 0.5 s (ASGI on uvicorn and
  WSGI on Werkzeug): the expired keys are served stale while every refetch fails, refused once
  they are older than `stale_if_error`, and rotated keys are picked up once the JWKS is back;
* for a Brand in brand-login mode (PACT §5.3): the consent page refuses assertions with a 401
  page while the Brand's JWKS is unusable, and keeps accepting those signed with a known key.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import httpx
import pytest

from pactmw.adapters.asgi import A2AProviderApp as AsgiProviderApp
from pactmw.adapters.wsgi import A2AProviderApp as WsgiProviderApp
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.core.keys import CachePolicy, JwksCache
from pactmw.protocols.delegation import SigningKeys, mint_login_assertion
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.ratelimit import RateLimit
from pactmw.store import open_store
from tests.reliability.support import (
    AUDIENCE,
    bearer,
    bot_env,
    inline_agent,
    write_config,
)
from tests.support.jwks_server import JwksServer, Mode
from tests.support.net import free_port, loopback_client
from tests.support.servers import process_server, serve_argv, uvicorn_server, werkzeug_server

SERVE_TIMEOUT = 2.0  # jwks_timeout of the `pactmw serve` config
LOCAL_TIMEOUT = 1.0  # fetch timeout of the in-process Providers
SLACK = 3.0  # on top of the fetch timeout: what "within the timeout" allows


@attrs.frozen
class Fault:
    name: str
    mode: Mode
    delay: float = 1.0
    send_content_length: bool = True

    def apply(self, server: JwksServer) -> None:
        server.delay = self.delay
        server.send_content_length = self.send_content_length
        server.mode = self.mode


FAULTS = [
    Fault("fail", Mode.FAIL),
    Fault("slow", Mode.SLOW, delay=30.0),
    Fault("drip", Mode.DRIP, delay=0.3),
    Fault("drip-headers", Mode.DRIP_HEADERS, delay=0.3),
    Fault("garbage", Mode.GARBAGE),
    Fault("oversized", Mode.OVERSIZED),
    Fault("oversized-no-length", Mode.OVERSIZED, send_content_length=False),
    Fault("redirect", Mode.REDIRECT),
    Fault("down", Mode.DOWN),
]
IDS = [fault.name for fault in FAULTS]


def restore(server: JwksServer) -> None:
    server.mode = Mode.OK
    server.delay = 1.0
    server.send_content_length = True


def timed(call: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def assert_challenge(response: httpx.Response) -> None:
    assert response.status_code == 401, (response.status_code, response.text)
    assert response.headers["www-authenticate"].startswith("Bearer "), response.headers
    assert response.content == b""


def assert_no_redirect_followed(server: JwksServer) -> None:
    assert server.hits["/moved/jwks.json"] == 0, server.hits


# -- through `pactmw serve` -------------------------------------------------------------------


@attrs.define
class Served:
    base: str
    key: PrivateJWK
    rotated: PrivateJWK  # signs with a kid no JWKS publishes
    fresh: dict[str, JwksServer]  # agents whose keys were never fetched
    cached: dict[str, JwksServer]  # agents whose keys are fetched before the fault


def _issuer(kind: str, name: str) -> str:
    return f"https://{kind}-{name}.pa.example"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("key_faults")
    key = generate_private_jwk("ES256", kid="k1")
    rotated = generate_private_jwk("ES256", kid="k2")
    fresh = {f.name: JwksServer(keys=public_key_set([key])) for f in FAULTS}
    cached = {f.name: JwksServer(keys=public_key_set([key])) for f in FAULTS}
    try:
        for fault in FAULTS:
            fault.apply(fresh[fault.name])
        agents: list[dict[str, Any]] = [
            {"issuer": _issuer(kind, name), "jwks_uri": server.url}
            for kind, servers in (("fresh", fresh), ("cached", cached))
            for name, server in servers.items()
        ]
        port = free_port()
        config = write_config(
            tmp / "pactmw.toml",
            port=port,
            store=f"sqlite:///{tmp}/pactmw.db",
            agents=[*agents, inline_agent(key)],
            jwks_timeout=SERVE_TIMEOUT,
            allow_http_jwks_on_loopback=True,
        )
        env = bot_env(tmp / "runs.txt")
        with process_server(serve_argv(config, port), port, env=env, log=tmp / "serve.log"):
            yield Served(f"http://127.0.0.1:{port}", key, rotated, fresh, cached)
    finally:
        for server in (*fresh.values(), *cached.values()):
            server.close()


def _list_tasks(client: httpx.Client, base: str, authorization: str) -> httpx.Response:
    """An authenticated route that needs neither the bot nor a store write."""
    return client.get(f"{base}/a2a/acme/tasks", headers={"Authorization": authorization})


@pytest.mark.parametrize("fault", FAULTS, ids=IDS)
def test_serve_refuses_agents_whose_keys_cannot_be_fetched(served: Served, fault: Fault) -> None:
    issuer = _issuer("fresh", fault.name)
    server = served.fresh[fault.name]

    def one(_: int) -> tuple[httpx.Response, float]:
        with loopback_client(timeout=30) as client:
            return timed(
                lambda: _list_tasks(client, served.base, bearer(served.key, issuer=issuer))
            )

    # Concurrent first requests: all refused in time, and they share one fetch.
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(one, range(4)))
    for response, took in answers:
        assert_challenge(response)
        assert took < SERVE_TIMEOUT + SLACK, took
    assert server.total_hits <= 1, server.hits
    assert_no_redirect_followed(server)
    # The failure is remembered: the next request is refused at once, without a fetch.
    response, took = one(0)
    assert_challenge(response)
    assert took < SLACK, took
    assert server.total_hits <= 1, server.hits


@pytest.mark.parametrize("fault", FAULTS, ids=IDS)
def test_serve_keeps_serving_known_keys_when_the_jwks_fails(served: Served, fault: Fault) -> None:
    issuer = _issuer("cached", fault.name)
    server = served.cached[fault.name]
    with loopback_client(timeout=30) as client:
        first = _list_tasks(client, served.base, bearer(served.key, issuer=issuer))
        assert first.status_code == 200, first.text
        fault.apply(server)
        try:
            for _ in range(3):  # fresh tokens each time: no verified-token cache hit
                known, took = timed(
                    lambda: _list_tasks(client, served.base, bearer(served.key, issuer=issuer))
                )
                assert known.status_code == 200, known.text
                assert took < SERVE_TIMEOUT + SLACK, took
            unknown, took = timed(
                lambda: _list_tasks(client, served.base, bearer(served.rotated, issuer=issuer))
            )
            assert_challenge(unknown)
            assert took < SERVE_TIMEOUT + SLACK, took
        finally:
            restore(server)
    assert_no_redirect_followed(server)


# -- in-process Providers with a short key cache ---------------------------------------------

SHORT_CACHE = CachePolicy(default_ttl=0.5, min_ttl=0.0, refetch_cooldown=0.0, stale_if_error=3.0)
BRAND_SCOPES = {"orders:read": "See your orders"}


def _hello(turn: Any) -> str:
    return "hello"


@attrs.define
class Local:
    base: str
    key: PrivateJWK
    rotated: PrivateJWK
    brand_key: PrivateJWK
    agents: dict[str, JwksServer]
    brand_fresh: dict[str, JwksServer]
    brand_cached: dict[str, JwksServer]


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def local(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Local]:
    key = generate_private_jwk("ES256", kid="k1")
    rotated = generate_private_jwk("ES256", kid="k2")
    brand_key = generate_private_jwk("ES256", kid="brand-1")
    agents = {f.name: JwksServer(keys=public_key_set([key])) for f in FAULTS}
    brand_fresh = {f.name: JwksServer(keys=public_key_set([brand_key])) for f in FAULTS}
    brand_cached = {f.name: JwksServer(keys=public_key_set([brand_key])) for f in FAULTS}
    servers = (*agents.values(), *brand_fresh.values(), *brand_cached.values())
    policy = FetchPolicy(timeout=LOCAL_TIMEOUT, allow_http_on_loopback=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    try:
        for fault in FAULTS:
            fault.apply(brand_fresh[fault.name])
        registry = AgentRegistry(
            [
                RegisteredAgent(issuer=_issuer("local", name), jwks_uri=server.url)
                for name, server in agents.items()
            ]
            + [RegisteredAgent(issuer=_issuer("inline", "pa"), jwks=public_key_set([key]))]
        )
        verifier = IdentityVerifier(
            audience=AUDIENCE, registry=registry, keys=JwksCache(policy, SHORT_CACHE)
        )
        brands = [Brand(id="acme", name="Acme", handler=_hello)]
        for kind, group in (("fresh", brand_fresh), ("cached", brand_cached)):
            for name, server in group.items():
                brands.append(
                    Brand(
                        id=f"{kind}-{name}",
                        name=f"Brand {kind} {name}",
                        handler=_hello,
                        delegation=DelegationConfig(
                            scopes=BRAND_SCOPES,
                            login_url="https://brand.example/login",
                            mode="brand",
                            brand_issuer="https://brand.example",
                            brand_jwks_uri=server.url,
                            interval=1,
                        ),
                    )
                )
        tmp = tmp_path_factory.mktemp(f"local_{request.param}")
        provider = Provider(
            base_url=base,
            verifier=verifier,
            store=open_store(f"sqlite:///{tmp}/pactmw.db"),
            brands=brands,
            signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
            # Every consent post here comes from 127.0.0.1: lift the per-address limit.
            consent_rate_limit=RateLimit(per_agent=100_000),
        )
        assert provider.oauth is not None
        provider.oauth.brand_keys = JwksCache(policy, SHORT_CACHE)
        if request.param == "asgi":
            running = uvicorn_server(AsgiProviderApp(provider), port=port)
        else:
            running = werkzeug_server(WsgiProviderApp(provider), port=port)
        with running:
            yield Local(base, key, rotated, brand_key, agents, brand_fresh, brand_cached)
        provider.close()
    finally:
        for server in servers:
            server.close()


def _agent_case(local: Local, fault: Fault) -> None:
    """Known keys served stale while refetches fail; refused once too old; recovery."""
    issuer = _issuer("local", fault.name)
    server = local.agents[fault.name]
    bound = LOCAL_TIMEOUT + SLACK
    with loopback_client(timeout=30) as client:

        def call(key: PrivateJWK) -> tuple[httpx.Response, float]:
            return timed(lambda: _list_tasks(client, local.base, bearer(key, issuer=issuer)))

        first, _ = call(local.key)
        assert first.status_code == 200, first.text
        fetched_at = time.monotonic()
        fault.apply(server)
        try:
            time.sleep(SHORT_CACHE.default_ttl + 0.1)  # the keys are expired now
            hits = server.total_hits
            stale, took = call(local.key)
            assert stale.status_code == 200, (stale.status_code, stale.text)
            assert took < bound, took
            if fault.mode is not Mode.DOWN:
                assert server.total_hits > hits, "no refetch was attempted"
            unknown, took = call(local.rotated)
            assert_challenge(unknown)
            assert took < bound, took
            # Past stale_if_error the old keys are refused too: fail closed, not open forever.
            time.sleep(max(0.0, fetched_at + SHORT_CACHE.stale_if_error + 0.2 - time.monotonic()))
            too_old, took = call(local.key)
            assert_challenge(too_old)
            assert took < bound, took
        finally:
            server.set_keys(public_key_set([local.key, local.rotated]))
            restore(server)
        # The JWKS is back, with a rotated key: both keys work again.
        for key in (local.key, local.rotated):
            back, _ = call(key)
            assert back.status_code == 200, back.text
    assert_no_redirect_followed(server)


def _device_code(client: httpx.Client, local: Local, brand: str) -> str:
    issuer = _issuer("inline", "pa")
    answer = client.post(
        f"{local.base}/a2a/{brand}/oauth/device_authorization",
        data={"client_id": issuer, "scope": "orders:read"},
        headers={"Authorization": bearer(local.key, sub="brand-user", issuer=issuer)},
    )
    assert answer.status_code == 200, answer.text
    user_code: str = answer.json()["user_code"]
    return user_code


def _post_assertion(
    client: httpx.Client, local: Local, brand: str, user_code: str, key: PrivateJWK
) -> tuple[httpx.Response, float]:
    consent_url = f"{local.base}/a2a/{brand}/oauth/consent"
    assertion = mint_login_assertion(
        key=key,
        brand_issuer="https://brand.example",
        consent_url=consent_url,
        account="acct-1",
        user_code=user_code,
    )
    return timed(lambda: client.post(consent_url, data={"assertion": assertion}))


def _brand_case(local: Local, fault: Fault) -> None:
    bound = LOCAL_TIMEOUT + SLACK
    unknown_key = generate_private_jwk("ES256", kid="brand-unknown")
    with loopback_client(timeout=30) as client:
        # Keys never fetched: the consent page refuses, as an HTML page, in time.
        brand = f"fresh-{fault.name}"
        code = _device_code(client, local, brand)
        page, took = _post_assertion(client, local, brand, code, local.brand_key)
        assert page.status_code == 401, (page.status_code, page.text)
        assert page.headers["content-type"].startswith("text/html")
        assert took < bound, took
        assert_no_redirect_followed(local.brand_fresh[fault.name])

        # Keys fetched before the fault: known key still accepted, unknown kid refused.
        brand = f"cached-{fault.name}"
        server = local.brand_cached[fault.name]
        code = _device_code(client, local, brand)
        page, _ = _post_assertion(client, local, brand, code, local.brand_key)
        assert page.status_code == 200, page.text
        fault.apply(server)
        try:
            time.sleep(SHORT_CACHE.default_ttl + 0.1)
            page, took = _post_assertion(client, local, brand, code, local.brand_key)
            assert page.status_code == 200, (page.status_code, page.text)
            assert took < bound, took
            page, took = _post_assertion(client, local, brand, code, unknown_key)
            assert page.status_code == 401, (page.status_code, page.text)
            assert took < bound, took
        finally:
            restore(server)
        assert_no_redirect_followed(server)


def _run_all(case: Callable[[Local, Fault], None], local: Local) -> None:
    """Run `case` for every fault at once (each has its own servers); report every failure."""
    with concurrent.futures.ThreadPoolExecutor(len(FAULTS)) as pool:
        futures = {fault.name: pool.submit(case, local, fault) for fault in FAULTS}
    problems = {}
    for name, future in futures.items():
        error = future.exception()
        if error is not None:
            problems[name] = f"{type(error).__name__}: {error}"
    assert not problems, problems


def test_stale_keys_are_served_while_refetches_fail(local: Local) -> None:
    _run_all(_agent_case, local)


def test_brand_login_jwks_faults_fail_closed(local: Local) -> None:
    _run_all(_brand_case, local)


def test_fault_list_covers_every_failure_mode() -> None:
    assert {f.mode for f in FAULTS} == set(Mode) - {Mode.OK}
