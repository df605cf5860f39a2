"""docs/getting-started/django.md's "Your own API with the person's delegation", as a reader
follows it: the guide's site (its settings, urls and bot) with the section's DRF API and
class-based view, checked by `manage.py check`, served by `runserver`, and called by a
personal agent with the delegation a person allowed on the consent page."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pactmw.client import (
    AgentSigner,
    DeviceCodeClient,
    TokenResponse,
    delegation_scheme,
    fetch_card,
)
from tests.adapters.django_sites import (
    PASSWORD,
    TEST_SETTINGS,
    guide_block,
    new_site,
    runserver,
)
from tests.delegated.support import allow_on_the_consent_page, page_text
from tests.support.net import free_port, loopback_client

pytestmark = pytest.mark.timeout(300)

ISSUER = "https://pa.example"
API = "the end of mysite/settings.py, for the API"
#: Set in the site's environment: its settings drop `delegation_brand`.
WITHOUT_DELEGATION_BRAND = (
    'if os.environ.get("NO_DELEGATION_BRAND"):\n    del PACTMW["delegation_brand"]\n'
)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found, page[:2000]
    return found.group(1)


@dataclass(frozen=True)
class Site:
    root: Path
    env: dict[str, str]
    port: int
    agent: AgentSigner


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The guide's site with the section's API, built once for this module's tests (a fresh
    project, migrated, costs seconds); its settings name `port`, where runserver listens."""
    root = tmp_path_factory.mktemp("drf-guide")
    agent = AgentSigner.generate(issuer=ISSUER)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    registered = f'PACTMW["agents"] = [{{"issuer": {ISSUER!r}, "jwks": {agent.public_jwks()!r}}}]\n'
    settings_tail = (
        guide_block("the end of mysite/settings.py").replace("http://127.0.0.1:8000", base)
        + TEST_SETTINGS
        + guide_block(API)
        + registered
        + WITHOUT_DELEGATION_BRAND
    )
    urls_tail = guide_block("the end of mysite/urls.py") + guide_block(
        "the end of mysite/urls.py, for the API"
    )
    env = new_site(root, settings_tail, urls_tail, {"api.py": guide_block("mysite/api.py")})
    return Site(root, env, port, agent)


def test_the_guides_api_serves_the_delegation_the_person_allowed(site: Site) -> None:
    tmp_path, env, port, agent = site.root, site.env, site.port, site.agent
    base = f"http://127.0.0.1:{port}"

    # What the section says `manage.py check` reports without `delegation_brand`.
    unset = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=tmp_path,
        env={**env, "NO_DELEGATION_BRAND": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = " ".join(unset.stderr.split())
    assert unset.returncode != 0, said
    shown = (
        "pactmw.E005) HasDelegatedScope (required_scopes ['orders:read']) on /api/orders/ "
        "(OrderList) refuses every caller"
    )
    assert shown in said, said
    assert "on /api/history/ (OrderHistory.get) refuses every caller" in said, said
    assert "(TicketViewSet) refuses every caller" in said, said
    assert said.count("pactmw.E005") == 3, said  # the router's two routes: one view

    port, server = runserver(tmp_path, env, "site", port)
    with server, loopback_client(base_url=base, follow_redirects=True, timeout=30) as browser:
        signed = {"Authorization": f"Bearer {agent.sign('user-1', f'{base}/a2a')}"}
        alone = browser.get("/api/orders/", headers=signed)
        assert alone.status_code == 401, alone.text
        assert alone.headers["www-authenticate"] == 'Bearer realm="a2a", error="invalid_token"'
        assert alone.json() == {
            "detail": "This endpoint needs a delegation token (X-A2A-User-Delegation)."
        }

        # The person (the superuser) signs in at the guide's LOGIN_URL and allows.
        card = fetch_card(f"{base}/a2a/shop/.well-known/agent-card.json")
        scheme = delegation_scheme(card)
        assert scheme is not None
        device = DeviceCodeClient(scheme, agent.for_user("user-1", audience=f"{base}/a2a"))
        started = device.start(["orders:read"])
        login = browser.get(started.verification_uri_complete)
        assert login.url.path == "/admin/login/", login.url
        consent = browser.post(
            str(login.url),
            data={"csrfmiddlewaretoken": _csrf(login.text), "username": "ops",
                  "password": PASSWORD, "next": login.url.params["next"]},
        )  # fmt: skip
        assert "signed in to shop as ops" in page_text(consent.text), consent.text
        allow_on_the_consent_page(browser, consent.text, "orders:read", base)
        granted = device.wait_for_token(started, timeout=60)
        assert isinstance(granted, TokenResponse), granted

        delegated = {**signed, "X-A2A-User-Delegation": f"Bearer {granted.access_token}"}
        for path, listed in [("/api/orders/", "orders"), ("/api/tickets/", "tickets")]:
            served = browser.get(path, headers=delegated)
            assert served.status_code == 200, served.text
            assert served.json() == {"account": "1", listed: []}  # the superuser's pk
        history = browser.get("/api/history/", headers=delegated)
        assert history.status_code == 200, history.text
        assert history.json() == {"account": "1"}
        whoami = browser.get("/api/whoami/", headers=signed)
        assert whoami.status_code == 200, whoami.text
        assert whoami.json()["user"].startswith("pa:"), whoami.text


def _manage_test(site: Site, tests: str) -> tuple[int, str]:
    """`manage.py test` of the site with `tests` as mysite/tests.py: (exit code, its stderr,
    where unittest reports)."""
    (site.root / "mysite" / "tests.py").write_text(tests)
    done = subprocess.run(
        [sys.executable, "manage.py", "test", "mysite"],
        cwd=site.root,
        env=site.env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return done.returncode, done.stderr


def test_the_guides_sample_tests_pass_with_manage_py_test(site: Site) -> None:
    """The guide's "Test your views": its sample's TestCase, run by `manage.py test` in the
    guide's site (a test database with pactmw's tables, the grants in each test's
    transaction), passes every one of its tests. That the grants roll back with each test
    is shown too: unittest runs test_the_drf_api_needs_orders_read after
    test_history_serves_the_persons_account, whose `orders:read` would otherwise widen the
    later grant of `orders:cancel` into one the API serves."""
    sample = guide_block("mysite/tests.py")
    code, said = _manage_test(site, sample)
    assert code == 0, said
    assert "Ran 6 tests" in said, said
    assert "\nOK\n" in said, said


def test_the_guides_sample_tests_fail_when_their_expectations_are_wrong(site: Site) -> None:
    """The sample's assertions bite: a delegation of a scope the views do not need is not
    served, so expecting it served fails the two tests that expect 403."""
    sample = guide_block("mysite/tests.py")
    broken = sample.replace('self.allowed("orders:cancel")', 'self.allowed("orders:read")')
    assert broken.count('self.allowed("orders:read")') == 4, broken
    code, said = _manage_test(site, broken)
    assert code != 0, said
    assert "Ran 6 tests" in said, said
    assert "FAILED (failures=2)" in said, said
    assert "FAIL: test_history_needs_orders_read" in said, said
    assert "FAIL: test_the_drf_api_needs_orders_read" in said, said
