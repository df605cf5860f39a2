"""The code samples of README.md and docs/ run as written (each marked
`<!-- readme-test: NAME -->`, found by tests/support/samples.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from pactmw.cli._send_delegation import save_delegation
from pactmw.client import (
    A2AClient,
    AgentCard,
    AgentSigner,
    DeviceCodeClient,
    MessageReply,
    StepUp,
    TokenResponse,
    delegation_scheme,
    fetch_card,
)
from pactmw.client.flow import TokenSource
from pactmw.provider import Provider
from pactmw.provider.delegated import DelegationGrant
from tests.adapters.support import assert_refused
from tests.delegated.support import allow_on_the_consent_page, page_text
from tests.support.net import free_port, loopback_client
from tests.support.samples import PAGES, find_samples
from tests.support.servers import REPO, uvicorn_server, werkzeug_server

SAMPLES = find_samples()


def run_sample(name: str) -> dict[str, Any]:
    sample = SAMPLES[name]
    namespace: dict[str, Any] = {"__name__": f"readme_{name}"}
    exec(compile(sample.code, sample.filename, "exec"), namespace)
    return namespace


def test_every_marked_sample_is_found() -> None:
    assert set(SAMPLES) == {
        "direct", "pypi_direct", "starlette", "fastapi", "flask", "wsgi", "provider",
        "deployment_asgi", "bot", "delegated_tools", "authorization_details", "model_tools",
        "parafe_bot", "parafe_ap2_bot", "django", "drf", "django_proxy", "testing", "serve_bot",
        "flask_provider", "poppy_fastapi", "serve_delegated_bot", "fastapi_provider",
        "custom_delegation", "poppy_flask", "wsgi_provider", "fastapi_testing",
        "delegated_testing", "starlette_backend",
    }  # fmt: skip


#: What may stand on the line before a ```python block: it runs, or the page says why not.
BLOCK_MARK = re.compile(r"<!-- (readme-test: \w+|parafe-readme: \w+|not-run: [^>]+) -->")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_python_block_runs_or_says_why_not(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if line.lstrip(" ").startswith("```python"):  # in a list item too
            before = lines[number - 1].strip() if number else ""
            assert BLOCK_MARK.fullmatch(before), f"{page.name}:{number + 1}: {before!r}"


@pytest.mark.parametrize("name", ["direct", "pypi_direct"])
def test_direct_import_sample(name: str) -> None:
    who_is_calling = run_sample(name)["who_is_calling"]
    assert who_is_calling(None) == "401 (missing_token)"
    assert who_is_calling("Bearer not-a-jwt") == "401 (malformed_token)"


def test_the_testing_sample_is_a_test_that_passes_and_would_fail() -> None:
    sample = run_sample("testing")
    sample["test_whoami_admits_a_personal_agent"]()
    # The token is what admits the request: signed by another key, it is refused.
    app = sample["create_app"]()
    stranger = sample["AgentSigner"].generate(issuer="https://pa.example")
    token = stranger.sign("user-1", sample["AUDIENCE"])
    refused = app.test_client().get("/a2a/whoami", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 401


def test_the_fastapi_testing_sample_is_a_test_that_passes_and_would_fail() -> None:
    # Found in a FastAPI trial: the testing section showed Flask's test client alone, and a
    # FastAPI reader reached for `dependency_overrides`, which the middleware never consults.
    sample = run_sample("fastapi_testing")
    sample["test_whoami_admits_a_personal_agent"]()
    # The token is what admits the request: signed by another key, it is refused.
    client = sample["TestClient"](sample["create_app"]())
    stranger = sample["AgentSigner"].generate(issuer="https://pa.example")
    token = stranger.sign("user-1", sample["AUDIENCE"])
    refused = client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert (refused.status_code, refused.content) == (401, b"")


def _jane_allows_orders_read(provider: Provider, issuer: str) -> DelegationGrant:
    """Jane's Allow of `orders:read` at Brand `shop` to user-1 of the agent `issuer`."""
    return provider.grant_delegation(
        "shop", account="jane", agent_issuer=issuer, agent_sub="user-1", scopes=["orders:read"]
    )


def test_the_delegated_testing_sample_is_a_test_that_passes_and_would_fail() -> None:
    # Found in a Flask trial: a view behind @delegation_required had no public way to be
    # tested; the page said only the site's authorization server issues the token.
    sample = run_sample("delegated_testing")
    sample["test_orders_need_the_persons_delegation"]()
    agent, site = sample["agent"], sample["SITE"]
    app = sample["create_app"]()
    client = app.test_client()
    with app.app_context():
        provider = sample["get_provider"]()
        granted = _jane_allows_orders_read(provider, agent.issuer)
    delegation = {"X-A2A-User-Delegation": granted.header}

    def orders(sub: str) -> int:
        identity = {"Authorization": f"Bearer {agent.sign(sub, site + '/a2a')}"}
        status: int = client.get("/api/orders", headers={**identity, **delegation}).status_code
        return status

    assert orders("user-1") == 200
    # Bound to the agent's user it was granted to, and refused once revoked.
    assert orders("user-2") == 401
    assert provider.revoke_grant(granted.grant_id) is True
    assert orders("user-1") == 401


def test_a_dependency_override_replaces_the_scheme_not_the_middleware() -> None:
    # What the FastAPI page says of the sample guarding /api/ twice: a test's
    # `app.dependency_overrides[scheme]` admits a route the scheme alone guards, while the
    # middleware still refuses a request under its prefix without a token.
    from fastapi import FastAPI, Security

    from pactmw import PersonalAgent, Settings
    from pactmw.adapters.asgi import PersonalAgentMiddleware
    from pactmw.adapters.fastapi import EXCEPTION_HANDLERS, PersonalAgentScheme

    agent = AgentSigner.generate(issuer="https://pa.example")
    settings = Settings.from_mapping({
        "audience": "https://provider.example/a2a",
        "agents": [{"issuer": agent.issuer, "jwks": agent.public_jwks()}],
    })  # fmt: skip
    verifier = settings.build_verifier()
    personal_agent = PersonalAgentScheme(verifier)
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)
    app.add_middleware(PersonalAgentMiddleware, verifier=verifier, path_prefix="/api/")

    @app.get("/whoami")
    @app.get("/api/whoami")
    def whoami(
        caller: PersonalAgent = Security(personal_agent),  # noqa: B008 (FastAPI's idiom)
    ) -> dict[str, str]:
        return {"user": caller.sub}

    app.dependency_overrides[personal_agent] = lambda: PersonalAgent(
        issuer=agent.issuer, sub="test-user", name="Test", claims={}, audience="test"
    )
    with uvicorn_server(app) as base:
        overridden = httpx.get(base + "/whoami")
        assert (overridden.status_code, overridden.json()) == (200, {"user": "test-user"})
        refused = httpx.get(base + "/api/whoami")
        assert refused.status_code == 401, refused.text
        assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'


@pytest.mark.parametrize("cors_first", [True, False], ids=["cors-added-last", "cors-added-first"])
def test_the_fastapi_page_says_where_cors_goes(cors_first: bool) -> None:
    # Found in a FastAPI trial: FastAPI's guide adds `CORSMiddleware` right after making the
    # app; added before `PersonalAgentMiddleware`, it runs after it, so a browser's preflight
    # (which carries no token) to the guarded prefix got the 401, with no CORS header.
    from fastapi import FastAPI
    from fastapi.middleware.cors import CORSMiddleware

    from pactmw import Settings
    from pactmw.adapters.asgi import PersonalAgentMiddleware
    from pactmw.core.jwk import generate_private_jwk, public_key_set

    jwks = public_key_set([generate_private_jwk()]).to_dict()
    page = (REPO / "docs" / "getting-started" / "starlette-fastapi.md").read_text("utf-8")
    assert "add `CORSMiddleware` after `PersonalAgentMiddleware`" in page
    settings = Settings.from_mapping({
        "audience": "https://provider.example/a2a",
        "agents": [{"issuer": "https://pa.example", "jwks": jwks}],
    })  # fmt: skip
    app = FastAPI()
    cors: dict[str, Any] = {"allow_origins": ["https://agent.example"], "allow_methods": ["GET"]}
    if not cors_first:
        app.add_middleware(CORSMiddleware, **cors)
    app.add_middleware(
        PersonalAgentMiddleware, verifier=settings.build_verifier(), path_prefix="/api/"
    )
    if cors_first:
        app.add_middleware(CORSMiddleware, **cors)
    preflight = {"Origin": "https://agent.example", "Access-Control-Request-Method": "GET"}
    with uvicorn_server(app) as base:
        answered = httpx.options(base + "/api/whoami", headers=preflight)
        refused = httpx.get(base + "/api/whoami", headers={"Origin": "https://agent.example"})
    assert refused.status_code == 401
    if cors_first:  # what the page says to do: the preflight is CORS's, the 401 readable
        assert answered.status_code == 200, answered.text
        assert refused.headers["access-control-allow-origin"] == "https://agent.example"
    else:  # the other order, which the page warns of
        assert answered.status_code == 401
        assert "access-control-allow-origin" not in refused.headers


def test_the_fastapi_page_reads_the_delegation_pactmw_send_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found in a FastAPI trial: the page said `/api/orders` needs the person's delegation, not
    # where a reader who ran `pactmw send --authorize --delegation FILE` finds it for curl.
    page = (REPO / "docs" / "getting-started" / "starlette-fastapi.md").read_text("utf-8")
    saved = re.search(r"^\$ pactmw send .*--delegation (\S+)", page, re.MULTILINE)
    read = re.search(r"^\$ DELEGATION=\$\(python -c '([^']*)'\)$", page, re.MULTILINE)
    curl = re.search(r'^\$ curl .*"X-A2A-User-Delegation: Bearer \$DELEGATION".*/api/orders$',
                     page, re.MULTILINE)  # fmt: skip
    assert saved, page
    assert read, page
    assert curl, page
    monkeypatch.chdir(tmp_path)
    tokens = TokenResponse(
        access_token="delegation-token", token_type="Bearer", expires_in=3600,
        scopes=("orders:read",), refresh_token="rt_refresh",
    )  # fmt: skip
    save_delegation(saved[1], tokens)  # what `pactmw send --authorize --delegation` writes
    printed = subprocess.run(
        [sys.executable, "-c", read[1]], capture_output=True, text=True, check=True
    ).stdout
    assert printed == "delegation-token\n"


def assert_guarded(base: str, protected: str, open_path: str) -> None:
    refused = httpx.get(base + protected)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
    assert refused.content == b""
    assert httpx.get(base + open_path).status_code == 200


def test_starlette_sample_guards_the_prefix_only() -> None:
    with uvicorn_server(run_sample("starlette")["app"]) as base:
        assert_guarded(base, "/a2a/whoami", "/")


def test_starlette_backend_sample_keeps_people_and_personal_agents_apart() -> None:
    # Found in a Starlette trial: the page said "mix personal agents with other
    # authentication" in prose only. A second `AuthenticationMiddleware` for the app's own
    # sign-in signs out whatever the first found (Starlette keeps the last one's answer), and
    # Starlette's `requires("authenticated")` on a people-only page admits personal agents.
    agent = AgentSigner.generate(issuer="https://pa.example")
    registered = '"jwks_uri": "https://pa.example/.well-known/jwks.json"'
    sample = SAMPLES["starlette_backend"]
    assert registered in sample.code
    namespace: dict[str, Any] = {"__name__": "readme_starlette_backend"}
    namespace["JWKS"] = agent.public_jwks()
    exec(
        compile(sample.code.replace(registered, '"jwks": JWKS'), sample.filename, "exec"), namespace
    )
    signed = {"Authorization": f"Bearer {agent.sign('user-1', 'https://provider.example/a2a')}"}
    elsewhere = {"Authorization": f"Bearer {agent.sign('user-1', 'https://other.example/a2a')}"}
    with (
        uvicorn_server(namespace["app"]) as base,
        loopback_client(base_url=base) as client,
    ):
        assert_refused(client.get("/whoami"))  # PACT's challenge, not Starlette's bare 403
        mine = client.get("/whoami", headers=signed)
        assert mine.status_code == 200, mine.text
        assert mine.json()["scopes"] == ["authenticated", "personal_agent"]
        # A personal agent's token that fails is the challenge (`on_error`), not a 400.
        assert_refused(client.get("/", headers=elsewhere))
        assert client.get("/", headers={"Authorization": "Basic Zm9vOmJhcg=="}).json() == {
            "signed_in": False
        }
        for headers in ({}, signed):  # the people's page: the agent is no member
            assert client.get("/account", headers=headers).status_code == 303
        assert client.get("/login").status_code == 303  # jane signs in: a session cookie
        assert client.get("/account").json() == {"user": "jane"}
        assert client.get("/").json() == {"signed_in": True}
        assert_refused(client.get("/whoami"))  # jane's session is no personal agent


def test_fastapi_sample_answers_the_challenge_and_documents_the_scheme() -> None:
    with uvicorn_server(run_sample("fastapi")["app"]) as base:
        refused = httpx.get(base + "/whoami")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
        assert refused.content == b""
        document = httpx.get(base + "/openapi.json").json()
        assert document["components"]["securitySchemes"]["PersonalAgent"]["scheme"] == "bearer"
        # The refusal just seen is documented, with its challenge header.
        documented = document["paths"]["/whoami"]["get"]["responses"]["401"]
        assert "WWW-Authenticate" in documented["headers"]


def test_flask_sample_guards_the_prefix_only() -> None:
    with werkzeug_server(run_sample("flask")["app"]) as base:
        assert_guarded(base, "/a2a/whoami", "/")


def _run_provider_sample(
    guide: str, name: str, sample_port: int
) -> tuple[AgentSigner, int, dict[str, Any]]:
    """A getting-started guide's Provider sample as a reader runs it, in the current folder:
    its signing key made with the guide's own `pactmw keygen` command, the agent's keys
    inline instead of its `jwks_uri`, and a free port for the guide's `sample_port`. The
    agent, the port, and the sample's names once run (its `app`)."""
    page = (REPO / "docs" / "getting-started" / guide).read_text(encoding="utf-8")
    keygen = re.search(r"`(pactmw keygen --out pactmw-signing\.jwk) > /dev/null`", page)
    assert keygen, page
    pactmw = (sys.executable, "-m", "pactmw")
    subprocess.run([*pactmw, *keygen[1].split()[1:]], check=True, capture_output=True)
    agent = AgentSigner.generate(issuer="https://pa.example")
    port = free_port()
    registered = '"jwks_uri": "https://pa.example/.well-known/jwks.json"'
    sample = SAMPLES[name]
    assert registered in sample.code
    code = sample.code.replace(f"http://127.0.0.1:{sample_port}", f"http://127.0.0.1:{port}")
    code = code.replace(registered, '"jwks": JWKS')
    namespace: dict[str, Any] = {"__name__": f"readme_{name}", "JWKS": agent.public_jwks()}
    exec(compile(code, sample.filename, "exec"), namespace)
    return agent, port, namespace


def test_the_flask_provider_sample_answers_an_agent_and_asks_its_signed_in_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/getting-started/flask.md's Provider as a reader runs it: its signing key made with
    # the page's command, the agent's keys inline, a free port, and the page's own login
    # (reported: the sample's login_url was a 404, so nobody could Allow on the consent page).
    monkeypatch.chdir(tmp_path)  # the sample's key file and sqlite store are relative
    agent, port, namespace = _run_provider_sample("flask.md", "flask_provider", 5000)
    base = f"http://127.0.0.1:{port}"
    app = namespace["app"]
    with app.test_client() as visitor:  # the login follows the site's own URLs only
        elsewhere = visitor.get("/login", query_string={"next": "https://evil.example/"})
        assert elsewhere.headers["Location"] == "/"

    with werkzeug_server(app, port):
        card = fetch_card(f"{base}/a2a/shop/.well-known/agent-card.json")
        token = agent.for_user("user-1", audience=f"{base}/a2a")
        refused = httpx.get(f"{base}/api/whoami")
        assert refused.status_code == 401, refused.text
        assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
        signed = {"Authorization": f"Bearer {agent.sign('user-1', f'{base}/a2a')}"}
        mine = httpx.get(f"{base}/api/whoami", headers=signed)
        assert mine.status_code == 200, mine.text
        assert mine.json()["user"].startswith("pa:")
        # Found in a Flask trial: the page showed no scoped view of the app's own, nor
        # delegation_brand, nor where a view finds the person's account. The bot's account
        # tool is a step-up until the person allows it; then the app's own API reads the
        # same delegation.
        _step_up_then_delegated_api(base, card, token, signed)
    listed = app.test_cli_runner().invoke(args=["pactmw", "grants", "list"])
    assert listed.exit_code == 0, listed.output
    assert "jane" in listed.output  # the grant is kept under the signed-in account


def _reply_then_allow_as_jane(
    base: str, card: AgentCard, token: TokenSource, browser: httpx.Client
) -> TokenResponse:
    """What a guide's Provider sample promises an agent: a reply, then a delegation for
    `orders:read` that jane, signed in by the sample's login, allows on the consent page."""
    reply = A2AClient.from_card(card, token).send("Where is my order?")
    assert isinstance(reply, MessageReply)
    assert reply.text == "You asked: Where is my order?"
    scheme = delegation_scheme(card)
    assert scheme is not None
    device = DeviceCodeClient(scheme, token)
    started = device.start(["orders:read"])
    consent = browser.get(started.verification_uri_complete)
    assert "signed in to shop as jane" in page_text(consent.text), consent.text
    allow_on_the_consent_page(browser, consent.text, "orders:read", base)
    granted = device.wait_for_token(started, timeout=60)
    assert isinstance(granted, TokenResponse), granted
    return granted


def _step_up_then_delegated_api(
    base: str, card: AgentCard, token: TokenSource, signed: dict[str, str]
) -> None:
    """The walk a sample serving the bot and a scoped API of its own passes: the account
    tool is a step-up for `orders:read`; jane allows it (the login follows `next` on this
    site only); the app's `/api/orders` refuses the identity alone with the delegation
    challenge and serves it with the delegation; the bot answers with it."""
    stepped = A2AClient.from_card(card, token).send("Show my orders")
    assert isinstance(stepped, StepUp), stepped
    assert stepped.missing_scopes == ("orders:read",)
    with loopback_client(follow_redirects=True) as browser:
        granted = _reply_then_allow_as_jane(base, card, token, browser)
        elsewhere = browser.get(f"{base}/login", params={"next": "https://evil.example/"})
        assert elsewhere.url == f"{base}/", elsewhere.url
    refused = httpx.get(f"{base}/api/orders", headers=signed)
    assert refused.status_code == 401, refused.text
    assert refused.headers["www-authenticate"] == 'Bearer realm="a2a", error="invalid_token"'
    delegated = {**signed, "X-A2A-User-Delegation": f"Bearer {granted.access_token}"}
    orders = httpx.get(f"{base}/api/orders", headers=delegated)
    assert orders.status_code == 200, orders.text
    assert orders.json() == {"orders": ["A-1001", "A-1002"]}
    reply = A2AClient.from_card(card, token).send(
        "Show my orders", delegation_token=granted.access_token
    )
    assert isinstance(reply, MessageReply), reply
    assert reply.text == "Your orders: A-1001, A-1002"


def test_the_fastapi_provider_sample_keeps_the_card_public_and_guards_its_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/getting-started/starlette-fastapi.md's app as a reader runs it: the middleware on
    # its API, the Provider inside with `a2a_routes`, its own /.well-known/ document, and its
    # session login signing the person in on the consent page. Reported: the middleware's
    # default prefix answered the Provider's public Agent Card with 401.
    monkeypatch.chdir(tmp_path)  # the sample's key file and sqlite store are relative
    agent, port, namespace = _run_provider_sample("starlette-fastapi.md", "fastapi_provider", 8000)
    base = f"http://127.0.0.1:{port}"
    token = agent.for_user("user-1", audience=f"{base}/a2a")

    with uvicorn_server(namespace["app"], port):
        card = fetch_card(f"{base}/a2a/shop/.well-known/agent-card.json")
        assert_guarded(base, "/api/whoami", "/.well-known/security.txt")
        signed = {"Authorization": f"Bearer {agent.sign('user-1', f'{base}/a2a')}"}
        mine = httpx.get(f"{base}/api/whoami", headers=signed)
        assert mine.status_code == 200, mine.text
        assert mine.json()["user"].startswith("pa:")
        # Found in a FastAPI trial: the page showed no tool and no scoped endpoint of the
        # app's own. The bot's account tool is a step-up until the person allows it...
        # The bot's account tool is a step-up until the person allows it; then the app's own
        # API reads the same delegation.
        _step_up_then_delegated_api(base, card, token, signed)


def test_the_custom_server_sample_answers_the_challenge_and_reads_a_delegation() -> None:
    # docs/getting-started/custom-server.md: a server without an adapter verifies identity and
    # delegation with the guard and sends `refusal_response` as it is.
    agent = AgentSigner.generate(issuer="https://pa.example")
    registered = '"jwks_uri": "https://pa.example/.well-known/jwks.json"'
    sample = SAMPLES["custom_delegation"]
    assert registered in sample.code
    code = sample.code.replace(registered, '"jwks": JWKS')
    namespace: dict[str, Any] = {"__name__": "readme_custom", "JWKS": agent.public_jwks()}
    exec(compile(code, sample.filename, "exec"), namespace)
    orders, provider = namespace["orders"], namespace["provider"]
    identity = ("Authorization", "Bearer " + agent.sign("user-1", "https://provider.example/a2a"))

    def refused(headers: list[tuple[str, str]]) -> str:
        answer = orders("GET", "/orders", headers)
        assert (answer.status, answer.body) == (401, b""), answer
        return str(dict(answer.headers)["WWW-Authenticate"])

    assert refused([]) == 'Bearer realm="a2a"'
    assert refused([identity]) == 'Bearer realm="a2a", error="invalid_token"'
    assert refused([identity, ("X-A2A-User-Delegation", "Bearer x.y.z")]).endswith(
        'error="invalid_token"'
    )
    # A delegation the Provider issued (as its consent page's Allow does) reaches the
    # handler, which reads the account.
    granted = _jane_allows_orders_read(provider, agent.issuer)
    token = granted.access_token
    answer = orders("GET", "/orders", [identity, ("X-A2A-User-Delegation", granted.header)])
    assert (answer.status, json.loads(answer.body)) == (200, {"account": "jane"})
    # The raw token, without `Bearer `, is not the header's form.
    assert refused([identity, ("X-A2A-User-Delegation", token)]).endswith('error="invalid_token"')


def _token_of_your_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, Any]:
    """docs/adapters.md "Try it with a token of your own" as a reader follows it, in
    `tmp_path` (the samples read pa-jwks.json from there): the section, the token its
    commands mint, and the answer its curl shows."""
    page = (REPO / "docs" / "adapters.md").read_text(encoding="utf-8")
    section = page.split("## Try it with a token of your own\n", 1)[1].split("\n## ", 1)[0]
    keygen = re.search(r"^pactmw keygen [^#\n]*", section, re.MULTILINE)
    mint = re.search(r"^\$ TOKEN=\$\((pactmw token [^)]*)\)$", section, re.MULTILINE)
    answer = re.search(r"^\$ curl .*\n(.*)$", section, re.MULTILINE)
    assert keygen, section
    assert mint, section
    assert answer, section
    monkeypatch.chdir(tmp_path)
    pactmw = (sys.executable, "-m", "pactmw")
    subprocess.run([*pactmw, *keygen[0].split()[1:]], check=True, capture_output=True)
    token = subprocess.run(
        [*pactmw, *mint[1].split()[1:]], check=True, capture_output=True, text=True
    ).stdout.strip()
    return section, token, json.loads(answer[1])


def test_a_token_of_your_own_is_admitted_by_the_flask_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The section's commands, the agent it puts in the Flask page's configuration, its curl's
    # answer.
    section, token, answer = _token_of_your_own(tmp_path, monkeypatch)
    agent = re.search(r'`(\{"issuer": "https://pa.example", "jwks": [^`]*\})`', section)
    imports = re.search(r"\(with\s+`(import json)`\s+and\s+`(from pathlib import Path)`", section)
    assert agent, section
    assert imports, section
    registered = (
        '{"issuer": "https://pa.example", "jwks_uri": "https://pa.example/.well-known/jwks.json"}'
    )
    code = SAMPLES["flask"].code
    assert registered in code
    namespace: dict[str, Any] = {"__name__": "readme_flask_own_token"}
    exec(f"{imports[1]}\n{imports[2]}\n" + code.replace(registered, agent[1]), namespace)
    with werkzeug_server(namespace["app"]) as base:
        admitted = httpx.get(base + "/a2a/whoami", headers={"Authorization": f"Bearer {token}"})
    assert admitted.status_code == 200
    assert admitted.json() == answer


def test_a_token_of_your_own_is_admitted_by_the_custom_server_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same section, for docs/getting-started/custom-server.md: the keys it says to give
    # `RegisteredAgent` in place of jwks_uri (a JWKS document there once failed every token).
    section, token, answer = _token_of_your_own(tmp_path, monkeypatch)
    keys = re.search(r"`(jwks=parse_jwks\([^`]*\))` in place of `jwks_uri=\.\.\.`", section)
    imported = re.search(r"`(from pactmw import parse_jwks)`", section)
    assert keys, section
    assert imported, section
    registered = 'jwks_uri="https://pa.example/.well-known/jwks.json"'
    code = SAMPLES["direct"].code
    assert registered in code
    namespace: dict[str, Any] = {"__name__": "readme_direct_own_token"}
    # The page's other sentence names these imports (json, Path) for the agent's keys.
    exec(
        f"import json\nfrom pathlib import Path\n{imported[1]}\n"
        + code.replace(registered, keys[1]),
        namespace,
    )
    who_is_calling = namespace["who_is_calling"]
    user = answer["user"]
    assert who_is_calling(f"Bearer {token}") == f"Example Assistant for {user}"
    assert who_is_calling(None) == "401 (missing_token)"


@contextmanager
def _running(argv: list[str], cwd: Path, ready: str) -> Iterator[None]:
    """Run `argv` in `cwd` until the block ends; wait until `ready` answers 200."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(ready).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, f"{argv} did not answer {ready}"
            time.sleep(0.1)
        yield
    finally:
        process.terminate()
        process.communicate(timeout=20)


def test_the_cli_page_serves_a_provider_that_passes_its_check(tmp_path: Path) -> None:
    # docs/cli.md as a reader with only the wheel follows it: the bot, pactmw.toml and the
    # commands of "Serve a Provider", then the check of "Check a Provider" (on free ports).
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    serve = page.split("## Serve a Provider\n", 1)[1].split("\n## ", 1)[0]
    check = page.split("## Check a Provider\n", 1)[1].split("\n## ", 1)[0]
    toml = re.search(r"^```toml\n(.*?)^```$", serve, re.S | re.M)
    commands = re.search(r"^```sh\n(.*?)^```$", serve, re.S | re.M)
    transcript = re.search(r"^```\n\$ (pactmw check .*?)\n(?!    )(.*?)^```$", check, re.S | re.M)
    assert toml, serve
    assert commands, serve
    assert transcript, check
    keygen, static, serve_line = (
        line.split("#", 1)[0].split("&", 1)[0].split() for line in commands[1].splitlines()
    )
    assert keygen[0] == "pactmw", keygen
    assert static[:3] == ["python", "-m", "http.server"], static
    assert serve_line[:2] == ["pactmw", "serve"], serve_line
    jwks_port, provider_port = str(free_port()), str(free_port())
    ports = {"9000": jwks_port, "8765": provider_port}

    def on_free_ports(text: str) -> str:
        for documented, free in ports.items():
            text = text.replace(f"127.0.0.1:{documented}", f"127.0.0.1:{free}")
        return text

    (tmp_path / "bots.py").write_text(SAMPLES["serve_bot"].code, encoding="utf-8")
    (tmp_path / "pactmw.toml").write_text(on_free_ports(toml[1]), encoding="utf-8")
    pactmw = [sys.executable, "-m", "pactmw"]
    subprocess.run([*pactmw, *keygen[1:]], cwd=tmp_path, check=True, capture_output=True)
    static_argv = [sys.executable, *static[1:]]
    static_argv[static_argv.index("9000")] = jwks_port
    serve_argv = [*pactmw, *serve_line[1:]]
    serve_argv[serve_argv.index("8765")] = provider_port
    check_argv = [*pactmw, *on_free_ports(transcript[1].replace("\\\n", " ")).split()[1:]]
    jwks_uri = f"http://127.0.0.1:{jwks_port}/.well-known/jwks.json"
    card = f"http://127.0.0.1:{provider_port}/a2a/acme/.well-known/agent-card.json"
    with (
        _running(static_argv, tmp_path, jwks_uri),
        _running(serve_argv, tmp_path, card),
    ):
        checked = subprocess.run(
            check_argv, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shown = on_free_ports(transcript[2])
    assert checked.stderr + checked.stdout == shown


def test_wsgi_sample_guards_the_prefix_only() -> None:
    with werkzeug_server(run_sample("wsgi")["application"]) as base:
        assert_guarded(base, "/a2a/anything", "/")


def test_the_wsgi_provider_sample_serves_the_bot_and_guards_its_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/getting-started/wsgi.md's Provider in front of a bare WSGI app, as a reader runs
    # it: the card public, the app's API behind the middleware, the page's cookie login
    # signing the person in on the consent page, and the delegation read by the app's own
    # `delegation_required` view. Reported in a plain WSGI trial: the guide had no Provider.
    monkeypatch.chdir(tmp_path)  # the sample's key file and sqlite store are relative
    agent, port, namespace = _run_provider_sample("wsgi.md", "wsgi_provider", 8000)
    base = f"http://127.0.0.1:{port}"
    token = agent.for_user("user-1", audience=f"{base}/a2a")
    signed = {"Authorization": f"Bearer {agent.sign('user-1', f'{base}/a2a')}"}

    with werkzeug_server(namespace["application"], port):
        card = fetch_card(f"{base}/a2a/shop/.well-known/agent-card.json")
        refused = httpx.get(f"{base}/api/whoami")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
        mine = httpx.get(f"{base}/api/whoami", headers=signed)
        assert mine.status_code == 200, mine.text
        assert mine.json()["user"].startswith("pa:")
        # A forged login cookie signs nobody in: the consent page sends to the login.
        forged = httpx.get(f"{base}/a2a/shop/oauth/agents", cookies={"user": "jane.0"})
        assert forged.status_code == 303, forged.text
        assert forged.headers["location"].startswith("/login?next="), forged.headers
        _step_up_then_delegated_api(base, card, token, signed)


def test_django_and_drf_samples_refuse_a_request_without_a_token() -> None:
    # Django is configured once per process: the samples run in one of their own, through
    # the checks the clean venv of tests/test_packaging.py runs them with.
    code = (
        "import json, sys\n"
        "from tests.support.wheel_probe import check_django, check_drf\n"
        "samples = json.load(sys.stdin)\n"
        "check_django(samples)\n"
        "check_drf(samples)\n"
        "print('ok')\n"
    )
    samples = {name: SAMPLES[name].code for name in ("django", "drf")}
    ran = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(samples), cwd=REPO,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, "ok\n"), ran.stderr


@pytest.mark.parametrize("path", ["/a2a/acme/.well-known/agent-card.json"])
def test_provider_sample_serves_the_card(path: str) -> None:
    with uvicorn_server(run_sample("provider")["app"]) as base:
        card = httpx.get(base + path)
        assert card.status_code == 200
        assert card.headers["content-type"] == "application/a2a+json"
        assert card.json()["supportedInterfaces"][0]["url"] == "https://provider.example/a2a/acme"
        refused = httpx.post(base + "/a2a/acme/message:send", content=b"{")
        assert refused.status_code == 401


def test_deployment_sample_serves_the_provider_of_a_toml_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pactmw.toml").write_text(
        'base_url = "https://provider.example"\n'
        'audience = "https://provider.example/a2a"\n'
        'store = "memory://"\n'
        "[brands.acme]\n"
        'name = "Acme Support"\n'
        'handler = "examples.bots:order_bot"\n'
    )
    monkeypatch.chdir(tmp_path)  # the sample reads pactmw.toml from the working directory
    monkeypatch.syspath_prepend(str(REPO))  # for the handler's import path
    with uvicorn_server(run_sample("deployment_asgi")["app"]) as base:
        card = httpx.get(base + "/a2a/acme/.well-known/agent-card.json")
        assert card.status_code == 200
        assert card.json()["name"] == "Acme Support"
        assert httpx.post(base + "/a2a/acme/message:send", content=b"{}").status_code == 401


def test_bot_sample_answers_a_turn() -> None:
    order_bot = run_sample("bot")["order_bot"]
    assert order_bot(SimpleNamespace(text="Where is A-1001?")) == "You said: Where is A-1001?"


def test_delegated_tools_sample_names_its_scopes() -> None:
    sample = run_sample("delegated_tools")
    assert sample["order_tools"].scopes == frozenset({"orders:read", "orders:cancel"})
    assert len(sample["order_tools"]) == 2


def test_the_cli_page_delegated_bot_steps_up_only_for_orders() -> None:
    # docs/cli.md's bot for `pactmw check --delegated`: the identity checks' plain messages get
    # a reply without the account, the check's --ask (about orders) needs orders:read.
    sample = run_sample("serve_delegated_bot")
    assert sample["order_tools"].scopes == frozenset({"orders:read"})
    order_bot = sample["order_bot"]

    def no_account() -> list[str]:
        raise AssertionError("a plain message used the account")

    greeting = SimpleNamespace(text="Hello, this is pactmw check.", tools=no_account)
    assert order_bot(greeting) == "You said: Hello, this is pactmw check."
    ask = SimpleNamespace(
        text="Can you show my orders and my account?",
        tools=SimpleNamespace(list_orders=lambda: ["A-1001"]),
    )
    assert order_bot(ask) == "Your orders: A-1001"


def test_the_client_page_samples_pass_mypy_strict(tmp_path: Path) -> None:
    # A personal agent's developer types their code: every sample of docs/client.md (most
    # need a real Provider or broker, so they are not run) must type-check as written, with
    # the pactmw under test. The Parafé sample once used names it never defined.
    page = (REPO / "docs" / "client.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", page, re.S | re.M)
    assert len(blocks) >= 4, page
    files = []
    for number, code in enumerate(blocks):
        files.append(tmp_path / f"client_sample_{number}.py")
        files[-1].write_text(code, encoding="utf-8")
    assert_mypy_strict(files, tmp_path)


def assert_mypy_strict(files: list[Path], tmp_path: Path) -> None:
    """`mypy --strict` passes on `files`, with the pactmw under test and no configuration of
    the repository's (the reader's defaults)."""
    import pactmw

    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *map(str, files)],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(Path(pactmw.__file__).parents[1])},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_poppy_flask_sample_passes_mypy_strict_and_imports(tmp_path: Path) -> None:
    # A Brand's API behind `poppy_session_required`, as docs/poppy.md shows it for Flask: it
    # type-checks as written (`current_poppy_caller()` is Optional), and runs.
    sample = SAMPLES["poppy_flask"]
    file = tmp_path / "poppy_flask.py"
    file.write_text(sample.code, encoding="utf-8")
    assert_mypy_strict([file], tmp_path)
    app = run_sample("poppy_flask")["app"]
    assert "/api/orders" in {rule.rule for rule in app.url_map.iter_rules()}


def test_authorization_details_sample_checks_and_describes_an_entry() -> None:
    sample = run_sample("authorization_details")
    rebook, entry = sample["flight_rebook"], {
        "type": sample["REBOOK"], "identifier": "K7PQ2M", "actions": ["rebook"],
        "target_flight": "SK 318",
    }  # fmt: skip
    assert rebook.problem(entry) is None
    assert rebook.problem({**entry, "target_flight": "anywhere"}) is not None
    assert rebook.describe(entry) == "Only reservation K7PQ2M, to flight SK 318"
    assert sample["delegation"].tools is sample["sky_tools"]


def test_model_tools_sample_has_an_identity_and_an_account_tool() -> None:
    shop_tools = run_sample("model_tools")["shop_tools"]
    assert len(shop_tools) == 2
    assert shop_tools.scopes == frozenset({"orders:cancel"})


def test_parafe_bot_sample_answers_without_the_extension() -> None:
    support_bot = run_sample("parafe_bot")["support_bot"]
    turn = SimpleNamespace(text="buy a lamp", parafe=SimpleNamespace(enabled=False))
    assert support_bot(turn) == "How can I help?"


def test_parafe_ap2_bot_sample_answers_without_a_mandate() -> None:
    shop_bot = run_sample("parafe_ap2_bot")["shop_bot"]
    turn = SimpleNamespace(text="buy a lamp", parafe=SimpleNamespace(ap2=None))
    assert shop_bot(turn) == "How can I help?"
