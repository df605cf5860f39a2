"""A Poppy test world over real TLS on 127.0.0.1: pactmw's Provider as the company
`shop.example`, and two personal agents made with the SDK's own `AgentIdentity` (`atlas`,
which lists Operations v1, and `plain`, which lists no extension), all behind one uvicorn
server with a throwaway-CA leaf for every name, routed by `Host`. The shop's own site
serves its API (`/api/orders`) and a login page, so a person can approve a Device Sign-In on
the consent pages in headless Chromium (`BrowserDriver`).

Both sides keep full verification: pactmw fetches agents' metadata and keys trusting the CA
and dialing 127.0.0.1 for their names (`FetchPolicy.connect_to`); the SDK's client (its
conformance runner) trusts the CA and dials 127.0.0.1 through an httpcore network backend,
with SNI and certificate checks for the real names, and an address resolver answering a
public address so its own SSRF guard passes (docs/design/poppy.md §4.1).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import hashlib
import hmac
import ipaddress
import json
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

import attrs
import httpcore
import httpx
import pytest
from personal_agent_protocol.conformance import (
    ConformanceContext,
    Scenario,
    SkipCase,
    run_conformance,
    select_cases,
)
from personal_agent_protocol.conformance import Proposal as ScenarioProposal

# PUBLIC_ADDRESS: what the SDK's resolver is told each test name resolves to, so its SSRF
# guard admits them (the connection itself goes to 127.0.0.1).
from personal_agent_protocol.demo.kit import PUBLIC_ADDRESS, AgentIdentity
from personal_agent_protocol.models import Message
from personal_agent_protocol.operations import TermLimit
from personal_agent_protocol.sessions import SessionToken, Who
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from pactmw.adapters.asgi import A2AProviderApp, current_poppy_caller, poppy_session_required
from pactmw.core.jwk import generate_private_jwk
from pactmw.core.keys import JwksCache
from pactmw.protocols.delegation import SigningKeys
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import AuditEvent, Brand, Provider, Reply, SignedInUser, Turn
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.poppy import (
    OperationFailed,
    OperationRun,
    OperationsConfig,
    OutcomeUnknown,
    Performed,
    PoppyConfig,
    Proposal,
)
from pactmw.provider.ratelimit import RateLimit
from pactmw.provider.tools import ToolRegistry
from pactmw.store.base import Store
from tests.support.chromium import WAIT, headless_chromium, spki_pin
from tests.support.net import free_port, loopback_async_client
from tests.support.servers import uvicorn_server
from tests.support.tls import LOOPBACK_NETWORK, TestCA

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = [
    "ACCOUNTS",
    "ATLAS",
    "BASE_URL",
    "CANCEL_PROMPT",
    "CONSENT_URL",
    "OPERATIONS_SCENARIO",
    "OPERATION_PROMPT",
    "OUTLET",
    "PLAIN",
    "SCENARIO",
    "SCOPES",
    "SHOP",
    "SHOP_PROPOSALS",
    "BrowserDriver",
    "Conversing",
    "OperationsDriver",
    "PoppyWorld",
    "RunCounter",
    "ShopExecutors",
    "ShopSite",
    "bot",
    "case_param",
    "dpop_call",
    "dpop_headers",
    "operations_bot",
    "poppy_brand",
    "serve_world",
    "signed_in_brand",
    "verifier_for",
    "world_fixture",
    "world_on",
]

SHOP = "shop.example"
ATLAS = "atlas.example"
PLAIN = "plain.example"
#: A second Company the world's Provider serves (a test's own Brand on it, e.g. `outlet`):
#: its `poppy.json` is served here, its endpoints on `shop.example` as every Brand's.
OUTLET = "outlet.example"
BASE_URL = f"https://{SHOP}"

#: The shop's scopes: a person approves some or all of them on the consent page.
SCOPES = {"orders:read": "Read your orders", "orders:write": "Change your orders"}
#: The shop's accounts a person may sign in as (the runner's two accounts).
ACCOUNTS = ("alice", "bob", "carol")  # carol: the connected agents page test
CONSENT_URL = f"{BASE_URL}/a2a/shop/oauth/consent"

SCENARIO = Scenario(
    read_path="/api/orders",
    read_scope="orders:read",
    scopes=tuple(SCOPES),
)


#: The shop's proposals (Operations v1), by the API path that proposes each: a refund the
#: person approves (it succeeds), a split that fails partway, and a resend whose outcome the
#: shop cannot tell (it stays in progress).
SHOP_PROPOSALS = {
    "/api/orders/ord_7/refund": Proposal(
        action="refund",
        summary="Refund order ord_7: USD 20.00 back to the card ending 4242.",
        terms={"order_id": "ord_7", "amount": {"amount": "20.00", "currency": "USD"}},
        scopes=("orders:write",),
        url=f"{BASE_URL}/orders/ord_7",
    ),
    "/api/orders/ord_7/split": Proposal(
        action="split",
        summary="Split order ord_7 into two shipments, each with its own tracking number.",
        terms={"order_id": "ord_7", "shipments": 2},
        scopes=("orders:write",),
    ),
    # Needs no user approval: a standing permission may confirm it.
    "/api/orders/ord_7/gift-wrap": Proposal(
        action="gift_wrap",
        summary="Gift-wrap order ord_7 for free.",
        terms={"order_id": "ord_7"},
        scopes=("orders:write",),
        user_approval_required=False,
    ),
    "/api/orders/ord_7/resend": Proposal(
        action="resend",
        summary="Send order ord_7 again by express courier, at no charge.",
        terms={"order_id": "ord_7", "carrier": "express"},
        scopes=("orders:write",),
    ),
}
#: What the conversation bot proposes when asked (the refund, as the API proposes it).
OPERATION_PROMPT = "Please refund order ord_7."
#: What makes the conversation bot call its write tool.
CANCEL_PROMPT = "Please cancel order ord_9."

OPERATIONS_SCENARIO = dataclasses.replace(
    SCENARIO,
    proposals={
        "user": ScenarioProposal("POST", "/api/orders/ord_7/refund"),
        "fails": ScenarioProposal("POST", "/api/orders/ord_7/split"),
        "unknown": ScenarioProposal("POST", "/api/orders/ord_7/resend"),
        "standing": ScenarioProposal("POST", "/api/orders/ord_7/gift-wrap"),
    },
    operation_prompt=OPERATION_PROMPT,
    # The agent's own standing permission for gift wrap (Ops §5: the agent keeps them).
    standing_action="gift_wrap",
    standing_limits=(TermLimit("order_id", allowed=frozenset({"ord_7"})),),
    standing_too_low=(TermLimit("order_id", allowed=frozenset({"ord_8"})),),
)


class ShopExecutors:
    """The shop's executors, counting every run by operation id (`performed`)."""

    def __init__(self) -> None:
        self.performed: collections.Counter[str] = collections.Counter()
        #: Orders the `cancel_order` write tool cancelled, in order.
        self.cancelled: list[tuple[str, str]] = []

    def tools(self) -> ToolRegistry:
        """The shop's tools: `cancel_order`, an account write tool (`orders:write`)."""
        registry = ToolRegistry()
        registry.add("cancel_order", self.cancel_order, scope="orders:write", write=True)
        return registry

    def cancel_order(self, account: str, order: str) -> str:
        """Cancel one of the account's orders."""
        self.cancelled.append((account, order))
        return f"order {order} cancelled"

    def config(self, **options: Any) -> OperationsConfig:
        return OperationsConfig(
            executors={
                "refund": self.refund,
                "split": self.split,
                "resend": self.resend,
                "gift_wrap": self.gift_wrap,
                "exchange": self.gift_wrap,
            },
            **options,
        )

    def refund(self, run: OperationRun) -> Performed:
        self.performed[run.operation_id] += 1
        assert run.terms is not None
        return Performed(
            summary=f"Refunded USD {run.terms['amount']['amount']} to the card ending 4242.",
            data={"refund_id": "rf_" + run.operation_id},
        )

    def split(self, run: OperationRun) -> Performed:
        self.performed[run.operation_id] += 1
        raise OperationFailed(
            "Created the first shipment; the second could not be booked. Order ord_7 now has "
            "one shipment with tracking number TRK1.",
            data={"shipments": ["TRK1"]},
        )

    async def gift_wrap(self, run: OperationRun) -> Performed:
        # Async on purpose: an async executor runs like a sync one.
        self.performed[run.operation_id] += 1
        return Performed(summary="Order ord_7 will be gift-wrapped.")

    def resend(self, run: OperationRun) -> Performed:
        self.performed[run.operation_id] += 1
        raise OutcomeUnknown("the courier did not answer")


class RunCounter:
    """A bot's runs per message id, so a test can tell a retry never ran the bot again; the
    server runs bots on several threads, hence the lock."""

    def __init__(self) -> None:
        self.runs: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def count(self, turn: Turn) -> int:
        """Count this run of `turn`'s message: how many it has had, this one included."""
        with self._lock:
            self.runs[turn.message_id] += 1
            return self.runs[turn.message_id]


def bot(turn: Turn) -> Reply:
    return Reply(text=f"You said: {turn.text}")


def operations_bot(turn: Turn) -> Reply:
    """`bot`, but asked for a refund it proposes the one the API proposes (Operations v1),
    and asked to cancel an order it calls the `cancel_order` write tool."""
    if turn.text == CANCEL_PROMPT:
        result = turn.tools.cancel_order(order="ord_9")
        return Reply(text=f"Cancelling order ord_9: {result}")
    if turn.text == OPERATION_PROMPT:
        refund = SHOP_PROPOSALS["/api/orders/ord_7/refund"]
        return Reply(text=f"I can do this once you confirm: {refund.summary}", operation=refund)
    return bot(turn)


def poppy_brand(**poppy: Any) -> Brand:
    """The Brand `shop`, a Poppy Company on `shop.example` (options override its settings)."""
    settings: dict[str, Any] = {
        "domain": SHOP,
        "agents": "any",
        "custom_scopes": {"orders:read": "Read your orders"},
    }
    settings.update(poppy)
    from pactmw.protocols.poppy import ApiDescriptor

    settings.setdefault("apis", (ApiDescriptor("openapi", f"{BASE_URL}/openapi.json", "Orders"),))
    return Brand(id="shop", name="Shop", handler=bot, poppy=PoppyConfig(**settings))


class _DialLocal(httpcore.AsyncNetworkBackend):
    """Connect the world's names to the local server; TLS still names the real host."""

    def __init__(self, names: Iterable[str], port: int) -> None:
        self.names = frozenset(names)
        self.port = port
        self.backend = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # The SDK pins a vetted connection to the address its resolver approved (the public
        # one it was told), never the name again: both lead to the local server here.
        if host not in self.names and host != PUBLIC_ADDRESS:
            raise httpcore.ConnectError(f"{host} is not in the test world")
        return await self.backend.connect_tcp(
            "127.0.0.1", self.port, timeout=timeout, socket_options=socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("no unix sockets in the test world")

    async def sleep(self, seconds: float) -> None:
        await self.backend.sleep(seconds)


def signed_in_brand(**poppy: Any) -> Brand:
    """`shop` offering Device Sign-In: its PACT delegation's consent pages (same-app: the
    shop's own `/login`), polled every second so the tests wait little."""
    return attrs.evolve(
        poppy_brand(**poppy),
        delegation=DelegationConfig(scopes=SCOPES, login_url=f"{BASE_URL}/login", interval=1),
    )


class _Driver:
    """Nobody plays the user or the operator: every case that needs them is skipped, never
    passed (`BrowserDriver` plays the person approving sign-ins)."""

    capabilities: frozenset[str] = frozenset({"second_identity"})

    def __init__(self, other: AgentIdentity) -> None:
        self.other_identity: AgentIdentity | None = other
        self.accounts = ("alice", "bob")

    async def approve_device(
        self, user_code: str, *, account: str, scopes: Sequence[str] | None = None
    ) -> None:
        raise SkipCase("Device Sign-In is not offered yet")

    async def wait(self, seconds: float) -> None:
        raise SkipCase("no shared clock")

    async def approve_authorization(
        self, authorization_url: str, *, account: str, scopes: Sequence[str] | None = None
    ) -> str:
        raise SkipCase("Direct Sign-In is not offered")

    async def revise(self, operation_id: str) -> None:
        raise SkipCase("no operations yet")

    async def forget_events(self, conversation_id: str) -> None:
        raise SkipCase("no conversations yet")

    async def disconnect(self, client_id: str, account: str) -> None:
        raise SkipCase("no sign-in yet")

    async def performed(self, operation_id: str) -> int:
        raise SkipCase("no operations yet")


class BrowserDriver(_Driver):
    """The person, in headless Chromium: signs in to the shop as the account the runner
    names and approves on the consent page (only `scopes` ticked, when given); the operator's
    "disconnect" in account settings revokes the account's grants of the agent."""

    capabilities: frozenset[str] = frozenset({"second_identity", "disconnect"})

    def __init__(self, other: AgentIdentity, browser: WebDriver, provider: Provider) -> None:
        super().__init__(other)
        self.browser = browser
        self.provider = provider
        #: The HTML of every consent page the person saw, and of the page after each
        #: decision, in order.
        self.consent_pages: list[str] = []
        self.result_pages: list[str] = []

    async def approve_device(
        self, user_code: str, *, account: str, scopes: Sequence[str] | None = None
    ) -> None:
        await asyncio.to_thread(self._decide, user_code, account, scopes, True)

    async def deny_device(self, user_code: str, *, account: str) -> None:
        """The person signs in and clicks Deny."""
        await asyncio.to_thread(self._decide, user_code, account, None, False)

    def _decide(
        self, user_code: str, account: str, scopes: Sequence[str] | None, allow: bool
    ) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        browser, wait = self.browser, WebDriverWait(self.browser, WAIT)
        browser.get(f"{BASE_URL}/logout")
        # The link the agent shows (`verification_uri_complete`); signed out, the site's
        # login comes first and returns the person to it.
        browser.get(f"{CONSENT_URL}?{urlencode({'user_code': user_code})}")
        wait.until(ec.presence_of_element_located((By.ID, "login-form")))
        browser.find_element(By.NAME, "account").send_keys(account)
        browser.find_element(By.ID, "sign-in").click()
        decision = "allow" if allow else "deny"
        button = (By.CSS_SELECTOR, f"button[name=decision][value={decision}]")
        wait.until(ec.presence_of_element_located(button))
        self.consent_pages.append(browser.page_source)
        for box in browser.find_elements(By.CSS_SELECTOR, "input[name=scope]"):
            wanted = scopes is None or box.get_attribute("value") in scopes
            if allow and box.is_selected() != wanted:
                box.click()
        browser.find_element(*button).click()
        status = "approved" if allow else "denied"
        wait.until(lambda b: f"status={status}" in b.current_url)
        self.result_pages.append(browser.find_element(By.TAG_NAME, "body").text)

    async def wait(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def disconnect(self, client_id: str, account: str) -> None:
        store = self.provider.store
        for grant in store.list_grants(brand_id="shop", account=account, now=time.time()):
            if grant.client_id == client_id:
                self.provider.revoke_grant(grant.grant_id)


class OperationsDriver(BrowserDriver):
    """The person of `BrowserDriver`, and the shop's operator: revises a proposal (new
    terms: `terms_changed`) and tells how often an operation was performed."""

    capabilities: frozenset[str] = frozenset(
        {"second_identity", "disconnect", "revise", "performed"}
    )

    def __init__(
        self,
        other: AgentIdentity,
        browser: WebDriver,
        provider: Provider,
        executors: ShopExecutors,
    ) -> None:
        super().__init__(other, browser, provider)
        self.executors = executors

    async def revise(self, operation_id: str) -> None:
        now = time.time()
        revised = self.provider.store.revise_operation(
            operation_id=operation_id,
            summary="Refund order ord_7: USD 25.00 back to the card ending 4242.",
            terms='{"amount":{"amount":"25.00","currency":"USD"},"order_id":"ord_7"}',
            expires_at=now + 900,
            now=now,
        )
        assert revised is not None

    async def performed(self, operation_id: str) -> int:
        return self.executors.performed[operation_id]


class PoppyWorld:
    """The running world: the Provider, the agents, and what a test needs to talk to them."""

    def __init__(
        self,
        provider: Provider,
        port: int,
        ca: TestCA,
        reopen: Callable[[], Store],
        certificate_pem: bytes = b"",
        audit_events: list[AuditEvent] | None = None,
    ) -> None:
        self.provider = provider
        #: What the Provider's audit hook received, in order.
        self.audit_events = audit_events if audit_events is not None else []
        #: The server's leaf certificate, for a browser to trust exactly it.
        self.certificate_pem = certificate_pem
        #: A new handle on the same data (another process's view of the store).
        self.reopen = reopen
        #: The store's URL, for a Provider built from settings (Flask, Django) on the data.
        self.store_url = ""
        self.port = port
        self.ca = ca
        self.atlas = ATLAS_IDENTITY
        self.plain = PLAIN_IDENTITY

    def http(self) -> httpx.AsyncClient:
        """An SDK-side client: trusts the CA, dials 127.0.0.1 for every world name."""
        client = loopback_async_client(verify=self.ca.client_context(), timeout=10.0)
        pool = client._transport._pool  # type: ignore[attr-defined]
        pool._network_backend = _DialLocal((SHOP, OUTLET, ATLAS, PLAIN), self.port)
        return client

    @staticmethod
    async def resolve(host: str) -> list[str]:
        return [PUBLIC_ADDRESS]

    def other_provider(self, *brands: Brand, **options: Any) -> Provider:
        """A second Provider (as another worker process would run) on a new handle of the
        same store, fetching agents' metadata over the same TLS world; `options` go to
        `Provider`."""
        return Provider(
            base_url=BASE_URL,
            verifier=verifier_for(self.ca, self.port),
            store=self.reopen(),
            brands=brands or (poppy_brand(),),
            signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
            **options,
        )

    def chromium_arguments(self) -> tuple[str, ...]:
        """What a browser needs to reach `shop.example` here over TLS: the name mapped to
        127.0.0.1 and this port, and trust in the server's one certificate key."""
        return (
            f"--host-resolver-rules=MAP {SHOP} 127.0.0.1:{self.port}",
            f"--ignore-certificate-errors-spki-list={spki_pin(self.certificate_pem)}",
        )

    @contextlib.contextmanager
    def chromium(self, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
        """Headless Chromium, on a fresh profile, that reaches this world's shop."""
        profile: Path = tmp_path_factory.mktemp("chromium") / "profile"
        with headless_chromium(profile, *self.chromium_arguments()) as browser:
            yield browser

    def browser_driver(self, browser: WebDriver) -> BrowserDriver:
        """A driver whose person approves sign-ins in `browser`."""
        return BrowserDriver(self.plain, browser, self.provider)

    def assert_case_passes(
        self, case_id: str, driver: _Driver | None = None, scenario: Scenario = SCENARIO
    ) -> None:
        """Run one SDK conformance case against this world (`driver`, `scenario` as for
        `context`); it must pass, never skip."""

        async def one() -> Any:
            async with self.http() as http:
                context = self.context(http, driver=driver, scenario=scenario)
                report = await run_conformance(context, cases=select_cases(ids=[case_id]))
            return report.results

        (result,) = asyncio.run(one())
        assert (result.id, result.outcome, result.message) == (case_id, "passed", None)

    @contextlib.asynccontextmanager
    async def conversing(self) -> AsyncIterator[Conversing]:
        """A new User's signed-out Session at `shop`'s conversations endpoint, driven by
        the SDK's personal agent for the block (see `Conversing`)."""
        async with self.http() as http:
            yield await Conversing.begin(self.context(http))

    def context(
        self,
        http: httpx.AsyncClient,
        identity: AgentIdentity | None = None,
        driver: _Driver | None = None,
        scenario: Scenario = SCENARIO,
        company: str = SHOP,
    ) -> Any:
        """The SDK's conformance context: the SDK's personal agent against `company` (by
        default `shop.example`; `driver`: who plays the person; by default nobody, so
        sign-in cases skip)."""
        return ConformanceContext(
            f"https://{company}",
            identity=identity or self.atlas,
            http=http,
            driver=driver or _Driver(self.plain),
            scenario=scenario,
            address_resolver=self.resolve,
        )


@attrs.frozen
class Conversing:
    """What a conversation test starts from: a new User (`user`) with a signed-out Poppy
    Session (`session`), the company's conversations endpoint, and the SDK's personal agent
    (`ctx`). The SDK's conversation calls take this User and Session, so a test names only
    what differs: the message, the conversation, a cursor."""

    ctx: ConformanceContext
    user: str
    session: SessionToken
    endpoint: str
    who: Who

    @classmethod
    async def begin(cls, ctx: ConformanceContext, user: str | None = None) -> Conversing:
        """A new User of `ctx` (or `user`: one another agent or Company knows too) and a
        signed-out Session of theirs."""
        user = user if user is not None else ctx.new_user()
        session = await ctx.session(user)
        return cls(ctx, user, session, await ctx.conversations_endpoint(), await ctx.who(user))

    @property
    def token(self) -> str:
        """The Session's access token, for a request the test writes itself."""
        return self.session.access_token.get_secret_value()

    # The SDK answers a receipt or, asked to wait or given a cursor, an event page: `Any`, so
    # a test reads whichever it asked for.
    async def start(
        self, message: Message, *, cursor: str | None = None, wait: int | None = None
    ) -> Any:
        conversations = self.ctx.agent.conversations
        return await conversations.start(
            self.endpoint, message, token=self.session, cursor=cursor, wait=wait, **self.who
        )

    async def send(
        self,
        conversation_id: str,
        message: Message,
        *,
        cursor: str | None = None,
        wait: int | None = None,
    ) -> Any:
        conversations = self.ctx.agent.conversations
        return await conversations.send(
            self.endpoint,
            conversation_id,
            message,
            token=self.session,
            cursor=cursor,
            wait=wait,
            **self.who,
        )

    async def read_events(self, conversation_id: str) -> Any:
        conversations = self.ctx.agent.conversations
        return await conversations.read_events(
            self.endpoint, conversation_id, token=self.session, **self.who
        )

    async def close(self, conversation_id: str) -> Any:
        conversations = self.ctx.agent.conversations
        return await conversations.close(
            self.endpoint, conversation_id, token=self.session, **self.who
        )

    async def dpop(self, method: str, url: str, token: str | None = None) -> dict[str, str]:
        """The `Authorization` and `DPoP` headers of a request of this User: the Session's
        token unless `token` (another Session's, or a signed-in one) is given."""
        chosen = token if token is not None else self.token
        return await dpop_headers(self.ctx, self.user, method, url, chosen)

    async def call(
        self, method: str, url: str, body: Any = None, *, token: str | None = None
    ) -> httpx.Response:
        """A request the test writes itself (`body` sent as JSON), with `dpop`'s headers."""
        chosen = token if token is not None else self.token
        return await dpop_call(self.ctx, self.user, method, url, body, token=chosen)


async def dpop_headers(
    ctx: ConformanceContext, user: str, method: str, url: str, token: str | SessionToken
) -> dict[str, str]:
    """The `Authorization` and `DPoP` headers of `user`'s request with `token` (a Session
    Token, or its access token as a string) and a fresh proof."""
    access = token.access_token if isinstance(token, SessionToken) else SecretStr(token)
    proof = await ctx.proof(user, method, url, token=access)
    return {"Authorization": f"DPoP {access.get_secret_value()}", "DPoP": proof}


async def dpop_call(
    ctx: ConformanceContext,
    user: str,
    method: str,
    url: str,
    body: Any = None,
    *,
    token: str | SessionToken,
) -> httpx.Response:
    """A request of `user`'s the test writes itself (`body` sent as JSON), with
    `dpop_headers`; for a request outside a `Conversing` (a signed-in Session, another
    agent's)."""
    headers = await dpop_headers(ctx, user, method, url, token)
    content = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        content = json.dumps(body).encode()
    return await ctx.send(method, url, headers=headers, content=content)


def case_param(case_id: str) -> Any:
    """An SDK conformance case as a pytest param whose id also names its ledger requirements."""
    (case,) = select_cases(ids=[case_id])
    return pytest.param(case_id, id=f"{case_id}[{'+'.join(case.requirements)}]")


ATLAS_IDENTITY = AgentIdentity(domain=ATLAS, name="Atlas")
PLAIN_IDENTITY = AgentIdentity(domain=PLAIN, name="Plain", extensions=())


class ShopSite:
    """The shop's own site around the Provider: its API (`apis` in poppy.json: `GET
    /api/orders` needs `orders:read`) and a login page whose signed cookie tells the
    consent pages who is signed in (`current_user`)."""

    COOKIE = "shop_session"

    def __init__(self, provider: Provider) -> None:
        self._secret = secrets.token_bytes(32)

        @poppy_session_required(provider, "shop", "orders:read")
        async def orders(request: Request) -> JSONResponse:
            caller = current_poppy_caller(request)
            assert caller is not None
            return JSONResponse({"orders": [], "account": caller.account})

        # Operations v1 (a Brand whose poppy.operations is set): the API proposes, the
        # agent confirms at the operations endpoint, the executor performs.
        @poppy_session_required(provider, "shop")
        async def propose(request: Request) -> Response:
            caller = current_poppy_caller(request)
            proposal = await _proposal_of(request)
            if caller is None or proposal is None:
                return JSONResponse({"error": "not_found"}, status_code=404)
            answer = await provider.apoppy_propose(caller, proposal)
            return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers)

        self.app = Starlette(
            routes=[
                Route("/api/orders", orders),
                Route("/api/orders/{order}/{action}", propose, methods=["POST"]),
                Route("/login", self.login, methods=["GET", "POST"]),
                Route("/logout", self.logout),
            ]
        )

    def _mac(self, account: str) -> str:
        return hmac.new(self._secret, account.encode(), hashlib.sha256).hexdigest()

    def current_user(self, conn: HTTPConnection) -> SignedInUser | None:
        account, _, mac = conn.cookies.get(self.COOKIE, "").rpartition(".")
        if account in ACCOUNTS and hmac.compare_digest(mac, self._mac(account)):
            return SignedInUser(account=account, label=f"{account}@shop.example")
        return None

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            target = request.query_params.get("next", "/")
            return HTMLResponse(
                "<!doctype html><title>Sign in to Shop</title>"
                '<form id="login-form" method="post" action="/login">'
                f'<input type="hidden" name="next" value="{escape(target)}">'
                '<label>Account <input name="account"></label>'
                '<button id="sign-in" type="submit">Sign in</button></form>'
            )
        form = parse_qs((await request.body()).decode())
        account = form.get("account", [""])[0]
        if account not in ACCOUNTS:
            return HTMLResponse("<p>No such account</p>", status_code=401)
        # Only back to the consent pages: the login must not be an open redirect.
        target = form.get("next", ["/"])[0]
        response = RedirectResponse(
            target if target.startswith(CONSENT_URL) else "/", status_code=303
        )
        response.set_cookie(
            self.COOKIE,
            f"{account}.{self._mac(account)}",
            httponly=True,
            secure=True,
            samesite="lax",
        )
        return response

    async def logout(self, request: Request) -> Response:
        response = HTMLResponse("<!doctype html><title>Signed out</title><p>Signed out</p>")
        response.delete_cookie(self.COOKIE)
        return response


async def _proposal_of(request: Request) -> Proposal | None:
    """What the shop's API proposes for a request: an exchange made from the body (the
    `idempotency-api-writes.json` fixture's path), or one of `SHOP_PROPOSALS` for any order."""
    order, action = request.path_params["order"], request.path_params["action"]
    if action == "exchanges":
        size = (await request.json()).get("size")
        if not isinstance(size, str):
            return None
        return Proposal(
            action="exchange",
            summary=f"Exchange the jacket of order {order} for size {size}, at no charge.",
            terms={"order_id": order, "size": size},
            scopes=("orders:write",),
        )
    return SHOP_PROPOSALS.get(f"/api/orders/ord_7/{action}")


def _by_host(apps: dict[str, Any]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        host = dict(scope["headers"]).get(b"host", b"").decode().split(":", 1)[0]
        target = apps.get(host)
        if target is None:
            await send({"type": "http.response.start", "status": 421, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await target(scope, receive, send)

    return app


def verifier_for(
    ca: TestCA, port: int, pact_agents: Sequence[RegisteredAgent] = ()
) -> IdentityVerifier:
    """A PACT verifier whose fetch policy reaches the world's agents; `pact_agents` are the
    PACT personal agents it knows (none by default)."""
    keys = JwksCache(ca.policy(port, ATLAS, PLAIN, timeout=5.0))
    return IdentityVerifier(audience=BASE_URL, registry=AgentRegistry(pact_agents), keys=keys)


@contextlib.contextmanager
def serve_world(
    reopen: Callable[[], Store],
    tmp_path: Path,
    *,
    brands: Sequence[Brand] | None = None,
    pact_agents: Sequence[RegisteredAgent] = (),
    **provider_options: Any,
) -> Iterator[PoppyWorld]:
    """Serve the world on one free port over TLS while the block runs (`provider_options`
    go to its `Provider`: a shorter `claim_lease_seconds`, a test's `clock`)."""
    ca = TestCA()
    cert = ca.ca.issue_cert(SHOP, OUTLET, ATLAS, PLAIN)
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    port = free_port()
    audit_events: list[AuditEvent] = []
    provider = Provider(
        base_url=BASE_URL,
        verifier=verifier_for(ca, port, pact_agents),
        store=reopen(),
        brands=brands or (poppy_brand(),),
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
        # One browser approves dozens of sign-ins a minute here, from one address: far
        # more than the consent pages' per-address default lets a person do.
        consent_rate_limit=RateLimit(per_agent=10_000, window=60.0),
        audit=audit_events.append,
        **provider_options,
    )
    site = ShopSite(provider)
    shop = A2AProviderApp(provider, app=site.app, current_user=site.current_user)
    apps = {
        SHOP: shop,
        OUTLET: shop,  # the Provider answers each host with its own Brand's poppy.json
        ATLAS: ATLAS_IDENTITY.website(),
        PLAIN: PLAIN_IDENTITY.website(),
    }
    assert ipaddress.ip_address("127.0.0.1") in LOOPBACK_NETWORK
    with uvicorn_server(
        _by_host(apps), port=port, ssl_certfile=str(cert_file), ssl_keyfile=str(key_file)
    ):
        try:
            yield PoppyWorld(
                provider, port, ca, reopen, cert.cert_chain_pems[0].bytes(), audit_events
            )
        finally:
            provider.close()


def world_on(
    request: Any,
    tmp_path_factory: Any,
    *,
    brands: Sequence[Brand] | None = None,
    pact_agents: Sequence[RegisteredAgent] = (),
    store_mixin: type | None = None,
    **provider_options: Any,
) -> Iterator[PoppyWorld]:
    """A world on the store `request.param` names (`sqlite` or `postgres`), for a fixture;
    `store_mixin` goes before that store's class in every handle's (a test's faults on the
    real store), and `provider_options` go to its `Provider`."""
    from pactmw.store import PostgresStore, SqliteStore

    tmp_path = tmp_path_factory.mktemp("poppy")
    opened: list[Store] = []
    if request.param == "sqlite":
        path = tmp_path / "pactmw.db"
        store_url = f"sqlite:///{path}"

        def reopen() -> Store:
            opened.append(_with_mixin(SqliteStore, store_mixin)(path))
            return opened[-1]
    else:
        dsn = request.getfixturevalue("postgres_server").create_database()
        store_url = dsn

        def reopen() -> Store:
            opened.append(_with_mixin(PostgresStore, store_mixin)(dsn))
            return opened[-1]

    try:
        with serve_world(
            reopen, tmp_path, brands=brands, pact_agents=pact_agents, **provider_options
        ) as running:
            running.store_url = store_url
            yield running
    finally:
        for store in opened:
            store.close()


def _with_mixin(store_class: type[Any], mixin: type | None) -> type[Any]:
    """`store_class`, or a subclass of it and `mixin` (whose methods come first)."""
    if mixin is None:
        return store_class
    return type(f"{mixin.__name__}{store_class.__name__}", (mixin, store_class), {})


def world_fixture(
    *brands: Brand,
    pact_agents: Sequence[RegisteredAgent] = (),
    stores: Sequence[str] = ("sqlite", "postgres"),
) -> Any:
    """Make a module-scoped pytest fixture: a world serving `brands` (by default
    `poppy_brand()`) and knowing `pact_agents`, once on each of `stores` (by default sqlite
    and PostgreSQL; a test of no store's behaviour may run on sqlite only).

    Assign the result to `world` in a test module; the folder's conftest must offer
    `postgres_server`. Brands are frozen values, so both worlds may serve the same ones.
    """

    @pytest.fixture(scope="module", params=list(stores))
    def _world(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[PoppyWorld]:
        yield from world_on(
            request, tmp_path_factory, brands=brands or None, pact_agents=pact_agents
        )

    return _world
