"""`manage.py pactmw ...` of the adapter tests' Django project, run for real in a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.servers import REPO

__all__ = ["CHECKOUT_ENV", "DJANGO_PROJECT", "django_check", "django_environment", "manage"]

DJANGO_PROJECT = Path(__file__).resolve().parent / "django_project"


#: The environment a process of the test project (manage.py, a Django server) needs to import
#: this checkout's pactmw, not the one installed (another checkout's, in a worktree).
CHECKOUT_ENV = {"PYTHONPATH": os.pathsep.join((str(REPO / "src"), str(DJANGO_PROJECT), str(REPO)))}


def django_environment(config_file: Path) -> dict[str, str]:
    """The environment of `manage.py` for the test project, `PACTMW` read from `config_file`."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "pactmw_testsite.contract_settings",
        **CHECKOUT_ENV,
        "PACTMW_TEST_CONFIG": str(config_file),
    }


def manage(
    settings: dict[str, Any], config_file: Path, *argv: str
) -> subprocess.CompletedProcess[str]:
    """Run `manage.py pactmw ARGV` with `settings` as `PACTMW` (written to `config_file`)."""
    return _django(["pactmw", *argv], settings, config_file, {})


def django_check(
    settings: dict[str, Any], config_file: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run `manage.py check` with `settings` as `PACTMW` (written to `config_file`); `env`
    goes to its environment (another `DJANGO_SETTINGS_MODULE`, a test site's switch)."""
    return _django(["check"], settings, config_file, env)


def django_deploy_check(
    settings: dict[str, Any], config_file: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """`django_check` with `--deploy`: Django's deployment checks too. (A function of its
    own: a `deploy` keyword beside `**env` would be one more name `env` could not hold.)"""
    return _django(["check", "--deploy"], settings, config_file, env)


def _django(
    argv: list[str], settings: dict[str, Any], config_file: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    config_file.write_text(json.dumps(settings))
    return subprocess.run(
        [sys.executable, "-m", "django", *argv],
        env={**django_environment(config_file), **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
