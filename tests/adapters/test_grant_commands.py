"""`manage.py pactmw grants` and `flask pactmw grants`: list and revoke delegation grants with
the site's own settings (issue "At home in Django and Flask", management commands)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from pactmw.adapters import flask as flask_adapter
from pactmw.store import open_store
from tests.adapters.commands import manage
from tests.adapters.contract_harness import Harness, config, harness


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with harness(tmp_path_factory.mktemp("commands")) as started:
        yield started


def _grant(settings: dict[str, Any], grant_id: str, account: str) -> None:
    store = open_store(str(settings["store"]))
    now = time.time()
    try:
        store.upsert_grant(
            grant_id=grant_id,
            brand_id="acme",
            account=account,
            client_id="https://pa.example",
            pa_sub="user-42",
            scopes=("orders:read",),
            now=now,
            expires_at=now + 3600,
        )
    finally:
        store.close()


def _manage(
    settings: dict[str, Any], workdir: Path, *argv: str
) -> subprocess.CompletedProcess[str]:
    return manage(settings, workdir / "django-commands.json", *argv)


def test_manage_py_pactmw_grants_lists_and_revokes(world: Harness) -> None:
    settings = config(world.workdir, "django-commands", world.agent, world.parafe)
    _grant(settings, "g-django-1", "acct-1")
    _grant(settings, "g-django-2", "acct-2")
    listed = _manage(settings, world.workdir, "grants", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split() == [
        "GRANT", "BRAND", "ACCOUNT", "AGENT", "SCOPES", "EXPIRES", "STATUS"
    ]  # fmt: skip
    assert "g-django-1" in listed.stdout
    assert "g-django-2" in listed.stdout
    revoked = _manage(settings, world.workdir, "grants", "revoke", "g-django-1")
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.startswith("revoked g-django-1 (brand acme, account acct-1")
    again = _manage(settings, world.workdir, "grants", "revoke", "g-django-1")
    assert again.returncode == 1
    assert "nothing revoked: g-django-1: already revoked at" in again.stderr
    as_json = _manage(settings, world.workdir, "grants", "list", "--all", "--json")
    statuses = {g["grant_id"]: g["status"] for g in json.loads(as_json.stdout)}
    assert statuses == {"g-django-1": "revoked", "g-django-2": "live"}
    by_account = _manage(settings, world.workdir, "grants", "revoke", "--account", "acct-2")
    assert by_account.stdout.strip() == "revoked g-django-2"
    bad = _manage(settings, world.workdir, "grants", "revoke")
    assert bad.returncode != 0
    assert "give either a GRANT_ID or --account A" in bad.stderr


def test_flask_pactmw_grants_lists_and_revokes(world: Harness) -> None:
    settings = config(world.workdir, "flask-commands", world.agent, world.parafe)
    _grant(settings, "g-flask-1", "acct-9")
    app = Flask("commands")
    app.config["PACTMW"] = settings
    flask_adapter.Pactmw(app)
    cli = app.test_cli_runner()
    listed = cli.invoke(args=["pactmw", "grants", "list"])
    assert listed.exit_code == 0, listed.output
    assert "g-flask-1" in listed.output
    revoked = cli.invoke(args=["pactmw", "grants", "revoke", "--account", "acct-9"])
    assert revoked.exit_code == 0, revoked.output
    assert revoked.output.strip() == "revoked g-flask-1"
    nothing = cli.invoke(args=["pactmw", "grants", "revoke", "g-flask-1"])
    assert nothing.exit_code == 1
    assert "nothing revoked: g-flask-1: already revoked at" in nothing.output
    empty = cli.invoke(args=["pactmw", "grants", "list"])
    assert empty.output.strip() == "no live grants (--all also lists revoked and expired ones)"
