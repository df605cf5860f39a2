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
import re
import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import metadata, requires
from pathlib import Path

import pytest

from tests.support.samples import find_samples
from tests.support.servers import REPO

#: The extras in an order where none brings a later one's framework (flask brings werkzeug,
#: fastapi starlette, drf django, every web extra Jinja2, which is all `pages` brings): each
#: install shows its own adapter (or the consent pages) starting to work.
EXTRAS = ("pages", "wsgi", "flask", "asgi", "fastapi", "django", "drf", "postgres", "serve")
#: The samples the probe runs, by the extra they need (README.md and docs/ hold them).
PROBED_SAMPLES = (
    "direct", "pypi_direct", "starlette", "provider", "fastapi", "wsgi", "flask", "django", "drf",
    "testing", "custom_delegation",
)  # fmt: skip
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


@pytest.mark.parametrize(
    ("extra", "brings"),
    [
        ("pages", {"jinja2"}),
        ("asgi", {"starlette", "jinja2"}),
        ("fastapi", {"fastapi", "jinja2"}),
        ("wsgi", {"werkzeug", "jinja2"}),
        ("flask", {"flask"}),  # Flask brings Werkzeug and Jinja2 itself
        ("django", {"django", "jinja2"}),
        ("drf", {"django", "djangorestframework", "jinja2"}),
        ("postgres", {"psycopg"}),
        ("serve", {"starlette", "uvicorn", "jinja2"}),
    ],
)
def test_each_extra_brings_its_framework_and_no_other(extra: str, brings: set[str]) -> None:
    # Issue 18: Flask and Django users once got Starlette installed.
    assert requirement_names(extra) == brings


def test_the_sdist_holds_what_a_rebuild_and_a_reader_need(dist: Path) -> None:
    sdist = one(dist, "pactmw-*.tar.gz")
    root = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
    # The PyPI page says the documentation is built from the sdist's docs/ with MkDocs.
    for needed in ("LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml",
                   "src/pactmw/py.typed", "src/pactmw/__init__.py", "mkdocs.yml",
                   "docs/index.md", "docs/getting-started/django.md"):  # fmt: skip
        assert f"{root}/{needed}" in names, needed
    description = wheel_metadata(dist).get_payload()
    assert isinstance(description, str)
    assert "from the `docs/` folder of the source distribution" in " ".join(description.split())


def test_the_changelog_keeps_a_changelog() -> None:
    # https://keepachangelog.com/en/1.1.0/: versions newest first, Unreleased on top, and
    # the changes of each grouped under its six kinds.
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    assert "https://keepachangelog.com/" in text
    versions = re.findall(r"^## (.+)$", text, re.M)
    assert versions[0] == "Unreleased", versions
    for version in versions[1:]:
        assert re.fullmatch(r"\[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}", version), version
    kinds = set(re.findall(r"^### (.+)$", text, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds


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


def requirement_names(extra: str | None) -> set[str]:
    """The distributions pactmw requires for `extra` (None: with no extra), names normalised;
    those for some Python versions only (tomli) are left out."""
    names = set()
    for requirement in requires("pactmw") or []:
        if "python_version" in requirement:
            continue
        marker = re.search(r"extra == ['\"]([\w-]+)['\"]", requirement)
        if (marker.group(1) if marker else None) == extra:
            name = re.match(r"[A-Za-z0-9._-]+", requirement)
            assert name is not None, requirement
            names.add(re.sub(r"[-_.]+", "-", name.group(0)).lower())
    return names


@pytest.mark.timeout(600)
def test_make_demo_installs_only_the_serve_extra_and_runs_the_demo(tmp_path: Path) -> None:
    # Issue 18: the first `make demo` once spent ~50 s installing the dev extra, which the
    # demo never uses. This runs the Makefile's own demo target into a new venv.
    venv = tmp_path / "venv"
    demo = subprocess.run(
        ["make", "--no-print-directory", "demo", f"VENV={venv}", f"PYTHON={sys.executable}"],
        cwd=REPO, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert re.search(r"install .*-e '\.\[serve\]'\n", demo.stdout), demo.stdout
    assert demo.stdout.rstrip().splitlines()[-1].startswith("demo complete"), demo.stdout
    listed = sh(venv / "bin" / "python", "-c",
                "import importlib.metadata as m\n"
                "for d in m.distributions(): print(d.metadata['Name'])")  # fmt: skip
    installed = {re.sub(r"[-_.]+", "-", name).lower() for name in listed.split()}
    needed = requirement_names(None) | requirement_names("serve") | {"pactmw"}
    assert needed <= installed, needed - installed
    # What only the dev and docs extras and the other adapters bring stays out.
    others = ("dev", "docs", "bench", "asgi", "fastapi", "wsgi", "flask", "django", "drf",
              "postgres")  # fmt: skip
    elsewhere = set().union(*(requirement_names(extra) for extra in others)) - needed
    assert not installed & elsewhere, installed & elsewhere


def test_make_test_installs_what_every_extra_brings(tmp_path: Path) -> None:
    # `make test` keeps installing everything: what each extra brings is in its install.
    venv = tmp_path / "venv"
    planned = sh("make", "--no-print-directory", "-n", f"{venv}/.installed", f"VENV={venv}",
                 cwd=REPO)  # fmt: skip
    (extras,) = re.findall(r"install .*-e '\.\[([\w,]+)\]'", planned)
    installed = set().union(*(requirement_names(extra) for extra in extras.split(",")))
    every_extra = set(metadata("pactmw").get_all("Provides-Extra") or [])
    for extra in every_extra - {"bench"}:  # the benchmarks install theirs themselves
        assert requirement_names(extra) <= installed, extra
