"""`manage.py check` reports a `PACTMW["store"]` that is not a store URL at startup (E001,
naming the key), as `init_app` refuses it in Flask, rather than a site that starts and
answers 503 on pactmw's paths from its first request."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.commands import django_check
from tests.adapters.tokens import AgentKey, jwks
from tests.support.parties import AUDIENCE

pytestmark = pytest.mark.timeout(120)


def _check(tmp_path: Path, store: str) -> subprocess.CompletedProcess[str]:
    key = AgentKey.generate("ES256", "k1")
    settings: dict[str, Any] = {
        "base_url": "https://shop.example",
        "audience": AUDIENCE,
        "agents": [{"issuer": "https://pa.example", "jwks": jwks(key)}],
        "store": store,
        "brands": {"acme": {"name": "Acme", "handler": "examples.bots:order_bot"}},
    }
    return django_check(settings, tmp_path / "pactmw.json")


@pytest.mark.parametrize(
    ("store", "said"),
    [
        ("sqlite://pactmw.db", "sqlite store URL needs three slashes"),
        ("django:", "django store must be 'django' or 'django:ALIAS'"),
        ("mysql://user:hunter2@db.example/pactmw", "unsupported store URL scheme 'mysql'"),
    ],
)
def test_a_store_url_that_does_not_parse_is_reported_at_startup(
    tmp_path: Path, store: str, said: str
) -> None:
    done = _check(tmp_path, store)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "pactmw.E001" in done.stderr
    assert f"settings.PACTMW is invalid: store: {said}" in done.stderr
    assert "hunter2" not in done.stdout + done.stderr  # a URL is never repeated


def test_a_good_store_url_passes(tmp_path: Path) -> None:
    done = _check(tmp_path, f"sqlite:///{tmp_path / 'pactmw.db'}")
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout
