"""`manage.py check --deploy` warns (pactmw.W009) when `PACTMW["base_url"]`, what the Agent
Cards advertise and the consent pages' links start with, is http://: agents would send their
JWTs and the person's delegation tokens in clear, and the person would sign in and consent
over it. Django's own deployment checks say the same of its cookies and redirects; a plain
`manage.py check` (development, runserver) says nothing of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.adapters.commands import django_check, django_deploy_check
from tests.adapters.tokens import AgentKey, jwks

pytestmark = pytest.mark.timeout(120)


def _said(tmp_path: Path, base_url: str, *, deploy: bool) -> str:
    key = AgentKey.generate("ES256", "k1")
    settings: dict[str, Any] = {
        "base_url": base_url,
        "audience": f"{base_url}/a2a",
        "agents": [{"issuer": "https://pa.example", "jwks": jwks(key)}],
        "store": "memory://",
        "brands": {"acme": {"name": "Acme", "handler": "examples.bots:order_bot"}},
    }
    check = django_deploy_check if deploy else django_check
    done = check(
        settings,
        tmp_path / "pactmw.json",
        DJANGO_SETTINGS_MODULE="pactmw_testsite.contract_settings",
    )
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, said  # a warning: the site still starts
    return said


def test_an_http_base_url_is_warned_by_the_deployment_checks(tmp_path: Path) -> None:
    said = _said(tmp_path, "http://shop.example", deploy=True)
    assert "pactmw.W009" in said, said
    assert "settings.PACTMW['base_url'] is 'http://shop.example'" in said, said
    assert "https://" in said.split("pactmw.W009")[1], said  # the hint says what to write


def test_an_https_base_url_passes_the_deployment_checks(tmp_path: Path) -> None:
    said = _said(tmp_path, "https://shop.example", deploy=True)
    assert "pactmw." not in said, said


def test_an_http_base_url_is_fine_in_development(tmp_path: Path) -> None:
    said = _said(tmp_path, "http://127.0.0.1:8000", deploy=False)
    assert "pactmw." not in said, said
