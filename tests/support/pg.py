"""Start a real, throwaway PostgreSQL server for tests.

Use the context manager anywhere::

    from tests.support.pg import postgres_server

    with postgres_server() as server:
        dsn = server.dsn  # postgresql://postgres@127.0.0.1:PORT/pactmw_test
        other = server.create_database()  # a fresh, empty database; its DSN

or make a pytest fixture in a conftest.py (the variable name is the fixture name)::

    from tests.support.pg import postgres_server_fixture

    postgres_server = postgres_server_fixture()  # session-scoped, yields PostgresServer

The server listens on 127.0.0.1 on a free port, trusts every local connection, runs with
fsync off (test data only), and is stopped and deleted on exit. When running as root it runs
as the `postgres` OS user, since PostgreSQL refuses to run as root. Missing binaries are an
error, not a skip: CI installs them, and a silent skip would hide the PostgreSQL backend.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import psycopg
import pytest
from attrs import frozen
from psycopg import sql

from tests.support.net import free_port

__all__ = [
    "PostgresNotFound",
    "PostgresServer",
    "find_postgres_bindir",
    "log_tail",
    "pg_start",
    "pg_stop",
    "postgres_server",
    "postgres_server_fixture",
]

_SUPERUSER = "postgres"


class PostgresNotFound(RuntimeError):
    """The PostgreSQL server binaries (initdb, pg_ctl) are not installed."""


@frozen
class PostgresServer:
    """A running test server; `dsn` names the database created at start."""

    host: str
    port: int
    user: str
    dbname: str
    data_dir: Path

    @property
    def dsn(self) -> str:
        """The DSN of the database created at start."""
        return self.dsn_for(self.dbname)

    def dsn_for(self, dbname: str) -> str:
        """The DSN of another database on this server."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (a unique name by default) and return its DSN."""
        name = name or f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.dsn_for("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn_for(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, disconnecting anyone still using it."""
        with psycopg.connect(self.dsn_for("postgres"), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def find_postgres_bindir() -> Path:
    """Find the directory holding initdb and pg_ctl, or raise PostgresNotFound."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if out:
            candidates.append(Path(out))
    # Debian/Ubuntu keep the server binaries out of PATH; prefer the newest version.
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates.extend(
        Path(p) for p in sorted(versions, key=lambda p: int(Path(p).parent.name), reverse=True)
    )
    for name in ("initdb", "pg_ctl"):
        found = shutil.which(name)
        if found:
            candidates.append(Path(found).resolve().parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    raise PostgresNotFound(
        "PostgreSQL server binaries (initdb, pg_ctl) not found via pg_config --bindir, "
        "/usr/lib/postgresql/*/bin or PATH; install them (Debian/Ubuntu: apt-get install "
        "postgresql) to run the PostgreSQL tests"
    )


def _as_server_user(args: Sequence[str]) -> list[str]:
    # PostgreSQL refuses to run as root, so root hands the cluster to the postgres user.
    if os.geteuid() == 0:
        return ["runuser", "-u", _SUPERUSER, "--", *args]
    return list(args)


def _run(args: Sequence[str], *, cwd: Path, timeout: float) -> None:
    result = subprocess.run(
        _as_server_user(args),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )


def log_tail(log: Path, lines: int = 40) -> str:
    """The last `lines` lines of a log file, or a note that there is none."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _pg_ctl_start(bindir: Path, data_dir: Path, *, port: int, log: Path, timeout: float) -> None:
    base = data_dir.parent
    # fsync and friends off: the data is thrown away, and the tests run much faster.
    options = (
        f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c max_connections=300"
    )
    _run(
        [
            str(bindir / "pg_ctl"),
            "-D",
            str(data_dir),
            "-l",
            str(log),
            "-o",
            options,
            "-w",
            "-t",
            str(int(timeout)),
            "start",
        ],
        cwd=base,
        timeout=timeout + 5,
    )


def _pg_ctl_stop(bindir: Path, data_dir: Path, *, mode: str, timeout: float) -> None:
    _run(
        [str(bindir / "pg_ctl"), "-D", str(data_dir), "-m", mode, "-w", "stop"],
        cwd=data_dir.parent,
        timeout=timeout,
    )


@contextlib.contextmanager
def postgres_server(
    *, dbname: str = "pactmw_test", timeout: float = 30.0
) -> Iterator[PostgresServer]:
    """Run a throwaway PostgreSQL server for the duration of the block.

    Waits at most `timeout` seconds for it to accept connections, creates `dbname`, and on
    exit stops it (fast shutdown) and removes its files. Raises PostgresNotFound when the
    binaries are missing and RuntimeError (with the server log) when it does not start.
    """
    bindir = find_postgres_bindir()
    base = Path(tempfile.mkdtemp(prefix="pactmw-pg-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam(_SUPERUSER)
        os.chown(base, entry.pw_uid, entry.pw_gid)
    data_dir = base / "data"
    log = base / "server.log"
    port = free_port()
    started = False
    try:
        try:
            _run(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(data_dir),
                    "-U",
                    _SUPERUSER,
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                ],
                cwd=base,
                timeout=timeout,
            )
            started = True
            _pg_ctl_start(bindir, data_dir, port=port, log=log, timeout=timeout)
            server = PostgresServer(
                host="127.0.0.1", port=port, user=_SUPERUSER, dbname=dbname, data_dir=data_dir
            )
            _wait_ready(server, timeout=timeout)
            server.create_database(dbname)
        except (RuntimeError, subprocess.TimeoutExpired, psycopg.Error) as exc:
            raise RuntimeError(
                f"PostgreSQL test server did not start: {exc}\n{log_tail(log, 30)}"
            ) from exc
        yield server
    finally:
        if started:
            # Best effort: a server that will not stop must not hide the test's own error.
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                _pg_ctl_stop(bindir, data_dir, mode="fast", timeout=timeout)
        shutil.rmtree(base, ignore_errors=True)


def _wait_ready(server: PostgresServer, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(server.dsn_for("postgres"), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"PostgreSQL on port {server.port} not ready after {timeout:g} s: {exc}"
                ) from exc
            time.sleep(0.1)


def pg_stop(server: PostgresServer, *, mode: str = "fast", timeout: float = 30.0) -> None:
    """Stop a running server (`pg_ctl stop -m fast`): clients are disconnected mid-transaction.

    `postgres_server` still removes it on exit; `pg_start` brings it back first.
    """
    _pg_ctl_stop(find_postgres_bindir(), server.data_dir, mode=mode, timeout=timeout)


def pg_start(server: PostgresServer, *, timeout: float = 30.0) -> None:
    """Start a stopped server again on the same port, data directory and settings, logging to
    `restart.log` next to the data directory."""
    _pg_ctl_start(
        find_postgres_bindir(),
        server.data_dir,
        port=server.port,
        log=server.data_dir.parent / "restart.log",
        timeout=timeout,
    )


def postgres_server_fixture(
    *,
    scope: Literal["session", "package", "module"] = "session",
    dbname: str = "pactmw_test",
) -> Any:  # a pytest fixture definition; its class is private to pytest
    """Make a pytest fixture that runs `postgres_server()` and yields the PostgresServer.

    Assign the result to a name in a conftest.py; that name becomes the fixture's name.
    """

    @pytest.fixture(scope=scope)
    def _postgres_server() -> Iterator[PostgresServer]:
        with postgres_server(dbname=dbname) as server:
            yield server

    return _postgres_server
