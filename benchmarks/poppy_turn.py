"""One signed-in Poppy conversation turn: pactmw against the SDK's own company.

Run:  .venv/bin/python benchmarks/poppy_turn.py [--rounds R] [--turns N] [--chunk C]
                                              [--store sqlite|memory] [--json]

Two companies answer the same personal agent with the same bot (it says back what it was
told): `sdk.example` is `personal_agent_protocol.company` (`company_app` over its plugin
platform, memory store, the SDK's defaults), `shop.example` is a pactmw `Provider`
(`A2AProviderApp`, the store given by `--store`, sqlite by default: pactmw's embedded store).
Both are reached the same way: the SDK's own personal-agent client over one in-process
network (`httpx.ASGITransport` per host), so neither pays for sockets the other does not.

Before measuring, the agent discovers each company, starts a Session, signs in with Device
Sign-In (the person's approval is made directly: `CompanyService.approve_device` on the SDK,
the store's `approve_device_authorization` on pactmw, what each consent page calls) and
polls until its Session is signed in. pactmw fetches the agent's client metadata and keys over
real TLS (a throwaway CA, the agent's site on 127.0.0.1): once, then from its cache; the SDK
company fetches them in process.

A turn: a new DPoP proof, `POST {conversations}?wait=0` with the agent's message (a new
conversation each turn, so no contender reads a longer history than the other), and the page of
events holding the company's reply, checked. The contenders run interleaved: R rounds of N
turns each, taken in alternating chunks of C turns (`--chunk`); a round's rate is N divided by
the wall time of its turns (the client's work, the same for both, is inside it). Reported:
each contender's median turns/s over the rounds, and the median of the per-round ratios
pactmw / SDK (above 1: pactmw answers more turns a second). The script always exits 0: it
is a report, not a test.
"""

from __future__ import annotations

import os
import sys

# Run as a file, benchmarks/ is first on sys.path; keep it off (see benchmarks/http_load.py)
# and put the repository root on, for tests.support (the throwaway CA and the agent's site).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
REPO = os.path.dirname(_HERE)
sys.path.insert(0, REPO)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import secrets  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import AsyncIterator, Awaitable, Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from importlib import metadata  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

SDK_DOMAIN = "sdk.example"
SHOP_DOMAIN = "shop.example"
AGENT_DOMAIN = "atlas.example"
TENANT = "bench"
USER_ID = "usr_bench_000000000000"
SCOPES = {"orders:read": "Read your orders", "orders:write": "Change your orders"}
ACCOUNT = "alice"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def answer_text(text: str | None) -> str:
    """The bot both companies run: it says back what it was told."""
    return f"You said: {text}"


class WallClock:
    """Wall time plus an offset `advance` moves: every party shares it, so a Device
    Sign-In poll need not wait its interval for real (the SDK's `MutableClock` shape)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def timestamp(self) -> float:
        return self.now().timestamp()

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


@dataclass
class Contender:
    """One company as the agent sees it once signed in: what a turn needs."""

    name: str
    endpoint: str
    token: Any
    who: dict[str, str]
    conversations: Any
    message_ids: Callable[[], str]
    rates: list[float] = field(default_factory=list)

    async def turn(self, n: int) -> None:
        from personal_agent_protocol import Message

        text = f"Where is order {n}?"
        message = Message(id=self.message_ids(), sender="human", text=text)
        page = await self.conversations.start(
            self.endpoint, message, token=self.token, wait=0, **self.who
        )
        said = [
            event.message.text
            for event in getattr(page, "events", ())
            if event.type == "message" and event.message.role == "company"
        ]
        if answer_text(text) not in said:
            raise RuntimeError(f"{self.name} did not answer the turn: {said!r}")


def _sdk_company(network: Any, clock: WallClock) -> Any:
    """The SDK's company on `sdk.example`: its defaults plus the bot."""
    from personal_agent_protocol.company import (
        COMPANY_AGENTS,
        CompanyConfig,
        Reply,
        build_company,
        company_app,
    )
    from personal_agent_protocol.demo.kit import ClockPlugin
    from reactor import PluginManifest  # type: ignore[import-untyped]

    class EchoAgent:
        async def respond(self, turn: Any) -> list[Any]:
            return [Reply(text=answer_text(turn.text))]

    class BotPlugin:
        def provide_contributions(self, contributions: Any) -> None:
            contributions.contribute(COMPANY_AGENTS, EchoAgent(), contribution_id="echo")

    config = CompanyConfig(
        name="Shop (SDK)",
        domain=SDK_DOMAIN,
        scopes=tuple(SCOPES),
        custom_scopes=SCOPES,
        device_interval=1,
        operations=False,  # the bot proposes none (nor does pactmw have them yet)
    )
    service = build_company(
        config,
        http_client=network.client(),
        address_resolver=network.resolve,
        plugins=[
            (PluginManifest(name="bench-bot", version="1"), BotPlugin()),
            (PluginManifest(name="bench-clock", version="1"), ClockPlugin(clock)),  # type: ignore[arg-type]
        ],
    )
    network.add(SDK_DOMAIN, company_app(service))
    return service


def _pactmw_company(network: Any, clock: WallClock, store: Any, policy: Any) -> Any:
    """pactmw's Provider on `shop.example`: Poppy with Device Sign-In and the bot."""
    from pactmw.adapters.asgi import A2AProviderApp
    from pactmw.core.jwk import generate_private_jwk
    from pactmw.core.keys import JwksCache
    from pactmw.protocols.delegation import SigningKeys
    from pactmw.protocols.identity import AgentRegistry, IdentityVerifier
    from pactmw.protocols.poppy import ApiDescriptor
    from pactmw.provider import Brand, Provider, Reply, Turn
    from pactmw.provider.brand import DelegationConfig
    from pactmw.provider.poppy import PoppyConfig

    base_url = f"https://{SHOP_DOMAIN}"

    def bot(turn: Turn) -> Reply:
        return Reply(text=answer_text(turn.text))

    brand = Brand(
        id="shop",
        name="Shop (pactmw)",
        handler=bot,
        poppy=PoppyConfig(
            domain=SHOP_DOMAIN,
            agents="any",
            custom_scopes=SCOPES,
            apis=(ApiDescriptor("openapi", f"{base_url}/openapi.json", "Orders"),),
        ),
        delegation=DelegationConfig(scopes=SCOPES, login_url=f"{base_url}/login", interval=1),
    )
    provider = Provider(
        base_url=base_url,
        verifier=IdentityVerifier(
            audience=base_url, registry=AgentRegistry(()), keys=JwksCache(policy)
        ),
        store=store,
        brands=(brand,),
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
        poppy_fetch_policy=policy,
        clock=clock.timestamp,
    )
    network.add(SHOP_DOMAIN, A2AProviderApp(provider))
    return provider


async def _sign_in(
    name: str,
    domain: str,
    reactor: Any,
    http: Any,
    identity: Any,
    clock: WallClock,
    approve: Callable[[str], Awaitable[None]],
) -> Contender:
    """Discover `domain`, start a Session and sign it in with Device Sign-In."""
    from personal_agent_protocol import (
        ConversationClient,
        DeviceSignInClient,
        DiscoveryClient,
        DpopHttpClient,
        SessionClient,
        generate_message_id,
    )

    company = await DiscoveryClient(reactor=reactor, http_client=http).discover(domain)
    oauth, agent = company.oauth_metadata, company.document.agent
    if oauth is None or oauth.device_authorization_endpoint is None or agent is None:
        raise RuntimeError(f"{name} offers no Device Sign-In or no company agent")
    session = await SessionClient(reactor=reactor, http_client=http).start(
        client_id=identity.client_id,
        pairwise_user_id=USER_ID,
        issuer=oauth.issuer,
        token_endpoint=oauth.token_endpoint,
        tenant_id=TENANT,
    )
    device = DeviceSignInClient(reactor=reactor, http_client=http)
    started = await device.begin(
        device_authorization_endpoint=oauth.device_authorization_endpoint,
        token_endpoint=oauth.token_endpoint,
        issuer=oauth.issuer,
        client_id=identity.client_id,
        scopes=tuple(SCOPES),
        tenant_id=TENANT,
        pairwise_user_id=USER_ID,
        session_id=session.session_id,
        organization=company.document.organization,
        poppy_domains=oauth.poppy_domains,
    )
    await approve(started.user_code)
    for _ in range(10):
        clock.advance(started.poll_interval)
        polled = await device.poll(started.reference)
        if polled.status == "complete":
            break
    else:
        raise RuntimeError(f"{name}: the Device Sign-In never completed")
    token = polled.token
    if token is None or not token.signed_in:
        raise RuntimeError(f"{name}: the Session is not signed in")
    return Contender(
        name=name,
        endpoint=agent.protocols[0].endpoint,
        token=token,
        who={"tenant_id": TENANT, "pairwise_user_id": USER_ID, "issuer": oauth.issuer},
        conversations=ConversationClient(
            transport=DpopHttpClient(reactor=reactor, http_client=http)
        ),
        message_ids=lambda: generate_message_id(reactor),
    )


@contextlib.asynccontextmanager
async def world(store_kind: str, workdir: Path) -> AsyncIterator[list[Contender]]:
    """Both companies, signed in, as contenders (pactmw first)."""
    from personal_agent_protocol.demo.kit import (
        AgentIdentity,
        InProcessNetwork,
        PersonalAgentHost,
        personal_agent_reactor,
    )
    from tests.support.jwks_server import JwksServer
    from tests.support.tls import TestCA

    from pactmw.store import MemoryStore, SqliteStore

    clock = WallClock()
    identity = AgentIdentity(domain=AGENT_DOMAIN, name="Atlas")
    network = InProcessNetwork()
    network.add(AGENT_DOMAIN, identity.website())
    ca = TestCA()
    store = SqliteStore(workdir / "pactmw.db") if store_kind == "sqlite" else MemoryStore()
    with JwksServer(
        identity.jwks, jwks_path="/jwks.json", server_context=ca.server_context(AGENT_DOMAIN)
    ) as agent_site:
        agent_site.set_json(identity.path, identity.metadata)
        service = _sdk_company(network, clock)
        provider = _pactmw_company(
            network, clock, store, ca.policy(agent_site.port, AGENT_DOMAIN, timeout=5.0)
        )
        http = network.client()
        host = PersonalAgentHost(identity, clock)  # type: ignore[arg-type]
        reactor = personal_agent_reactor(host, network=network, http_client=http)

        async def approve_sdk(user_code: str) -> None:
            await service.approve_device(user_code, account_id=ACCOUNT)

        async def approve_pactmw(user_code: str) -> None:
            now = clock.timestamp()
            approval = await asyncio.to_thread(
                provider.store.approve_device_authorization,
                user_code=user_code,
                brand_id="shop",
                account=ACCOUNT,
                granted_scopes=tuple(SCOPES),
                new_grant_id=f"a2agrant_bench{secrets.token_hex(8)}",
                now=now,
                grant_expires_at=now + 86_400,
            )
            if approval is None:
                raise RuntimeError(f"pactmw did not know the user code {user_code}")

        try:
            contenders = [
                await _sign_in(
                    "pactmw", SHOP_DOMAIN, reactor, http, identity, clock, approve_pactmw
                ),
                await _sign_in("sdk", SDK_DOMAIN, reactor, http, identity, clock, approve_sdk),
            ]
            yield contenders
        finally:
            await http.aclose()
            provider.close()


async def measure(contenders: list[Contender], rounds: int, turns: int, chunk: int) -> None:
    """Interleaved rounds; each appends one rate (turns/s) per contender. Within a round
    the contenders take turns of `chunk` turns each, so a burst of load on the shared
    machine falls on both."""
    count = 0
    for contender in contenders:  # warm-up: caches, first connections, first compile
        await contender.turn(count)
        count += 1
    for round_no in range(rounds):
        order = contenders if round_no % 2 == 0 else contenders[::-1]
        spent = dict.fromkeys((c.name for c in contenders), 0.0)
        done = 0
        while done < turns:
            size = min(chunk, turns - done)
            for contender in order:
                began = time.perf_counter()
                for _ in range(size):
                    await contender.turn(count)
                    count += 1
                spent[contender.name] += time.perf_counter() - began
            done += size
        for contender in contenders:
            contender.rates.append(turns / spent[contender.name])
        _log(
            f"round {round_no + 1}/{rounds}: "
            + ", ".join(f"{c.name} {c.rates[-1]:.0f} turns/s" for c in contenders)
        )


def results(contenders: list[Contender], store_kind: str) -> dict[str, Any]:
    by_name = {c.name: c for c in contenders}
    ours, theirs = by_name["pactmw"], by_name["sdk"]
    ratios = [a / b for a, b in zip(ours.rates, theirs.rates, strict=True)]
    return {
        "store": store_kind,
        "rounds": len(ratios),
        "turns_per_second": {c.name: statistics.median(c.rates) for c in contenders},
        "ratio_pactmw_over_sdk": statistics.median(ratios),
        "ratios": ratios,
        "environment": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "load_average": list(os.getloadavg()),
            "personal-agent-protocol": metadata.version("personal-agent-protocol"),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument(
        "--turns", type=int, default=100, help="turns per contender per round (default 100)"
    )
    parser.add_argument(
        "--chunk", type=int, default=10, help="turns a contender runs before the other (10)"
    )
    parser.add_argument(
        "--store",
        choices=("sqlite", "memory"),
        default="sqlite",
        help="pactmw's store (default sqlite; the SDK's company keeps its memory store)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    args = parser.parse_args(argv)

    async def run() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as workdir:
            async with world(args.store, Path(workdir)) as contenders:
                _log("signed in on both companies; measuring")
                await measure(contenders, args.rounds, args.turns, max(1, args.chunk))
                return results(contenders, args.store)

    found = asyncio.run(run())
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    print(f"One signed-in Poppy turn, {found['rounds']} rounds, pactmw on {found['store']}")
    for name, rate in found["turns_per_second"].items():
        print(f"  {name:8} {rate:8.1f} turns/s (median)")
    print(f"  pactmw / SDK: {found['ratio_pactmw_over_sdk']:.2f}x (median of per-round ratios)")
    print(f"  load average: {' '.join(f'{x:.2f}' for x in found['environment']['load_average'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
