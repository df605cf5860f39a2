"""`pactmw agents` and `pactmw cleanup` as an operator runs them: what only the standalone
command has (its help, its --config, the store it refuses to share). The verbs' behaviour,
the same in every front-end, is tested in tests/adapters/test_agent_commands.py, and the
serving processes seeing the changes in tests/test_runtime_agents.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pactmw.store import open_store
from tests.support.servers import REPO

PYTHON_M = (sys.executable, "-m", "pactmw")
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
        ("agents block", ("401", "open-mode", CANNOT_RUN)),
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
