"""Helpers shared by the store suites: the backends under test and a thread starting gun."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import psycopg
import pytest
from attrs import frozen

from pactmw.store import Store, open_store
from pactmw.store import postgres as pg_backend
from pactmw.store import sqlite as sqlite_backend
from tests.support.servers import REPO

T = TypeVar("T")


@frozen
class Backend:
    """How to open (and reopen) one backend's store on the same data."""

    name: str
    url: str

    def open(self) -> Store:
        return open_store(self.url)


#: The backends whose data a second `open()` finds again.
PERSISTENT = ("sqlite", "postgres", "django-sqlite", "django-postgres")
ALL_BACKENDS = ("memory", *PERSISTENT)


def open_backend(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Generator[Backend, None, None]:
    """A fresh backend (its own database), dropped after use: memory, sqlite, postgres, or
    the Django store on a sqlite or PostgreSQL database Django's migrations created."""
    if name.startswith("django-"):
        yield from django_backend(name, request, tmp_path)
    elif name == "memory":
        yield Backend(name, "memory://")
    elif name == "sqlite":
        yield Backend(name, f"sqlite:///{tmp_path}/state/store.db")
    else:
        # Looked up lazily so that runs without PostgreSQL tests never start the server.
        server = request.getfixturevalue("postgres_server")
        dsn = server.create_database()
        yield Backend(name, dsn)
        server.drop_database(dsn.rsplit("/", 1)[1])


def backend_module(backend: Backend) -> ModuleType:
    """The module of a persistent backend (its `MIGRATIONS`)."""
    return sqlite_backend if backend.name == "sqlite" else pg_backend


def scalar(backend: Backend, query: str) -> int:
    """The one integer `query` reads from a persistent backend's database, read directly."""
    if backend.name == "sqlite":
        with sqlite3.connect(backend.url.removeprefix("sqlite:///")) as conn:
            return int(conn.execute(query).fetchone()[0])
    with psycopg.connect(backend.url) as pconn:
        row = pconn.execute(query).fetchone()
        assert row is not None
        return int(row[0])


def schema_version(backend: Backend) -> int:
    """The schema version a persistent backend's database records."""
    return scalar(backend, "SELECT version FROM pactmw_schema")


def all_at_once(n: int, fn: Callable[[int], T]) -> list[T]:
    """Run fn(0..n-1) on n threads released together; return results, re-raising errors."""
    barrier = threading.Barrier(n)
    results: list[T | None] = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = fn(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    if errors:
        raise errors[0]
    assert all(not t.is_alive() for t in threads)
    return [r for r in results if r is not None]


# The start every racer shares, once it has read `url`, `work` and `index`: open the store
# (connected and migrated), say it is ready, and wait for the go (at most 30 s).
_RACE_START = """
import sys, time
from pathlib import Path
from pactmw.store import open_store

store = open_store(url)
store.agent_enabled("warm-up")  # connect (and migrate) before the race starts
Path(work, f"ready-{index}").touch()
deadline = time.monotonic() + 30
while not Path(work, "go").exists():
    if time.monotonic() > deadline:
        sys.exit("no go signal")
    time.sleep(0.001)
"""


def racer_script(arguments: str, race: str) -> str:
    """A script for `processes_at_once`: it reads `arguments` (names, comma-separated, among
    them `url`, `work` and `index`) from its argv, opens `store` and waits for the go as
    `processes_at_once` expects, then runs `race`."""
    count = len(arguments.split(","))
    return f"import sys\n{arguments} = sys.argv[1:{count + 1}]\n{_RACE_START}{race}"


def processes_at_once(argvs: Sequence[Sequence[str]], work: Path) -> list[str]:
    """Run one process per argv, released together; return what each printed (stripped).

    Each process writes `work/ready-N` once it has connected, then waits for `work/go`, so
    their operations truly overlap. A process that exits early, or fails, fails the test.
    """
    procs = [
        subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for argv in argvs
    ]
    try:
        deadline = time.monotonic() + 30
        while len(list(work.glob("ready-*"))) < len(procs):
            dead = [p for p in procs if p.poll() is not None]
            assert not dead, dead[0].communicate()[1]
            assert time.monotonic() < deadline, "racers did not get ready"
            time.sleep(0.01)
        (work / "go").touch()
        outputs = [p.communicate(timeout=30) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    return [out.strip() for out, _ in outputs]


def configure_django() -> None:
    """Set Django up in this process once, with pactmw's app and no database of its own;
    each Django backend adds its own `DATABASES` entry (see `django_database`)."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            INSTALLED_APPS=["pactmw.adapters.django"],
            DATABASES={},
            DEBUG=True,  # Django then logs every query, formatting it with its parameters
            USE_TZ=True,
            SECRET_KEY="test-only",
        )
        django.setup()


def django_database(alias: str, database: dict[str, object]) -> None:
    """Add `DATABASES[alias]` at runtime (tests only: Django reads DATABASES once) and create
    pactmw's tables in it with Django's own `migrate`."""
    from django.core.management import call_command
    from django.db import DEFAULT_DB_ALIAS, connections

    configure_django()
    filled = connections.configure_settings(
        {DEFAULT_DB_ALIAS: connections.settings[DEFAULT_DB_ALIAS], alias: database}
    )
    connections.settings[alias] = filled[alias]
    call_command("migrate", "pactmw", database=alias, verbosity=0)
    connections[alias].close()


def forget_django_database(alias: str) -> None:
    """Close this thread's connection to `alias` and drop the entry."""
    from django.db import connections

    connections[alias].close()
    del connections[alias]
    del connections.settings[alias]


def postgres_settings(dsn: str) -> dict[str, object]:
    """A Django `DATABASES` entry for a libpq DSN."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(dsn)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": params["dbname"],
        "USER": params.get("user", ""),
        "PASSWORD": params.get("password", ""),
        "HOST": params.get("host", ""),
        "PORT": params.get("port", ""),
    }


def django_backend(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The Django store on a fresh sqlite file or PostgreSQL database, migrated by Django."""
    alias = f"pactmw_{uuid.uuid4().hex[:12]}"
    server = None
    if name == "django-sqlite":
        (tmp_path / "django").mkdir(exist_ok=True)
        database: dict[str, object] = {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(tmp_path / "django" / "site.db"),
        }
    else:
        server = request.getfixturevalue("postgres_server")
        dsn = server.create_database()
        database = postgres_settings(dsn)
    django_database(alias, database)
    try:
        yield Backend(name, f"django:{alias}")
    finally:
        forget_django_database(alias)
        if server is not None:
            server.drop_database(str(database["NAME"]))


def process_url(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A store URL that processes this test starts can open too: for a Django backend, the
    environment they inherit names test settings holding its database (django_settings.py)."""
    backends = open_backend(name, request, tmp_path)
    backend = next(backends)
    try:
        if name.startswith("django-"):
            from django.db import connections

            alias = backend.url.partition(":")[2]
            keys = ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT")
            database = {key: connections.settings[alias][key] for key in keys}
            monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "tests.store.django_settings")
            monkeypatch.setenv(
                "PACTMW_TEST_DATABASES", json.dumps({"default": database, alias: database})
            )
            monkeypatch.setenv(
                "PYTHONPATH",
                os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
            )
        yield backend.url
    finally:
        backends.close()
