"""`pactmw check` passes against our own Providers: `pactmw serve` (two Brands, cross-Brand
checks included) and both example shops (Flask, Django), each a real server process, the
checker a real subprocess with the key file `pactmw keygen` wrote."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pactmw.check import names
from tests.check.support import (
    IDENTITY,
    PYTHON_M,
    Agent,
    card_url,
    check,
    check_json,
    served_provider,
    text_lines,
)
from tests.support.jwks_server import JwksServer, Mode

Argv = Callable[[Path, int], list[str]]


def _serve(config: Path, port: int) -> list[str]:
    return [*PYTHON_M, "serve", "--config", str(config), "--port", str(port),
            "--log-level", "warning"]  # fmt: skip


def test_check_passes_against_pactmw_serve(tmp_path: Path, agent: Agent) -> None:
    with served_provider(tmp_path, agent, _serve, handler="pactmw.demo:demo_bot") as base_url:
        result = check(agent, card_url(base_url), "--other-brand", card_url(base_url, "globex"))
        assert result.returncode == 0, result.stdout + result.stderr
        checks, summary = text_lines(result.stdout)
        assert [line for line in checks if not line.startswith("PASS  ")] == []
        assert summary == f"{len(checks)} passed, 0 failed"
        ran = {line[len("PASS  ") :] for line in checks}
        assert ran == IDENTITY | {names.FOREIGN_BRAND, names.TOKEN_REUSE}
        assert result.stderr.startswith(f"checking {card_url(base_url)}")

        # --json, one Brand: the same checks but the cross-Brand ones.
        outcome = check_json(agent, card_url(base_url))
        assert outcome.returncode == 0
        assert outcome.failed == {}
        assert set(outcome.passed) == IDENTITY | {names.TOKEN_REUSE_ONE_BRAND}
        assert outcome.document["card_url"] == card_url(base_url)

        # From the Brand's own domain, whose well-known card redirects to the Provider's.
        with JwksServer() as brand_site:
            brand_site.redirect_location = card_url(base_url)
            brand_site.mode = Mode.REDIRECT
            outcome = check_json(agent, brand_site.base_url)
        assert outcome.returncode == 0, outcome.failed
        assert outcome.document["card_url"] == brand_site.base_url + "/.well-known/agent-card.json"


def test_check_fails_when_the_provider_is_down(agent: Agent) -> None:
    from tests.support.net import free_port

    result = check(agent, card_url(f"http://127.0.0.1:{free_port()}"), "--timeout", "2")
    assert result.returncode == 1
    checks, summary = text_lines(result.stdout)
    assert summary == "0 passed, 1 failed"
    assert checks[0].startswith(f"FAIL  {names.CARD}: expected ")
    assert "cannot connect" in checks[0]


def test_check_usage_errors(tmp_path: Path, agent: Agent) -> None:
    missing = check(
        Agent(tmp_path / "nope.jwk", agent.jwks_file, agent.issuer, agent.jwks_uri),
        "http://127.0.0.1:9/.well-known/agent-card.json",
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("pactmw check: error: cannot read")
    public = check(
        Agent(agent.jwks_file, agent.jwks_file, agent.issuer, agent.jwks_uri),
        "http://127.0.0.1:9/.well-known/agent-card.json",
    )
    assert public.returncode == 2
    assert "a JWKS (the public keys to publish), not a private JWK" in public.stderr
    clear = check(agent, "http://shop.example")
    assert clear.returncode == 2
    assert "plain http is allowed only to loopback hosts" in clear.stderr
    alone = check(agent, "http://127.0.0.1:9", "--ask", "hello")
    assert alone.returncode == 2
    assert "go with --delegated" in alone.stderr


EXAMPLES: dict[str, tuple[Argv, str, dict[str, str]]] = {
    "flask": (
        lambda config, port: [sys.executable, "examples/flask_app/app.py", "--port", str(port)],
        "examples.flask_app.app:support_bot",
        {},
    ),
    "django": (
        lambda config, port: [
            sys.executable,
            "examples/django_app/manage.py",
            "runserver",
            f"127.0.0.1:{port}",
            "--noreload",
        ],
        "shop.bot:support_bot",
        {"DJANGO_SETTINGS_MODULE": "shopsite.settings"},
    ),
}


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_check_passes_against_the_examples(tmp_path: Path, agent: Agent, example: str) -> None:
    argv, handler, env = EXAMPLES[example]
    env = {**env, "SHOP_DATABASE": str(tmp_path / "shop.sqlite3")}
    with served_provider(tmp_path, agent, argv, handler=handler, env=env) as base_url:
        outcome = check_json(
            agent, card_url(base_url), "--other-brand", card_url(base_url, "globex")
        )
    assert outcome.failed == {}, outcome.failed
    assert outcome.returncode == 0
    assert set(outcome.passed) == IDENTITY | {names.FOREIGN_BRAND, names.TOKEN_REUSE}
