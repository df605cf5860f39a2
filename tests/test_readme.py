"""The code samples of README.md and docs/ run as written (each marked
`<!-- readme-test: NAME -->`, found by tests/support/samples.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.samples import find_samples
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
        "deployment_asgi",
    }  # fmt: skip


@pytest.mark.parametrize("name", ["direct", "pypi_direct"])
def test_direct_import_sample(name: str) -> None:
    who_is_calling = run_sample(name)["who_is_calling"]
    assert who_is_calling(None) == "401 (missing_token)"
    assert who_is_calling("Bearer not-a-jwt") == "401 (malformed_token)"


def assert_guarded(base: str, protected: str, open_path: str) -> None:
    refused = httpx.get(base + protected)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
    assert refused.content == b""
    assert httpx.get(base + open_path).status_code == 200


def test_starlette_sample_guards_the_prefix_only() -> None:
    with uvicorn_server(run_sample("starlette")["app"]) as base:
        assert_guarded(base, "/a2a/whoami", "/")


def test_fastapi_sample_answers_the_challenge_and_documents_the_scheme() -> None:
    with uvicorn_server(run_sample("fastapi")["app"]) as base:
        refused = httpx.get(base + "/whoami")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
        assert refused.content == b""
        schemes = httpx.get(base + "/openapi.json").json()["components"]["securitySchemes"]
        assert schemes["PersonalAgent"]["scheme"] == "bearer"


def test_flask_sample_guards_the_prefix_only() -> None:
    with werkzeug_server(run_sample("flask")["app"]) as base:
        assert_guarded(base, "/a2a/whoami", "/")


def test_wsgi_sample_guards_the_prefix_only() -> None:
    with werkzeug_server(run_sample("wsgi")["application"]) as base:
        assert_guarded(base, "/a2a/anything", "/")


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


def test_parafe_ap2_bot_sample_answers_without_a_mandate() -> None:
    shop_bot = run_sample("parafe_ap2_bot")["shop_bot"]
    turn = SimpleNamespace(text="buy a lamp", parafe=SimpleNamespace(ap2=None))
    assert shop_bot(turn) == "How can I help?"
