"""A Django account that is disabled, deleted or changes its password loses its grants
(issue "At home in Django and Flask", signals), in a real Django with django.contrib.auth: on
sqlite with the memory store, and on PostgreSQL with the grants in the site's own database
(`store = "django"`), where the rolled-back change must leave them alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.pg import PostgresServer, postgres_server_fixture
from tests.support.servers import REPO

postgres_server = postgres_server_fixture(scope="module")

SCRIPT = r"""
import json, os, sys, time
import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="test-only",
    INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "pactmw.adapters.django"],
    DATABASES={"default": json.loads(os.environ["DATABASE"]), **json.loads(os.environ["MORE"])},
    PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],  # fast, test only
    PACTMW={
        "base_url": "https://shop.example",
        "audience": "https://shop.example/a2a",
        "agents": [],
        "store": os.environ["STORE"],
        "signing_keys": [os.environ["SIGNING_KEY"]],
        "brands": {"shop": {"handler": "examples.bots:order_bot", "delegation": {
            "scopes": {"orders:read": "See your orders"}, "login_url": "/login"}}},
    },
)
django.setup()

from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from pactmw.adapters.django import get_provider

ACCOUNTS = os.environ["ACCOUNTS"]  # the database the users live in
call_command("migrate", verbosity=0)
if ACCOUNTS != "default":
    call_command("migrate", database=ACCOUNTS, verbosity=0)
store = get_provider().store
now = time.time()

def grant_for(user):
    return store.upsert_grant(grant_id=f"g-{user.pk}", brand_id="shop", account=str(user.pk),
        client_id="https://pa.example", pa_sub="s", scopes=("orders:read",), now=now,
        expires_at=now + 3600).grant_id

def revoked(grant_id):
    return store.get_grant(grant_id).revoked_at is not None

users = {name: User.objects.db_manager(ACCOUNTS).create_user(name, password="pw-1") for name in
         ("disabled", "deleted", "password", "renamed", "rolled_back")}
grants = {name: grant_for(user) for name, user in users.items()}

users["disabled"].is_active = False
users["disabled"].save()
users["deleted"].delete()
users["password"].set_password("pw-2")
users["password"].save()
users["renamed"].first_name = "Renamed"
users["renamed"].save()
try:
    with transaction.atomic(using=ACCOUNTS):
        users["rolled_back"].is_active = False
        users["rolled_back"].save()
        raise RuntimeError("roll back")
except RuntimeError:
    pass
print(json.dumps({name: revoked(grant_id) for name, grant_id in grants.items()}))
"""


@pytest.mark.parametrize(
    "where", ["sqlite-memory-store", "postgres-django-store", "sqlite-users-in-another-database"]
)
def test_disabling_deleting_or_a_new_password_revokes_the_accounts_grants(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    from pactmw.core.jwk import generate_private_jwk

    database: dict[str, object] = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    store = "memory://"
    # Users in a database of their own, as a site routes them: the user model's reads, the
    # writes' transaction and the rollback are that database's (the signals read the user
    # before the change from the default database, and so revoked nothing there).
    accounts = "accounts" if where.endswith("another-database") else "default"
    more = {"accounts": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    server: PostgresServer | None = None
    if where.startswith("postgres"):
        from psycopg.conninfo import conninfo_to_dict

        server = request.getfixturevalue("postgres_server")
        params = conninfo_to_dict(server.create_database())
        database = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": params["dbname"],
            "USER": params.get("user", ""),
            "HOST": params.get("host", ""),
            "PORT": params.get("port", ""),
        }
        store = "django"

    key_file = tmp_path / "signing.jwk"
    key_file.write_text(json.dumps(generate_private_jwk("ES256").to_dict()))
    env = {
        **os.environ,
        "SIGNING_KEY": str(key_file),
        "DATABASE": json.dumps(database),
        "STORE": store,
        "ACCOUNTS": accounts,
        "MORE": json.dumps(more if accounts != "default" else {}),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        if server is not None:
            server.drop_database(str(database["NAME"]))
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {
        "disabled": True,
        "deleted": True,
        "password": True,
        "renamed": False,  # other changes keep the grants
        "rolled_back": False,  # revocation waits for the commit
    }
