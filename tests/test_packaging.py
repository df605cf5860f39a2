"""The wheel and sdist people install: built once, checked, and installed in a clean venv.

The venv gets the wheel with no extra first (the verifiers and the client import; every
adapter refuses with `MissingExtra` naming its extra), then one extra at a time, each
followed by tests/support/wheel_probe.py: the new extra's adapter runs its documentation
sample, the adapters whose extra is still missing keep refusing. pip installs the wheel's
dependencies from the configured indexes (its cache makes later runs fast).
"""

from __future__ import annotations

import email
import email.message
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support.samples import find_samples
from tests.support.servers import REPO

#: The extras in an order where none brings a later one's framework (flask brings werkzeug,
#: fastapi starlette, drf django): each install shows its own adapter starting to import.
EXTRAS = ("wsgi", "flask", "asgi", "fastapi", "django", "drf", "postgres", "serve")
#: The samples the probe runs, by the extra they need (README.md and docs/ hold them).
PROBED_SAMPLES = ("direct", "starlette", "provider", "fastapi", "wsgi", "flask")
PROBE = REPO / "tests" / "support" / "wheel_probe.py"


def sh(*argv: str | Path, timeout: float = 300, cwd: Path | None = None) -> str:
    result = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )
    assert result.returncode == 0, f"{argv}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, and the wheel built from it, as `python -m build` makes them."""
    out = tmp_path_factory.mktemp("dist")
    # No isolation: the dev extra has hatchling, so building needs no download.
    sh(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, REPO)
    return out


def one(directory: Path, pattern: str) -> Path:
    (found,) = directory.glob(pattern)
    return found


def test_twine_accepts_both_distributions(dist: Path) -> None:
    checked = sh(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()))
    assert checked.count("PASSED") == 2, checked


def test_the_wheel_holds_the_package_its_types_and_its_license(dist: Path) -> None:
    wheel = one(dist, "pactmw-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    info = wheel.name.split("-py3")[0] + ".dist-info"
    assert "pactmw/py.typed" in names
    assert f"{info}/licenses/LICENSE" in names
    source = {
        str(path.relative_to(REPO / "src"))
        for path in (REPO / "src" / "pactmw").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert source <= names, source - names
    assert {name.split("/")[0] for name in names} == {"pactmw", info}


def wheel_metadata(dist: Path) -> email.message.Message:
    wheel = one(dist, "pactmw-*.whl")
    info = wheel.name.split("-py3")[0] + ".dist-info"
    return email.message_from_bytes(zipfile.ZipFile(wheel).read(f"{info}/METADATA"))


def test_the_wheel_needs_no_web_framework(dist: Path) -> None:
    metadata = wheel_metadata(dist)
    required = [r for r in metadata.get_all("Requires-Dist", []) if "extra ==" not in r]
    assert sorted(r.split(">=")[0] for r in required) == ["attrs", "cryptography", "tomli"]
    assert set(metadata.get_all("Provides-Extra", [])) >= {*EXTRAS, "docs", "dev"}
    assert metadata["License-Expression"] == "Apache-2.0"
    # PyPI shows the long description: it is written for someone who installed the wheel,
    # so it does not send them to files only a clone of the repository has.
    description = metadata.get_payload()
    assert isinstance(description, str)
    assert 'pip install "pactmw' in description
    assert "make demo" not in description
    assert "examples/" not in description


def test_the_sdist_holds_what_a_rebuild_and_a_reader_need(dist: Path) -> None:
    sdist = one(dist, "pactmw-*.tar.gz")
    root = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
    for needed in ("LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml",
                   "src/pactmw/py.typed", "src/pactmw/__init__.py"):  # fmt: skip
        assert f"{root}/{needed}" in names, needed


@pytest.mark.timeout(900)
def test_a_clean_venv_installs_the_wheel_then_each_extra(
    dist: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    home = tmp_path_factory.mktemp("clean")
    venv = home / "venv"
    sh(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    wheel = one(dist, "pactmw-*.whl")
    samples = find_samples()
    spec = home / "spec.json"

    def install(requirement: str) -> None:
        sh(python, "-m", "pip", "install", "--quiet", requirement, timeout=600)

    def probe(installed: list[str]) -> None:
        spec.write_text(
            json.dumps(
                {
                    "installed": installed,
                    "samples": {name: samples[name].code for name in PROBED_SAMPLES},
                }
            )
        )
        # Run from outside the repository, so only the venv's pactmw can be imported.
        assert sh(python, PROBE, spec, cwd=home) == "ok\n"

    install(str(wheel))
    version = sh(venv / "bin" / "pactmw", "--version")
    assert version == f"pactmw {sh(python, '-c', 'import pactmw; print(pactmw.__version__)')}"
    probe([])
    installed: list[str] = []
    for extra in EXTRAS:
        install(f"pactmw[{extra}] @ {wheel.as_uri()}")
        installed.append(extra)
        probe(installed)
