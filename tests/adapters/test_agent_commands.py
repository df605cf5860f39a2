"""`pactmw agents|cleanup`, `manage.py pactmw agents|cleanup` and `flask pactmw agents|cleanup`:
one script of operator actions, run for real through each front-end on its own sqlite store,
must print the same lines, fail with the same messages and exit with the same statuses, and
leave the same store behind (issue 14, management commands).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from attrs import frozen
from flask import Flask

from pactmw.adapters import flask as flask_adapter
from pactmw.core.jwk import generate_private_jwk
from pactmw.store import StoredAgent, open_store
from tests.adapters.commands import django_environment, manage
from tests.support.interrupt import Stopped, interrupt, start_interruptible
from tests.support.net import free_port
from tests.support.servers import REPO
from tests.support.toml import toml_value

CONFIGURED = "https://configured.example"
RUNTIME = "https://runtime.example"
RUNTIME_JWKS = "http://127.0.0.1:9/jwks.json"  # loopback http: allowed by this configuration
DAY = 86_400.0

FRONT_ENDS = ("pactmw", "manage.py", "flask")
#: How each front-end starts its one-line error (the message after it is pactmw's own).
ERROR_PREFIX = {
    "pactmw": re.compile(r"^pactmw ((agents|grants) \w+|cleanup): error: "),
    "manage.py": re.compile(r"^CommandError: "),
    "flask": re.compile(r"^Error: "),
}


@frozen
class Ran:
    """A command's exit status, its stdout lines, and its error message (prefix removed)."""

    status: int
    lines: tuple[str, ...]
    error: str


Runner = Callable[..., Ran]


def _settings(workdir: Path, name: str) -> dict[str, Any]:
    key = generate_private_jwk("ES256", kid="configured-1")
    return {
        "base_url": "https://shop.example",
        "audience": "https://shop.example/a2a",
        "allow_http_jwks_on_loopback": True,
        "retention_days": 30,
        "agents": [
            {
                "issuer": CONFIGURED,
                "name": "Configured PA",
                "jwks": {"keys": [key.public.to_dict()]},
            }
        ],
        "store": f"sqlite:///{workdir / (name + '.db')}",
        "brands": {"acme": {"name": "Acme", "handler": "examples.bots:order_bot"}},
    }


def _error(front_end: str, stderr: str) -> str:
    """The one error line of `stderr` without its prefix ("" when none); other lines are
    the `pactmw.agents` log, which the commands and the test site send there too."""
    assert "Traceback" not in stderr
    prefix = ERROR_PREFIX[front_end]
    errors = [prefix.sub("", line) for line in stderr.splitlines() if prefix.match(line)]
    assert len(errors) <= 1, stderr
    return errors[0] if errors else ""


def _standalone(settings: dict[str, Any], workdir: Path) -> Runner:
    config = workdir / "pactmw.toml"
    config.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in settings.items()))

    def run(*argv: str) -> Ran:
        topic, *rest = argv
        if topic in ("agents", "grants"):
            action, *rest = rest
            topic = f"agents {action}"
        done = subprocess.run(
            [sys.executable, "-m", "pactmw", *topic.split(), "--config", str(config), *rest],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Ran(done.returncode, tuple(done.stdout.splitlines()), _error("pactmw", done.stderr))

    return run


def _manage(settings: dict[str, Any], workdir: Path) -> Runner:
    def run(*argv: str) -> Ran:
        done = manage(settings, workdir / "django.json", *argv)
        lines = tuple(done.stdout.splitlines())
        return Ran(done.returncode, lines, _error("manage.py", done.stderr))

    return run


def _flask(settings: dict[str, Any], workdir: Path) -> Runner:
    app = Flask("agent_commands")
    app.config["PACTMW"] = settings
    flask_adapter.Pactmw(app)
    cli = app.test_cli_runner()

    def run(*argv: str) -> Ran:
        done = cli.invoke(args=["pactmw", *argv])
        if done.exception is not None and not isinstance(done.exception, SystemExit):
            raise done.exception
        return Ran(done.exit_code, tuple(done.stdout.splitlines()), _error("flask", done.stderr))

    return run


RUNNERS = {"pactmw": _standalone, "manage.py": _manage, "flask": _flask}


@frozen
class FrontEnd:
    name: str
    run: Runner
    store_url: str

    def agents(self) -> tuple[StoredAgent, ...]:
        store = open_store(self.store_url)
        try:
            return store.list_agents()
        finally:
            store.close()


@pytest.fixture(scope="module", params=FRONT_ENDS)
def front_end(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> FrontEnd:
    name: str = request.param
    workdir = tmp_path_factory.mktemp(name.replace(".", "-"))
    settings = _settings(workdir, "store")
    open_store(settings["store"]).close()  # a database the serving processes would have made
    return FrontEnd(name, RUNNERS[name](settings, workdir), settings["store"])


#: The refusals of `add`: nothing is written, exit status 2, the message names the problem.
BAD_ADDS = [
    pytest.param(
        ("pa.example", RUNTIME_JWKS),
        "nothing added: issuer must be an absolute http(s) URL, exactly as the agent's tokens "
        "have it in iss (e.g. https://pa.example): 'pa.example'",
        id="issuer-without-scheme",
    ),
    pytest.param(
        (RUNTIME + " ", RUNTIME_JWKS),
        "nothing added: issuer holds spaces or control characters: 'https://runtime.example '",
        id="issuer-with-a-space",
    ),
    pytest.param(
        (RUNTIME, "ftp://runtime.example/jwks.json"),
        "nothing added: jwks_uri must be https (http only to 127.0.0.1/::1/localhost with "
        "allow_http_jwks_on_loopback = true): 'ftp://runtime.example/jwks.json'",
        id="jwks-not-https",
    ),
    pytest.param(
        (RUNTIME, "http://10.0.0.7/jwks.json"),
        "nothing added: jwks_uri must be https (http only to 127.0.0.1/::1/localhost with "
        "allow_http_jwks_on_loopback = true): 'http://10.0.0.7/jwks.json'",
        id="jwks-http-off-loopback",
    ),
    pytest.param(
        ("http://[::1", RUNTIME_JWKS),
        "nothing added: issuer must be an absolute http(s) URL, exactly as the agent's tokens "
        "have it in iss (e.g. https://pa.example): 'http://[::1'",
        id="issuer-with-an-unclosed-bracket",
    ),
    pytest.param(
        (RUNTIME, "https://[runtime.example]/jwks.json"),
        "nothing added: jwks_uri must be https (http only to 127.0.0.1/::1/localhost with "
        "allow_http_jwks_on_loopback = true): 'https://[runtime.example]/jwks.json'",
        id="jwks-bracketed-host-not-ipv6",
    ),
    pytest.param(
        (RUNTIME, RUNTIME_JWKS, "--name", "bad\nname"),
        "nothing added: name must not start or end with spaces nor hold control characters",
        id="name-with-a-newline",
    ),
]


@pytest.mark.parametrize(("arguments", "message"), BAD_ADDS)
def test_a_bad_add_is_refused_and_writes_nothing(
    front_end: FrontEnd, arguments: tuple[str, ...], message: str
) -> None:
    ran = front_end.run("agents", "add", *arguments)
    assert ran == Ran(2, (), message)
    assert front_end.agents() == ()


def test_the_agent_lifecycle(front_end: FrontEnd) -> None:
    run = front_end.run
    listed = run("agents", "list")
    assert listed.status == 0
    assert listed.lines[0].split() == ["ISSUER", "NAME", "SOURCE", "STATUS", "JWKS", "ADDED"]
    assert re.split(r"\s{2,}", listed.lines[1]) == [
        CONFIGURED, "Configured PA", "config", "allowed", "(inline)", "-"
    ]  # fmt: skip

    before = time.time()
    added = run("agents", "add", RUNTIME, RUNTIME_JWKS, "--name", "Runtime PA")
    assert added == Ran(0, (f"added {RUNTIME} (keys from {RUNTIME_JWKS})",), "")
    (stored,) = front_end.agents()
    assert (stored.issuer, stored.name, stored.jwks_uri) == (RUNTIME, "Runtime PA", RUNTIME_JWKS)
    assert before <= stored.added_at <= time.time()

    again = run("agents", "add", RUNTIME, "https://elsewhere.example/jwks")
    assert (again.status, again.lines) == (1, ())
    assert again.error.startswith(f"nothing added: {RUNTIME} was already added on ")
    configured = run("agents", "add", CONFIGURED, RUNTIME_JWKS)
    assert configured == Ran(
        1, (), f"nothing added: {CONFIGURED} is configured (agents in the settings)"
    )
    assert front_end.agents() == (stored,)

    assert run("agents", "block", RUNTIME) == Ran(0, (f"blocked {RUNTIME}",), "")
    assert run("agents", "block", RUNTIME) == Ran(0, (f"{RUNTIME} was already blocked",), "")
    assert _statuses(run) == {CONFIGURED: "allowed", RUNTIME: "blocked"}
    assert run("agents", "allow", RUNTIME) == Ran(0, (f"allowed {RUNTIME}",), "")
    assert run("agents", "block", CONFIGURED) == Ran(0, (f"blocked {CONFIGURED}",), "")
    assert run("agents", "allow", CONFIGURED) == Ran(0, (f"allowed {CONFIGURED}",), "")
    unknown = "https://x.example"
    assert run("agents", "block", unknown) == Ran(
        1,
        (),
        f"nothing blocked: no agent {unknown} is configured or added (agents list shows them)",
    )

    assert run("agents", "remove", CONFIGURED) == Ran(
        1,
        (),
        f"nothing removed: {CONFIGURED} is configured, not added at runtime "
        "(remove it from the settings, or block it)",
    )
    assert run("agents", "block", RUNTIME).status == 0
    stays = f"{RUNTIME} stays blocked if it is added again (allow lifts that)"
    assert run("agents", "remove", RUNTIME) == Ran(0, (f"removed {RUNTIME}", stays), "")
    assert run("agents", "remove", RUNTIME) == Ran(
        1, (), f"nothing removed: no agent {RUNTIME} was added at runtime"
    )
    assert front_end.agents() == ()
    readded = run("agents", "add", RUNTIME, RUNTIME_JWKS)
    assert readded == Ran(
        0,
        (
            f"added {RUNTIME} (keys from {RUNTIME_JWKS})",
            f"{RUNTIME} is blocked (from before): allow it to let it call",
        ),
        "",
    )
    assert _statuses(run) == {CONFIGURED: "allowed", RUNTIME: "blocked"}


def _statuses(run: Runner) -> dict[str, str]:
    listed = json.loads("\n".join(run("agents", "list", "--json").lines))
    return {entry["issuer"]: f"{entry['status']}" for entry in listed}


def test_cleanup_applies_retention_days(front_end: FrontEnd) -> None:
    now = time.time()
    store = open_store(front_end.store_url)
    try:
        old = store.create_conversation(
            brand_id="acme", issuer=RUNTIME, sub="u", now=now - 31 * DAY
        )
        store.claim_message(
            context_id=old, message_id="m1", text="hi", now=now - 31 * DAY, lease_seconds=30
        )
        kept = store.create_conversation(brand_id="acme", issuer=RUNTIME, sub="u", now=now - DAY)
        store.create_device_authorization(
            device_code_hash=f"hash-{front_end.name}", user_code="BCDF-GHJK", brand_id="acme",
            client_id=RUNTIME, pa_sub="u", scopes=("orders:read",), now=now - 700,
            expires_at=now - 100, interval=5.0,
        )  # fmt: skip
    finally:
        store.close()

    ran = front_end.run("cleanup")

    assert ran.status == 0, ran.error
    assert ran.lines[:5] == (
        "device authorizations deleted: 1 (expired)",
        "refresh tokens deleted: 0 (expired unused, or of a revoked or expired grant)",
        "single-use values deleted: 0 (expired)",
        "authorization details deleted: 0 (expired)",
        "rate-limit counters deleted: 0 (window ended)",
    )
    assert re.fullmatch(
        r"conversations deleted: 1, with 1 messages \(no activity since "
        r"\d{4}-\d\d-\d\d \d\d:\d\d UTC; retention_days = 30\)",
        ran.lines[-1],
    ), ran.lines
    store = open_store(front_end.store_url)
    try:
        assert store.get_conversation(old) is None
        assert store.get_conversation(kept) is not None
        assert store.device_authorization_by_user_code("BCDF-GHJK") is None
    finally:
        store.close()


@pytest.mark.parametrize("name", FRONT_ENDS)
def test_a_store_that_cannot_be_reached_is_exit_status_2(name: str, tmp_path: Path) -> None:
    """One rule in every front-end: 2 when the command cannot do its work (bad usage, a bad
    configuration, a store that cannot be opened, reached or used), 1 only for "nothing to
    do". PostgreSQL connects on first use, so an unreachable server fails inside the work."""
    password = "pw-never-shown"
    nowhere = f"postgresql://pactmw:{password}@127.0.0.1:{free_port()}/pactmw"
    run = RUNNERS[name]({**_settings(tmp_path, "unused"), "store": nowhere}, tmp_path)
    for argv in (("agents", "list"), ("grants", "list"), ("cleanup",)):
        ran = run(*argv)
        assert (ran.status, ran.lines) == (2, ()), (argv, ran)
        assert ran.error.startswith("store: PostgreSQL pactmw@127.0.0.1:"), (argv, ran.error)
        assert "is unavailable" in ran.error
        assert password not in ran.error


#: Settings that only verify agents (no brands, so none of the Provider's keys).
PROVIDER_KEYS = ("brands", "store", "retention_days", "base_url")


@pytest.mark.parametrize("name", ["manage.py", "flask"])
def test_without_brands_every_command_says_so_in_the_same_words(name: str, tmp_path: Path) -> None:
    """A site whose `PACTMW` only verifies agents has no Provider and no store: the commands
    exit 2 with the same words in both frameworks (only where the settings live differs)."""
    settings = _settings(tmp_path, "unused")
    verify_only = {key: value for key, value in settings.items() if key not in PROVIDER_KEYS}
    where = {"manage.py": "settings.PACTMW", "flask": "app.config['PACTMW']"}[name]
    run = RUNNERS[name](verify_only, tmp_path)
    for argv in (("agents", "list"), ("grants", "list"), ("cleanup",)):
        ran = run(*argv)
        assert (ran.status, ran.lines) == (2, ()), (argv, ran)
        assert ran.error == (
            f"{where} lists no brands: there is no Provider, and no store of agents, grants or "
            "conversations (add brands)"
        ), (argv, ran.error)


@pytest.mark.parametrize("name", ["pactmw", "manage.py"])
def test_a_store_that_cannot_be_opened_is_exit_status_2(name: str, tmp_path: Path) -> None:
    """A file that is not a database fails when the store opens; the error says why (Flask's
    extension opens it in `init_app`, so such an app does not start at all)."""
    settings = _settings(tmp_path, "garbage")
    (tmp_path / "garbage.db").write_text("not a database, just text " * 10)
    ran = RUNNERS[name](settings, tmp_path)("agents", "list")
    assert (ran.status, ran.lines) == (2, ()), ran
    assert "file is not a database" in ran.error, ran.error


@pytest.mark.parametrize("name", ["pactmw", "manage.py"])
def test_a_store_url_of_no_backend_is_exit_status_2_in_one_line(name: str, tmp_path: Path) -> None:
    """A bad `store` is a bad configuration: exit status 2 and one line naming the key, in
    both front-ends (Flask's extension refuses it in `init_app`: the app does not start)."""
    settings = {**_settings(tmp_path, "unused"), "store": "redis://cache.internal"}
    ran = RUNNERS[name](settings, tmp_path)("agents", "list")
    assert (ran.status, ran.lines) == (2, ()), ran
    assert ran.error.endswith(
        "store: unsupported store URL scheme 'redis': expected memory://, sqlite:///path.db "
        "or postgresql://..."
    ), ran.error


def _manage_process(
    settings: dict[str, Any], workdir: Path, stdout: int, **env: str
) -> subprocess.CompletedProcess[str]:
    """`manage.py pactmw agents list` with its stdout where the caller says."""
    (workdir / "django.json").write_text(json.dumps(settings))
    return subprocess.run(
        [sys.executable, "-m", "django", "pactmw", "agents", "list"],
        env={**django_environment(workdir / "django.json"), **env},
        cwd=REPO,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        timeout=60,
    )


def test_manage_py_output_into_a_closed_pipe(tmp_path: Path) -> None:
    """`manage.py pactmw agents list | head -1`, the reader gone before the command writes:
    quietly, exit status 141, as `pactmw` does."""
    settings = _settings(tmp_path, "store")
    open_store(settings["store"]).close()
    read, write = os.pipe()
    os.close(read)
    try:
        done = _manage_process(settings, tmp_path, write)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr
    assert done.returncode == 141, done.stderr


def test_manage_py_names_beyond_ascii_on_an_ascii_console(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "store")
    settings["agents"][0]["name"] = "Zo\u00eb\u2019s agent"
    open_store(settings["store"]).close()
    done = _manage_process(settings, tmp_path, subprocess.PIPE, PYTHONIOENCODING="ascii")
    assert "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr
    assert "Zo\\xeb\\u2019s agent" in done.stdout


def test_manage_py_ctrl_c_is_exit_status_130(tmp_path: Path) -> None:
    """Ctrl-C while the command builds the Provider (it imports a Brand's handler that takes
    its time): quietly, exit status 130, as `pactmw` does."""
    marker = tmp_path / "importing"
    (tmp_path / "slow_bot.py").write_text(
        f"import pathlib, time\n\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(60)\n"
    )
    settings = _settings(tmp_path, "store")
    settings["brands"]["acme"]["handler"] = "slow_bot:bot"
    (tmp_path / "django.json").write_text(json.dumps(settings))
    environment = django_environment(tmp_path / "django.json")
    environment["PYTHONPATH"] += os.pathsep + str(tmp_path)
    command = [sys.executable, "-m", "django", "pactmw", "agents", "list"]
    process = start_interruptible(command, cwd=REPO, env=environment)
    assert interrupt(process, marker.exists) == Stopped(130, "", "")


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ({"audiance": "https://shop.example/a2a"}, "unknown configuration key audiance"),
        ({"store": "redis://cache.internal"}, "unsupported store URL scheme 'redis'"),
    ],
)
def test_manage_py_says_a_bad_setting_once(
    tmp_path: Path, broken: dict[str, Any], said: str
) -> None:
    # Reported: the server's log line ("settings.PACTMW is invalid: ...; pactmw answers 503")
    # came out on the console before the command's own error, the same problem twice.
    done = manage({**_settings(tmp_path, "unused"), **broken}, tmp_path / "django.json", "cleanup")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count(said) == 1, done.stderr
    assert "503" not in done.stderr
    assert _error("manage.py", done.stderr).startswith("pactmw is not configured: ")
