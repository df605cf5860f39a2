"""The README's code samples run as written (each marked `<!-- readme-test: NAME -->`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.servers import uvicorn_server, werkzeug_server

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
SAMPLES = dict(re.findall(r"<!-- readme-test: (\w+) -->\n```python\n(.*?)```", README, re.S))


def run_sample(name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"readme_{name}"}
    exec(compile(SAMPLES[name], f"README.md:{name}", "exec"), namespace)
    return namespace


def test_every_marked_sample_is_found() -> None:
    assert set(SAMPLES) == {"direct", "starlette", "fastapi", "flask", "wsgi", "provider"}


def test_direct_import_sample() -> None:
    who_is_calling = run_sample("direct")["who_is_calling"]
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
