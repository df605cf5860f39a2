"""Running pactmw's command line as a user runs it (`python -m pactmw`, a subprocess), for the
CLI tests of every folder."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.support.parties import ISSUER
from tests.support.servers import REPO

__all__ = [
    "ISSUER",  # the personal agent the CLI tests sign as (tests.support.parties)
    "PYTHON_M",
    "assert_no_traceback",
    "assert_one_line_error",
    "environment",
    "run",
    "run_in",
]

PYTHON_M = (sys.executable, "-m", "pactmw")


def run(
    argv: Sequence[str],
    *,
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`argv` (a whole command line) to completion, output as text."""
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]


def environment(**extra: str) -> dict[str, str]:
    # This checkout's pactmw first, and the repository (tests., examples.) importable.
    path = os.pathsep.join((str(REPO / "src"), str(REPO)))
    return {**os.environ, "PYTHONIOENCODING": "utf-8", "PYTHONPATH": path, **extra}


def run_in(
    argv: Sequence[str], cwd: Path, *, stdout: int = subprocess.PIPE, **env: str
) -> subprocess.CompletedProcess[str]:
    """`python -m pactmw ARGV` in `cwd` with this checkout importable, output as text."""
    return subprocess.run(
        [*PYTHON_M, *argv],
        cwd=cwd,
        env=environment(**env),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        timeout=60,
    )


def assert_no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr
