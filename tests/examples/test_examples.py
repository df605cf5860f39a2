"""The Flask and Django example shops, each run as a real server process, over real HTTP.

Each example is started once per module with a TOML config (PACTMW_CONFIG) that registers
one personal agent with an inline JWKS and serves one Brand with the example's own bot.
"""

from __future__ import annotations

import copy
import json
import os
import re
import runpy
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.provider import ProviderSettings, Turn
from pactmw.provider.tools import ToolRegistry
from tests.examples.support import A2A, BRAND, EXAMPLES, ISSUER, write_config
from tests.support.agent import identity_token, user_message
from tests.support.net import free_port, loopback_client
from tests.support.servers import REPO, process_server


@dataclass(frozen=True)
class Running:
    name: str
    base_url: str
    audience: str
    key: PrivateJWK
    client: httpx.Client
    #: The site's own sqlite database (the Django examples), else "".
    database: str = ""
    #: The environment the server runs with (PACTMW_CONFIG, the Django settings).
    env: dict[str, str] = field(default_factory=dict)

    def token(self, sub: str = "user-1") -> str:
        return identity_token(self.key, ISSUER, self.audience, sub=sub)

    def auth(self, sub: str = "user-1") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(sub)}"}

    def send(self, text: str, *, message_id: str, context_id: str | None = None) -> httpx.Response:
        message = user_message(text, message_id=message_id, context_id=context_id)
        return self.client.post(
            f"/a2a/{BRAND}/message:send",
            content=json.dumps({"message": message}),
            headers={**self.auth(), "Content-Type": A2A},
        )


#: For the tests of what only the Django example has (its DRF view, its database): the
#: `running` fixture for those examples alone, rather than a skip on the others.
django_examples = pytest.mark.parametrize(
    "running", sorted(n for n in EXAMPLES if n.startswith("django")), indirect=True
)


@pytest.fixture(scope="module", params=sorted(EXAMPLES))
def running(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    name: str = request.param
    example = EXAMPLES[name]
    tmp = tmp_path_factory.mktemp(name)
    port = free_port()
    key = generate_private_jwk("ES256", kid="k1")
    # The Django site keeps pactmw's state in its own database (store = "django").
    store_url = "django" if name.startswith("django") else None
    config = write_config(tmp, port, key, example.handler, store_url=store_url)
    env = {"PACTMW_CONFIG": str(config), **example.env(tmp)}
    if example.prepare is not None:
        subprocess.run(example.prepare, cwd=REPO, env={**os.environ, **env}, check=True)
    base_url = f"http://127.0.0.1:{port}"
    with (
        process_server(example.argv(port), port, env=env, cwd=REPO, log=tmp / "server.log"),
        loopback_client(base_url=base_url, timeout=10) as client,
    ):
        database = str(tmp / "shop.db") if name.startswith("django") else ""
        yield Running(name, base_url, f"{base_url}/a2a", key, client, database, env)


def test_own_pages_still_work(running: Running) -> None:
    page = running.client.get("/", params={"order": "A-1002"})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "Acme Lamp Co. support" in page.text
    assert "A-1002" in page.text
    assert "processing" in page.text

    order = running.client.get("/orders/A-1001")
    assert order.status_code == 200
    assert order.json()["status"] == "shipped"
    assert running.client.get("/orders/Z-9999").status_code == 404


def test_agent_card(running: Running) -> None:
    response = running.client.get(f"/a2a/{BRAND}/.well-known/agent-card.json")
    assert response.status_code == 200
    assert response.headers["content-type"] == A2A
    card = response.json()
    assert card["name"] == "Acme support"
    assert card["supportedInterfaces"][0]["url"] == f"{running.base_url}/a2a/{BRAND}"


def test_the_shops_own_domain_redirects_to_its_card(running: Running) -> None:
    redirect = running.client.get("/.well-known/agent-card.json", follow_redirects=False)
    assert redirect.status_code == 302
    assert redirect.headers["location"] == (
        f"{running.base_url}/a2a/{BRAND}/.well-known/agent-card.json"
    )
    card = running.client.get("/.well-known/agent-card.json", follow_redirects=True)
    assert card.json()["supportedInterfaces"][0]["url"] == f"{running.base_url}/a2a/{BRAND}"


def test_conversation_and_idempotent_retry(running: Running) -> None:
    first_id = str(uuid.uuid4())
    first = running.send("Where is my order A-1001?", message_id=first_id)
    assert first.status_code == 200, first.text
    assert first.headers["content-type"] == A2A
    message = first.json()["message"]
    assert message["role"] == "ROLE_AGENT"
    answer = message["parts"][0]["text"]
    assert "A-1001" in answer
    assert "shipped" in answer
    context_id = message["contextId"]

    # The follow-up names no order: the bot finds it in the conversation's history.
    follow_id = str(uuid.uuid4())
    follow_up = running.send("Can I return it?", message_id=follow_id, context_id=context_id)
    assert follow_up.status_code == 200, follow_up.text
    reply = follow_up.json()["message"]
    assert reply["contextId"] == context_id
    assert "return for order A-1001" in reply["parts"][0]["text"]
    if running.name.startswith("django"):
        # The Django bot records the return in the shop's own database.
        assert running.client.get("/orders/A-1001").json()["return_requested"] is True

    # Retries are keyed on (contextId, messageId): each gets the stored answer, byte for byte,
    # without running the bot again.
    retry = running.send("Can I return it?", message_id=follow_id, context_id=context_id)
    assert retry.status_code == 200
    assert retry.content == follow_up.content
    retry_first = running.send(
        "Where is my order A-1001?", message_id=first_id, context_id=context_id
    )
    assert retry_first.status_code == 200
    assert retry_first.content == first.content


@django_examples
def test_drf_endpoint_wants_a_delegation(running: Running) -> None:
    """The Django example's DRF view: DRF's 401 with the PACT challenge, never its 403."""
    anonymous = running.client.get("/api/agent/orders")
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    # A verified personal agent without a delegation token holds no orders:read.
    identified = running.client.get("/api/agent/orders", headers=running.auth())
    assert identified.status_code == 401
    assert 'error="invalid_token"' in identified.headers["www-authenticate"]


@django_examples
def test_conversations_live_in_the_sites_database(running: Running) -> None:
    """With store = "django" the conversation is a row of the shop's own database."""
    sent = running.send("Where is my order A-1002?", message_id=str(uuid.uuid4()))
    assert sent.status_code == 200, sent.text
    context_id = sent.json()["message"]["contextId"]
    with sqlite3.connect(running.database) as conn:
        rows = conn.execute(
            "SELECT brand_id, sub FROM pactmw_conversations WHERE context_id = ?", (context_id,)
        ).fetchall()
    assert rows == [(BRAND, "user-1")]


def test_the_frameworks_pactmw_command_reads_the_sites_store(running: Running) -> None:
    """`manage.py pactmw` (Django) and `flask pactmw` (Flask, the extension's CLI group),
    run as another process, see the Provider's agents and grants."""
    command = (
        [sys.executable, "examples/django_app/manage.py"]
        if running.name.startswith("django")
        else [sys.executable, "-m", "flask", "--app", "examples.flask_app.app:create_app"]
    )

    def manage(*args: str) -> Any:
        done = subprocess.run(
            [*command, "pactmw", *args, "--json"],
            cwd=REPO,
            env={**os.environ, **running.env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    agents = manage("agents", "list")
    assert [(a["issuer"], a["source"], a["status"]) for a in agents] == [
        (ISSUER, "config", "allowed")
    ]
    assert manage("grants", "list") == []


@django_examples
def test_the_sites_admin_manages_pactmw(running: Running) -> None:
    """The example's own `/admin/` has pactmw's agents, access switches, grants and
    conversations, read from the site's database (store = "django")."""
    password = "example-admin-pw"
    subprocess.run(
        [sys.executable, "examples/django_app/manage.py", "createsuperuser", "--noinput",
         "--username", "ops", "--email", "ops@shop.example"],
        cwd=REPO,
        env={**os.environ, **running.env, "DJANGO_SUPERUSER_PASSWORD": password},
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    sent = running.send("Where is my order A-1001?", message_id=str(uuid.uuid4()))
    context_id = sent.json()["message"]["contextId"]
    with loopback_client(base_url=running.base_url, timeout=10) as browser:
        form = browser.get("/admin/login/").text
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert csrf, form[:2000]
        login = browser.post(
            "/admin/login/?next=/admin/",
            data={
                "csrfmiddlewaretoken": csrf.group(1),
                "username": "ops",
                "password": password,
                "next": "/admin/",
            },
        )
        assert login.status_code == 302, login.text[:2000]
        assert "pactmw (personal agents)" in browser.get("/admin/").text
        for model in ("registeredagent", "agentoverride", "grant"):
            assert browser.get(f"/admin/pactmw/{model}/").status_code == 200, model
        conversations = browser.get("/admin/pactmw/conversation/")
        assert conversations.status_code == 200
        assert context_id in conversations.text


def test_send_without_token_is_challenged(running: Running) -> None:
    response = running.client.post(
        f"/a2a/{BRAND}/message:send",
        content=json.dumps(
            {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
        ),
        headers={"Content-Type": A2A},
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="a2a"'
    assert response.content == b""


def test_unmatched_a2a_route_is_a_bare_404(running: Running) -> None:
    response = running.client.get(f"/a2a/{BRAND}/unknown", headers=running.auth())
    assert response.status_code == 404
    assert A2A not in response.headers.get("content-type", "")
    assert response.content == b""


def test_personal_agent_only_view(running: Running) -> None:
    refused = running.client.get("/api/agent/whoami")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'

    answered = running.client.get("/api/agent/whoami", headers=running.auth("user-7"))
    assert answered.status_code == 200
    caller = answered.json()
    assert caller["issuer"] == ISSUER
    assert caller["sub"] == "user-7"
    assert caller["actor_id"].startswith("pa:")


@pytest.mark.parametrize(
    ("method", "path", "with_token"),
    [
        ("GET", f"/a2a/{BRAND}/unknown", False),
        ("GET", "/a2a/", False),
        ("PROPFIND", f"/a2a/{BRAND}/message:send", False),
        # A Brand is looked up after the token (pact-provider.md §2.1): 404 with a valid one.
        ("GET", "/a2a/no-such-brand/tasks", True),
    ],
)
def test_unmatched_routes_are_refused_before_authentication(
    running: Running, method: str, path: str, with_token: bool, request: pytest.FixtureRequest
) -> None:
    """PACT §2.2: routing happens before authentication; no A2A body on a 404/405."""
    headers = running.auth() if with_token else {}
    response = running.client.request(method, path, headers=headers)
    assert response.status_code in (404, 405)
    assert "www-authenticate" not in response.headers
    assert A2A not in response.headers.get("content-type", "")


def test_built_in_dev_configs_are_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without PACTMW_CONFIG each example serves one brand, "shop", and registers no agent."""
    from examples.flask_app.app import dev_config, support_bot

    flask_settings = ProviderSettings.from_mapping(
        dev_config(5000), handlers={"support_bot": support_bot}
    )
    monkeypatch.delenv("PACTMW_CONFIG", raising=False)
    django_config = runpy.run_path(str(REPO / "examples/django_app/shopsite/settings.py"))
    # `shop.bot` and `shop.tools` need a configured Django to import: stand in for them here.

    def stub(turn: Turn) -> str:
        return ""

    django_pactmw = copy.deepcopy(django_config["PACTMW"])
    django_delegation = django_pactmw["brands"]["shop"]["delegation"]
    assert django_delegation["tools"] == "shop.tools:shop_tools"
    django_delegation["tools"] = ToolRegistry()
    django_settings = ProviderSettings.from_mapping(
        django_pactmw, handlers={"shop.bot:support_bot": stub}
    )
    assert flask_settings.store == f"sqlite:///{REPO / 'examples/flask_app/.pactmw/pactmw.db'}"
    assert django_settings.store == "django"  # the shop's own database
    for settings, app_dir in ((flask_settings, "flask_app"), (django_settings, "django_app")):
        assert [brand.id for brand in settings.brands] == ["shop"]
        assert settings.identity.agents == ()
        # Both offer delegation with the shop's own login; dev signing keys go under .pactmw/.
        delegation = settings.brands[0].delegation
        assert delegation is not None
        assert list(delegation.scopes) == ["orders:read", "orders:return"]
        assert delegation.mode == "same-app"
        assert settings.data_dir == str(REPO / "examples" / app_dir / ".pactmw")
    flask_delegation = flask_settings.brands[0].delegation
    assert flask_delegation is not None
    assert set(flask_delegation.tools.scopes) == {"orders:read", "orders:return"}
