"""The `audit` setting: a Provider built from settings (Flask's `app.config["PACTMW"]`,
Django's `settings.PACTMW`, the TOML of `pactmw serve` and its commands) hands the delegation
audit events to the hook it names, as `Provider(audit=...)` does in code.

Found in a Django new-user trial: such a site could only read the events from the
`pactmw.audit` logger, not keep them in its own database as proof of what was done. Each
front-end is run for real; the hook (tests.support.audit_sink) writes each event to a file,
so what a server's or a command's process heard is read here.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.config import ConfigError
from pactmw.core.jwk import generate_private_jwk
from pactmw.provider import Provider, ProviderSettings, card_url
from tests.adapters.commands import django_check, django_environment
from tests.support import audit_sink
from tests.support.cli import PYTHON_M, environment, run
from tests.support.net import free_port
from tests.support.page_sites import BRAND, site_settings
from tests.support.parties import ISSUER
from tests.support.servers import REPO, django_server, werkzeug_server

AGENT_KEY = generate_private_jwk("ES256", kid="pa-audit")
RECORD = "tests.support.audit_sink:record"
#: What the tests approve, then revoke.
GRANT = {"account": "jane", "agent_issuer": ISSUER, "agent_sub": "user-1"}


def _settings(workdir: Path, audit: Any = RECORD, base: str | None = None) -> dict[str, Any]:
    agents = [{"issuer": ISSUER, "jwks": {"keys": [AGENT_KEY.public.to_dict()]}}]
    settings = site_settings(workdir, base or "https://shop.example", agents=agents)
    return {**settings, "audit": audit}


def _assert_approved_then_revoked(events: list[dict[str, Any]], grant_id: str) -> None:
    assert events == [
        {
            "name": "agent.delegation_approved",
            "brand_id": BRAND,
            "issuer": ISSUER,
            "account": "jane",
            "grant_id": grant_id,
            "scopes": ["orders:read"],
            "reason": "",
        },
        {
            "name": "agent.grant_revoked",
            "brand_id": BRAND,
            "issuer": ISSUER,
            "account": "jane",
            "grant_id": grant_id,
            "scopes": [],
            "reason": "revoked",
        },
    ]


# -- Flask: app.config["PACTMW"] ------------------------------------------------------------


def _flask_app(settings: dict[str, Any]) -> Any:
    from flask import Flask

    from pactmw.adapters.flask import Pactmw

    app = Flask(__name__)
    app.config["PACTMW"] = settings
    Pactmw(app)
    return app


def _flask_provider(app: Any) -> Provider:
    """The app's Provider, as the app's own code gets it."""
    from pactmw.adapters.flask import get_provider

    with app.app_context():
        return get_provider()


def test_flask_hands_the_events_to_the_hook_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = tmp_path / "audit.jsonl"
    monkeypatch.setenv(audit_sink.ENV, str(sink))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    app = _flask_app(_settings(tmp_path, base=base))
    provider = _flask_provider(app)
    with werkzeug_server(app, port=port) as served:
        # The app serves the Provider it built with the hook.
        assert httpx.get(card_url(served, BRAND)).status_code == 200
        granted = provider.grant_delegation(BRAND, scopes=["orders:read"], **GRANT)
        assert provider.revoke_grant(granted.grant_id)
    provider.close()
    _assert_approved_then_revoked(audit_sink.read(sink), granted.grant_id)


def test_flask_a_failing_hook_neither_stops_the_approval_nor_hides_the_event(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pactmw")
    app = _flask_app(_settings(tmp_path, audit="tests.support.audit_sink:explode"))
    provider = _flask_provider(app)
    granted = provider.grant_delegation(BRAND, scopes=["orders:read"], **GRANT)
    # The approval stands: recorded and live.
    grant = provider.store.get_grant(granted.grant_id)
    assert grant is not None
    assert grant.revoked_at is None
    assert provider.revoke_grant(granted.grant_id)
    provider.close()
    messages = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    for name in ("agent.delegation_approved", "agent.grant_revoked"):
        # The event is logged before the hook runs, and the hook's failure says which event.
        assert any(
            logger == "pactmw.audit" and m.startswith(name) and granted.grant_id in m
            for logger, _, m in messages
        ), messages
        failed = f"audit hook failed for {name} brand={BRAND} grant={granted.grant_id}"
        assert ("pactmw.delegation", "ERROR", failed) in messages


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("tests.support.no_such_module:record", "cannot be imported"),
        ("tests.support.audit_sink:NOT_CALLABLE", "is not callable"),
        ("record", "must look like 'package.module:name'"),
        (42, "must be a function or an import path"),
        # Called, an async def only makes a coroutine: the event would be lost, unawaited.
        ("tests.support.audit_sink:record_later", "must be a plain function, not async def"),
    ],
)
def test_flask_a_wrong_hook_stops_init_app_naming_the_key(
    tmp_path: Path, value: Any, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        _flask_app(_settings(tmp_path, audit=value))
    assert str(raised.value).startswith("audit")
    assert problem in str(raised.value)


def test_a_python_settings_dict_takes_the_function_itself(tmp_path: Path) -> None:
    heard: list[Any] = []
    settings = ProviderSettings.from_mapping(_settings(tmp_path, audit=heard.append))
    provider = Provider.from_settings(settings)
    granted = provider.grant_delegation(BRAND, scopes=["orders:read"], **GRANT)
    provider.close()
    assert [(e.name, e.grant_id) for e in heard] == [
        ("agent.delegation_approved", granted.grant_id)
    ]


# -- Django: settings.PACTMW ----------------------------------------------------------------

GRANT_AND_REVOKE = f"""
from pactmw.adapters.django import get_provider
provider = get_provider()
granted = provider.grant_delegation({BRAND!r}, scopes=["orders:read"], **{GRANT!r})
assert provider.revoke_grant(granted.grant_id)
print(granted.grant_id)
"""


def test_django_hands_the_events_to_the_hook_it_names(tmp_path: Path) -> None:
    sink = tmp_path / "audit.jsonl"
    port = free_port()
    settings = _settings(tmp_path, base=f"http://127.0.0.1:{port}")
    # The test site that routes the Provider (a2a_urlpatterns), with no templates of its own.
    site = {
        "DJANGO_SETTINGS_MODULE": "pactmw_testsite.pages_settings",
        "PACTMW_TEST_TEMPLATES": str(tmp_path),
        audit_sink.ENV: str(sink),
    }
    with django_server(
        settings,
        asgi=False,
        settings=site["DJANGO_SETTINGS_MODULE"],
        workdir=tmp_path,
        name="audit-django",
        extra_env=site,
        port=port,
    ) as served:
        assert httpx.get(card_url(served, BRAND)).status_code == 200
        # The site's Provider, as its own code (a view, a command, the shell) gets it.
        done = subprocess.run(
            [sys.executable, "-m", "django", "shell", "-c", GRANT_AND_REVOKE],
            env={**django_environment(tmp_path / "audit-django.json"), **site},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    # Django 5.2's shell says first what it imported; the grant id is the last line.
    _assert_approved_then_revoked(audit_sink.read(sink), done.stdout.splitlines()[-1])


def test_django_check_names_a_wrong_hook(tmp_path: Path) -> None:
    settings = _settings(tmp_path, audit="tests.support.audit_sink:NOT_CALLABLE")
    done = django_check(settings, tmp_path / "bad.json")
    assert done.returncode != 0
    assert "pactmw.E001" in done.stderr
    assert "audit 'tests.support.audit_sink:NOT_CALLABLE' is not callable" in done.stderr


# -- pactmw serve's TOML, and its commands ---------------------------------------------------


def _toml(workdir: Path, audit: str) -> Path:
    settings = _settings(workdir)
    brand = settings["brands"][BRAND]
    key = AGENT_KEY.public.to_dict()
    lines = [
        f'audit = "{audit}"',
        f'base_url = "{settings["base_url"]}"',
        f'audience = "{settings["audience"]}"',
        f'store = "{settings["store"]}"',
        f'signing_keys = ["{settings["signing_keys"][0]}"]',
        "[[agents]]",
        f'issuer = "{ISSUER}"',
        "jwks = { keys = [{ "
        + ", ".join(f'{name} = "{value}"' for name, value in key.items())
        + " }] }",
        f"[brands.{BRAND}]",
        f'handler = "{brand["handler"]}"',
        f"[brands.{BRAND}.delegation]",
        'login_url = "/login"',
        f"[brands.{BRAND}.delegation.scopes]",
        '"orders:read" = "See your orders"',
    ]
    path = workdir / "pactmw.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_serve_config_hands_the_events_to_the_hook_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pactmw.cli._admin import load_settings

    sink = tmp_path / "audit.jsonl"
    monkeypatch.setenv(audit_sink.ENV, str(sink))
    config = _toml(tmp_path, RECORD)
    # The Provider `pactmw serve` builds from the file approves...
    provider = Provider.from_settings(load_settings(str(config)))
    granted = provider.grant_delegation(BRAND, scopes=["orders:read"], **GRANT)
    provider.close()
    # ... and the operator's `pactmw grants revoke`, another process, is heard too.
    revoke = ["grants", "revoke", granted.grant_id, "--config", str(config)]
    done = run([*PYTHON_M, *revoke], env=environment(**{audit_sink.ENV: str(sink)}))
    assert done.returncode == 0, done.stderr
    _assert_approved_then_revoked(audit_sink.read(sink), granted.grant_id)


def test_serve_refuses_a_wrong_hook_at_startup_naming_the_key(tmp_path: Path) -> None:
    config = _toml(tmp_path, "tests.support.audit_sink:nothing_here")
    done = run([*PYTHON_M, "serve", "--config", str(config), "--port", "0"], env=environment())
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "audit 'tests.support.audit_sink:nothing_here' cannot be imported" in done.stderr
