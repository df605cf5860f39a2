"""Device Sign-In on the consent pages (Poppy §4.6, plan step 5), end to end over real TLS:
the SDK's own personal agent discovers the shop, starts a signed-out Session, asks for a
device code, and a person approves on the shop's consent page in headless Chromium; the
agent's poll signs the same Session in with the approved scopes and an Account Token, and
the Session Token then reads the shop's API behind `poppy_session_required`. Then the SDK's
sign-in conformance cases, each by its id (which names its ledger requirements), on sqlite
and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import attrs
import httpx
import pytest

from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.protocols.poppy import DEVICE_CODE_GRANT
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.poppy import DeviceSignIn, poppy_companies
from tests.poppy.support import SIGN_IN_CASES
from tests.support.poppy_accounts import signed_in
from tests.support.poppy_world import (
    ATLAS,
    BASE_URL,
    CONSENT_URL,
    SHOP,
    BrowserDriver,
    PoppyWorld,
    case_param,
    dpop_call,
    signed_in_brand,
    world_fixture,
)

world = world_fixture(signed_in_brand())


@pytest.fixture(scope="module")
def person(world: PoppyWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserDriver]:
    with world.chromium(tmp_path_factory) as browser:
        yield world.browser_driver(browser)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_pap_4_4_02_device_sign_in_upgrades_the_session_to_the_approved_scopes(
    world: PoppyWorld, person: BrowserDriver
) -> None:
    """PAP-4.4-02, PAP-4.6-01: discover, a signed-out Session refused at the API, the person
    approving one of two scopes in Chromium, the same Session signed in with that scope."""

    async def flow() -> dict[str, Any]:
        async with world.http() as http:
            ctx = world.context(http, driver=person)
            metadata = await ctx.metadata()
            user = ctx.new_user()
            session = await ctx.session(user)
            url = ctx.url("/api/orders")

            async def read(token: Any) -> httpx.Response:
                return await dpop_call(ctx, user, "GET", url, token=token)

            signed_out = await read(session)
            signed = await ctx.sign_in(user, session, granted=("orders:read",), account="alice")
            signed_in = await read(signed.token)
            return {
                "user": user,
                "metadata": metadata,
                "session": session,
                "signed_out": signed_out,
                "signed": signed,
                "signed_in": signed_in,
            }

    result = run(flow())
    user = result["user"]
    metadata = result["metadata"]
    assert metadata.device_authorization_endpoint == f"{BASE_URL}/a2a/shop/poppy/device"
    assert DEVICE_CODE_GRANT in metadata.grant_types_supported
    signed_out = result["signed_out"]
    assert (signed_out.status_code, signed_out.json()["error"]) == (403, "sign_in_required")
    token = result["signed"].token
    assert token.signed_in
    assert token.session_id == result["session"].session_id
    assert token.scopes == ("orders:read",)
    signed_in = result["signed_in"]
    assert signed_in.status_code == 200
    assert signed_in.json() == {"orders": [], "account": "alice"}
    # The person saw which agent asked: its client_name and its client_id's host.
    page = person.consent_pages[-1]
    assert "Atlas" in page
    assert f"https://{ATLAS}" in page
    # Isolated, as every agent name: a client_name cannot reorder the heading around it.
    assert "<h1><bdi>Atlas</bdi> wants to act for you at " in page
    # The page after the decision states what the agent can do: the approved scope only.
    result_page = person.result_pages[-1]
    assert "Read your orders" in result_page
    assert "Change your orders" not in result_page
    assert "Nothing was shared" not in result_page
    # One grant, protocol-neutral: the Poppy agent's client_id and User ID, the account;
    # announced to the audit hook as PACT's approvals are.
    grants = world.provider.store.list_grants(brand_id="shop", account="alice", now=time.time())
    ours = [g for g in grants if g.client_id == world.atlas.client_id and g.pa_sub == user]
    assert len(ours) == 1
    approved = [e for e in world.audit_events if e.grant_id == ours[0].grant_id]
    assert [(e.name, e.account, e.issuer, e.scopes) for e in approved] == [
        ("agent.delegation_approved", "alice", world.atlas.client_id, ("orders:read",))
    ]


def test_pap_4_6_01_the_device_authorization_answer_and_its_link(world: PoppyWorld) -> None:
    """RFC 8628 §3.2 with Poppy's rules: the link is on the issuer's host (PAP-4.6-02) and
    opening it approves nothing (PAP-4.6-01); unknown scopes are `invalid_scope`."""

    async def ask(scope: str) -> httpx.Response:
        async with world.http() as http:
            ctx = world.context(http)
            metadata = await ctx.metadata()
            form = {"scope": scope, **(await ctx.client_form())}
            return await http.post(metadata.device_authorization_endpoint, data=form)

    async def open_link(link: str) -> httpx.Response:
        async with world.http() as http:
            return await http.get(link)

    answer = run(ask("orders:read"))
    assert answer.status_code == 200
    assert answer.headers["cache-control"] == "no-store"
    document = answer.json()
    assert set(document) == {
        "device_code",
        "user_code",
        "verification_uri",
        "verification_uri_complete",
        "expires_in",
        "interval",
    }
    assert document["verification_uri"] == CONSENT_URL
    assert document["verification_uri_complete"].startswith(CONSENT_URL + "?user_code=")
    assert (document["expires_in"], document["interval"]) == (600, 1)
    stored = world.provider.store.device_authorization_by_user_code(document["user_code"])
    assert stored is not None
    assert (stored.pa_sub, stored.status) == (None, "pending")
    # Opening the link, signed out, sends the person to the login and approves nothing.
    opened = run(open_link(document["verification_uri_complete"]))
    assert opened.status_code in (302, 303)
    assert opened.headers["location"].startswith(f"{BASE_URL}/login?next=")
    still = world.provider.store.device_authorization_by_user_code(document["user_code"])
    assert still == stored
    for bad in ("", "orders:delete", "orders:read orders:delete"):
        refused = run(ask(bad))
        assert (refused.status_code, refused.json()["error"]) == (400, "invalid_scope")


def test_rfc_8628_polls_before_and_after_a_denial(world: PoppyWorld, person: BrowserDriver) -> None:
    """The device_code grant's answers: pending until the person decides; another agent's
    poll finds no code (`invalid_grant`), another agent's Session is `invalid_session`, and
    after the person clicks Deny the poll is `access_denied`, audited as a denial."""

    async def flow() -> list[tuple[int, str]]:
        async with world.http() as http:
            ctx = world.context(http, driver=person)
            metadata = await ctx.metadata()
            other = ctx.other_agent()
            user = ctx.new_user()
            session = await ctx.session(user)
            foreign = await ctx.session(user, other)
            asked = await http.post(
                metadata.device_authorization_endpoint,
                data={"scope": "orders:read", **(await ctx.client_form())},
            )
            device = asked.json()

            async def poll(session_id: str, *, as_other: bool = False) -> tuple[int, str]:
                identity = other.identity if as_other else None
                form = {
                    "grant_type": DEVICE_CODE_GRANT,
                    "device_code": device["device_code"],
                    "session_id": session_id,
                    **(await ctx.client_form(identity)),
                }
                proof = await ctx.proof(
                    user, "POST", metadata.token_endpoint, agent=other if as_other else None
                )
                answer = await ctx.token_request(user, form, dpop=proof)
                return answer.status_code, answer.json()["error"]

            answers = [await poll(session.session_id)]
            answers.append(await poll(foreign.session_id, as_other=True))
            answers.append(await poll(foreign.session_id))
            # bob has not approved Atlas (alice did, in the first test): "Nothing was shared"
            # is then the truth (see the last test for a denial after an approval).
            await person.deny_device(device["user_code"], account="bob")
            answers.append(await poll(session.session_id))
            return answers

    before = len(world.audit_events)
    assert run(flow()) == [
        (400, "authorization_pending"),
        (400, "invalid_grant"),
        (400, "invalid_session"),
        (400, "access_denied"),
    ]
    denied = [e for e in world.audit_events[before:] if e.issuer == world.atlas.client_id]
    assert [(e.name, e.account) for e in denied] == [("agent.delegation_denied", "bob")]
    assert "Nothing was shared" in person.result_pages[-1]


def test_poppy_json_offers_device_sign_in_with_the_brands_scopes(world: PoppyWorld) -> None:
    async def fetch() -> Any:
        async with world.http() as http:
            return (await http.get(f"{BASE_URL}/.well-known/poppy.json")).json()

    auth = run(fetch())["auth"]
    assert auth["device"] == {"scopes": ["orders:read", "orders:write"]}
    assert "direct" not in auth
    assert "mediated" not in auth


def test_pap_4_6_02_a_login_page_an_agent_would_refuse_is_refused_at_startup() -> None:
    """PAP-4.6-02: agents show a device sign-in link only on the issuer's host or a
    `poppy_domains` domain; a Brand login elsewhere is a startup error naming the setting."""
    delegation = DelegationConfig(
        scopes={"orders:read": "Read your orders"},
        login_url="https://login.elsewhere.example/signin",
        mode="brand",
        brand_issuer="https://login.elsewhere.example",
        brand_jwks=public_key_set([generate_private_jwk("ES256")]),
    )
    brand = signed_in_brand()
    assert brand.poppy is not None
    brands = {"shop": ("Shop", brand.poppy)}
    with pytest.raises(ValueError, match=r"brands\.shop\.delegation\.login_url must be on"):
        poppy_companies(
            BASE_URL,
            brands,
            {"shop": DeviceSignIn(delegation, CONSENT_URL)},
        )
    # On the Brand's own poppy domain (or a subdomain) it is fine.
    fine = attrs.evolve(delegation, login_url=f"https://login.{SHOP}/signin")
    companies = poppy_companies(BASE_URL, brands, {"shop": DeviceSignIn(fine, CONSENT_URL)})
    assert companies["shop"].device_scopes == ("orders:read",)


@pytest.mark.parametrize("case_id", [case_param(case_id) for case_id in SIGN_IN_CASES])
def test_sdk_conformance_case(world: PoppyWorld, person: BrowserDriver, case_id: str) -> None:
    world.assert_case_passes(case_id, driver=person)


def test_a_signed_in_poppy_agent_is_on_the_connected_agents_page_and_revoked_there(
    world: PoppyWorld, person: BrowserDriver
) -> None:
    """Issue 15 point 1 for Poppy: the grant a Device Sign-In wrote is on the person's
    connected agents page (named by the agent's client_name, with its client_id), and
    revoking it there signs the Session out: its next API request is refused."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    def revoke_in_the_browser() -> tuple[str, str]:
        # Carol, still signed in to the shop in her browser, opens her connected agents page.
        browser, wait = person.browser, WebDriverWait(person.browser, 30)
        browser.get(CONSENT_URL.replace("/oauth/consent", "/oauth/agents"))
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "section.agent")))
        (card,) = browser.find_elements(By.CSS_SELECTOR, "section.agent")
        shown = card.text
        card.find_element(By.CSS_SELECTOR, "button").click()
        notice = wait.until(ec.presence_of_element_located((By.ID, "notice")))
        return shown, notice.text

    async def flow() -> tuple[int, str, str, httpx.Response]:
        async with world.http() as http:
            ctx = world.context(http, driver=person)
            user = ctx.new_user()
            session = await ctx.session(user)
            signed = await ctx.sign_in(user, session, granted=("orders:read",), account="carol")
            url = ctx.url("/api/orders")

            async def read() -> httpx.Response:
                return await dpop_call(ctx, user, "GET", url, token=signed.token)

            before = (await read()).status_code
            shown, notice = await asyncio.to_thread(revoke_in_the_browser)
            return before, shown, notice, await read()

    before, shown, notice, after = run(flow())
    assert before == 200
    assert "Atlas" in shown
    assert f"From\nhttps://{ATLAS}\n" in shown  # the agent's origin
    assert "Last used\nNot yet" not in shown  # the Session's API read was recorded
    assert "Read your orders" in shown
    assert "Change your orders" not in shown
    assert notice == "Atlas can no longer act for you."
    assert after.status_code in (401, 403), after.text
    grants = world.provider.store.list_grants(brand_id="shop", account="carol", now=time.time())
    assert [g for g in grants if g.client_id == world.atlas.client_id] == []


def test_a_denied_sign_in_says_an_earlier_approval_still_stands(
    world: PoppyWorld, person: BrowserDriver
) -> None:
    """The person approved this agent before (for another of its users: a sign-in names its
    user only at the poll) and denies a new sign-in: the earlier approval stands, and the
    result page says so, and where to revoke it, instead of "Nothing was shared"."""

    async def flow() -> None:
        async with world.http() as http:
            ctx = world.context(http, driver=person)
            metadata = await ctx.metadata()
            signed_in(world, ctx.new_user(), "carol")  # the earlier approval
            asked = await http.post(
                metadata.device_authorization_endpoint,
                data={"scope": "orders:read", **(await ctx.client_form())},
            )
            await person.deny_device(asked.json()["user_code"], account="carol")

    run(flow())
    page = person.result_pages[-1]
    assert "Nothing was shared" not in page
    assert "cannot act for you" not in page
    assert "Your earlier approval still stands." in page
    assert "can now do this for you at Shop until" in page
    assert "Read your orders" in page
    assert "You can revoke it at any time on your connected agents page." in page
