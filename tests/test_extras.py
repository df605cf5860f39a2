"""Each adapter needs only its own extra, and says which one when its framework is missing.

The frameworks are hidden from a subprocess (tests/support/hidden.py), which is what an
environment without them looks like; tests/test_packaging.py installs the built wheel in a
clean venv to prove the same for real.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import pactmw
from pactmw.core.errors import MissingExtra, PactmwError
from tests.support.hidden import env_without

#: Every package an extra brings that the core must do without.
OPTIONAL = (
    "starlette", "fastapi", "werkzeug", "flask", "django", "asgiref", "rest_framework",
    "uvicorn", "psycopg", "jwt", "httpx", "jinja2",
)  # fmt: skip

#: adapter module -> (the framework's top-level package, the extra that brings it)
ADAPTERS = {
    "pactmw.adapters.asgi": ("starlette", "asgi"),
    "pactmw.adapters.fastapi": ("fastapi", "fastapi"),
    "pactmw.adapters.wsgi": ("werkzeug", "wsgi"),
    "pactmw.adapters.flask": ("flask", "flask"),
    "pactmw.adapters.django": ("django", "django"),
    "pactmw.adapters.django.rest_framework": ("rest_framework", "drf"),
}


def python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_core_imports_without_any_framework(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import pactmw, pactmw.client, pactmw.provider, pactmw.store, pactmw.check\n"
        "import pactmw.protocols.identity, pactmw.protocols.delegation, pactmw.protocols.parafe\n"
        "import pactmw.cli, pactmw.demo, pactmw.brand_login\n"
        "from pactmw.store import open_store\n"
        "open_store('memory://').close()\n"
        f"optional = {OPTIONAL!r}\n"
        "loaded = [n for n, m in sys.modules.items() if m and n.split('.')[0] in optional]\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    result = python(code, env_without(tmp_path, OPTIONAL))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [pytest.param(module, *needs, id=module) for module, needs in ADAPTERS.items()],
)
def test_an_adapter_without_its_framework_names_its_extra(
    tmp_path: Path, module: str, framework: str, extra: str
) -> None:
    code = (
        "from pactmw import MissingExtra\n"
        "try:\n"
        f"    import {module}\n"
        "except MissingExtra as exc:\n"
        "    assert isinstance(exc, ImportError)\n"
        "    print(exc.extra, exc, sep='|')\n"
    )
    result = python(code, env_without(tmp_path, [framework]))
    assert result.returncode == 0, result.stderr
    named, message = result.stdout.rstrip("\n").split("|")
    assert named == extra
    assert message.startswith(f"{module} needs ")
    assert message.endswith(f'which is not installed: pip install "pactmw[{extra}]"')


def test_django_without_django_is_not_an_asgiref_error(tmp_path: Path) -> None:
    # Django brings asgiref; without Django the message names Django's extra, not asgiref.
    result = python("import pactmw.adapters.django", env_without(tmp_path, ["django", "asgiref"]))
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        "pactmw.core.errors.MissingExtra: pactmw.adapters.django needs Django, which is not "
        'installed: pip install "pactmw[django]"'
    )
    assert "asgiref" not in result.stderr


def test_a_postgresql_store_without_psycopg_names_the_postgres_extra(tmp_path: Path) -> None:
    code = (
        "from pactmw import MissingExtra\n"
        "from pactmw.store import open_store\n"
        "try:\n"
        "    open_store('postgresql://u:secret@127.0.0.1/db')\n"
        "except MissingExtra as exc:\n"
        "    print(exc)\n"
    )
    result = python(code, env_without(tmp_path, ["psycopg"]))
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        'a PostgreSQL store needs psycopg, which is not installed: pip install "pactmw[postgres]"\n'
    )


def test_missing_extra_is_an_import_error_of_the_family() -> None:
    error = MissingExtra("x", "Y", "z")
    assert isinstance(error, ImportError)
    assert isinstance(error, PactmwError)
    assert error.extra == "z"
    assert str(error) == 'x needs Y, which is not installed: pip install "pactmw[z]"'


def test_the_version_is_the_installed_distributions() -> None:
    assert pactmw.__version__ == version("pactmw")
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    assert f'\nversion = "{pactmw.__version__}"\n' in pyproject
