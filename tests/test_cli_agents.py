"""`pactmw agents` and `pactmw cleanup` as an operator runs them: what only the standalone
command has (its help, its --config, the store it refuses to share). The verbs' behaviour,
the same in every front-end, is tested in tests/adapters/test_agent_commands.py, and the
serving processes seeing the changes in tests/test_runtime_agents.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pactmw.store import open_store
from tests.support.servers import REPO

PYTHON_M = (sys.executable, "-m", "pactmw")
POPPY_AGENT = "https://atlas.example/agent.json"
CONFIG = """\
base_url = "https://shop.example"
audience = "https://shop.example/a2a"
{store}
[brands.acme]
handler = "examples.bots:order_bot"
"""


def run(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    # This checkout's pactmw, and the handler's import path, from anywhere.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(REPO / "src"), str(REPO)))}
    return subprocess.run(
        [*PYTHON_M, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_root_help_lists_agents_and_cleanup() -> None:
    listed = run("--help").stdout
    assert "agents" in listed
    assert "cleanup" in listed


#: The one exit-status rule of grants, agents and cleanup (as `manage.py pactmw` and `flask
#: pactmw` keep it; tests/adapters/test_agent_commands.py runs it).
CANNOT_RUN = "2 for bad usage, a bad configuration, or a store that cannot be opened, reached"


@pytest.mark.parametrize(
    ("command", "needles"),
    [
        ("agents", ("list", "add", "block", "allow", "remove", "next request")),
        ("agents list", ("Exit status 0, or " + CANNOT_RUN,)),
        ("agents add", ("ISSUER", "JWKS_URI", "--name", "Exit status 0 when added, 1", CANNOT_RUN)),
        ("agents block", ("401", "whichever protocol it speaks", "open-mode", CANNOT_RUN)),
        ("agents allow", (CANNOT_RUN,)),
        ("agents remove", ("configured agents are removed from the configuration", CANNOT_RUN)),
        (
            "cleanup",
            (
                "retention_days",
                "spent token of a live grant is kept",
                "Grants are kept",
                "Exit status 0, or " + CANNOT_RUN,
            ),
        ),
        ("grants list", ("Exit status 0, or " + CANNOT_RUN,)),
        ("grants revoke", ("1 when nothing was", CANNOT_RUN)),
    ],
)
def test_help(command: str, needles: tuple[str, ...]) -> None:
    result = run(*command.split(), "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for needle in needles:
        assert needle.lower() in text.lower(), needle


def test_agents_without_action_is_a_usage_error() -> None:
    result = run("agents")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: pactmw agents")


@pytest.mark.parametrize(
    "argv",
    [
        ("agents", "list"),
        ("agents", "add", "https://pa.example", "https://pa.example/jwks.json"),
        ("agents", "block", "https://pa.example"),
        ("cleanup",),
    ],
)
@pytest.mark.parametrize(
    ("store", "expected"),
    [
        pytest.param('store = "memory://"', "store: memory:// lives inside", id="memory"),
        pytest.param(
            'store = "sqlite:///elsewhere/pactmw.db"', "store: no database at", id="no-database"
        ),
        pytest.param('store = "mysql://x"', "store: unsupported store URL scheme", id="url"),
        pytest.param('retention_days = "a month"', "retention_days must be", id="retention"),
    ],
)
def test_a_store_other_processes_cannot_share_is_refused(
    tmp_path: Path, argv: tuple[str, ...], store: str, expected: str
) -> None:
    (tmp_path / "pactmw.toml").write_text(CONFIG.format(store=store))
    action = argv[:2] if argv[0] == "agents" else argv[:1]
    result = run(*action, "--config", str(tmp_path / "pactmw.toml"), *argv[len(action) :])
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"pactmw {' '.join(action)}: error: {expected}"), line
    assert not (REPO / "elsewhere").exists()  # no empty database was created


def test_a_relative_store_is_the_one_of_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "pactmw.toml").write_text(CONFIG.format(store='store = "sqlite:///state/p.db"'))
    open_store(f"sqlite:///{tmp_path}/state/p.db").close()  # what `pactmw serve` would create
    added = run(
        "agents", "add", "--config", "pactmw.toml", "https://pa.example", "https://pa.example/j",
        cwd=tmp_path,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "pactmw.agents: agent added: issuer=https://pa.example" in added.stderr  # the log
    store = open_store(f"sqlite:///{tmp_path}/state/p.db")
    try:
        assert [agent.issuer for agent in store.list_agents()] == ["https://pa.example"]
    finally:
        store.close()


POPPY_CONFIG = """\
base_url = "https://shop.example"
audience = "https://shop.example/a2a"
store = "sqlite:///pactmw.db"

[brands.shop]
handler = "examples.bots:order_bot"

[brands.shop.poppy]
domain = "shop.example"
agents = "any"
"""


def test_agents_list_shows_the_poppy_agents_holding_grants(tmp_path: Path) -> None:
    # A Poppy-only site (no PACT agent configured or added) whose store holds the grant a
    # Poppy Device Sign-In wrote: the trial's "no agents" while the agent held a grant.
    (tmp_path / "pactmw.toml").write_text(POPPY_CONFIG)
    store = open_store(f"sqlite:///{tmp_path}/pactmw.db")
    try:
        empty = run("agents", "list", "--config", "pactmw.toml", cwd=tmp_path)
        assert empty.returncode == 0, empty.stderr
        assert "agents add ISSUER JWKS_URI; no Poppy agent holds a live grant" in empty.stdout
        now = time.time()
        store.upsert_grant(
            grant_id="g-1", brand_id="shop", account="jane", client_id=POPPY_AGENT,
            pa_sub="user-1", scopes=("orders:read",), now=now, expires_at=now + 3600,
        )  # fmt: skip
    finally:
        store.close()
    listed = run("agents", "list", "--config", "pactmw.toml", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["ISSUER", "NAME", "SOURCE", "STATUS", "JWKS", "ADDED"]
    assert row.split()[:7] == [
        POPPY_AGENT, "-", "poppy", "at", "shop", "allowed", "(client",
    ]  # fmt: skip
    as_json = run("agents", "list", "--config", "pactmw.toml", "--json", cwd=tmp_path)
    (entry,) = json.loads(as_json.stdout)
    assert (entry["issuer"], entry["source"], entry["brand_id"]) == (POPPY_AGENT, "poppy", "shop")

    blocked = run("agents", "block", "--config", "pactmw.toml", POPPY_AGENT, cwd=tmp_path)
    assert (blocked.returncode, blocked.stdout) == (0, f"blocked {POPPY_AGENT}\n"), blocked.stderr
    # Written to the store, where every serving process's Poppy Brands read it.
    store = open_store(f"sqlite:///{tmp_path}/pactmw.db")
    try:
        assert store.agent_enabled(POPPY_AGENT) is False
    finally:
        store.close()
    listed = run("agents", "list", "--config", "pactmw.toml", cwd=tmp_path)
    assert listed.stdout.splitlines()[1].split()[5] == "blocked"


def test_agents_list_shows_a_poppy_agent_that_only_talks_signed_out(tmp_path: Path) -> None:
    # The Brand admits any agent, and one started a Session no one signed in to: no grant,
    # yet it is listed while the Session is live, and blocking it warns of nothing.
    (tmp_path / "pactmw.toml").write_text(POPPY_CONFIG)
    store = open_store(f"sqlite:///{tmp_path}/pactmw.db")
    try:
        now = time.time()
        store.create_session(
            session_id="ses_1", brand_id="shop", client_id=POPPY_AGENT, user_id="usr_1",
            jkt="jkt-1", token_hash="hash-1", now=now, expires_at=now + 3600,
        )  # fmt: skip
    finally:
        store.close()
    listed = run("agents", "list", "--config", "pactmw.toml", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split() == [
        POPPY_AGENT, "-", "poppy", "at", "shop", "allowed", "(client", "metadata)", "-",
    ]  # fmt: skip
    blocked = run("agents", "block", "--config", "pactmw.toml", POPPY_AGENT, cwd=tmp_path)
    assert (blocked.returncode, blocked.stdout) == (0, f"blocked {POPPY_AGENT}\n"), blocked.stderr


@pytest.mark.parametrize("action", [("cleanup",), ("agents", "list"), ("grants", "list")])
def test_run_from_another_directory_the_error_says_where_imports_come_from(
    tmp_path: Path, action: tuple[str, ...]
) -> None:
    # cron runs `pactmw cleanup --config /srv/support/pactmw.toml` from the home directory,
    # where the Brand's handler module is not: "No module named 'support_bots'" alone does
    # not say that the command imports it from the directory it runs in.
    site = tmp_path / "site"
    site.mkdir()
    (site / "support_bots.py").write_text("def bot(turn):\n    return 'hi'\n")
    (site / "pactmw.toml").write_text(
        'base_url = "https://shop.example"\naudience = "https://shop.example/a2a"\n'
        '[brands.acme]\nhandler = "support_bots:bot"\n'
    )
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    result = run(*action, "--config", str(site / "pactmw.toml"), cwd=elsewhere)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f"pactmw {' '.join(action)}: error: brands.acme.handler 'support_bots:bot' cannot be"
        " imported: No module named 'support_bots'"
    ), line
    assert line.endswith(
        f"(import paths are looked up from the current directory, {elsewhere}: run this"
        " command from the directory pactmw serve runs in)"
    ), line
