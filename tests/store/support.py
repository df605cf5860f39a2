"""Helpers shared by the store suites: the backends under test and a thread starting gun."""

from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import psycopg
import pytest
from attrs import frozen

from pactmw.store import Store, open_store
from pactmw.store import postgres as pg_backend
from pactmw.store import sqlite as sqlite_backend

T = TypeVar("T")


@frozen
class Backend:
    """How to open (and reopen) one backend's store on the same data."""

    name: str
    url: str

    def open(self) -> Store:
        return open_store(self.url)


def open_backend(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh memory, sqlite or PostgreSQL backend (its own database), dropped after use."""
    if name == "memory":
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
