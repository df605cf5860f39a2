"""The documentation site builds with `mkdocs build --strict`, and strict means strict.

The build renders every page of docs/ and the API reference (mkdocstrings reads the
docstrings of the public modules); a broken link, a missing anchor, a page left out of the
navigation or an API reference to nothing is a warning, and `--strict` fails on warnings.
The README stays a short overview whose links all lead somewhere.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shlex
import subprocess
import sys
import textwrap
import unicodedata
from importlib.metadata import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from pactmw.cli import build_parser
from tests.support.servers import REPO

MKDOCS = Path(sys.executable).with_name("mkdocs")


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.timeout(360)
def test_the_site_builds_strictly_with_its_api_reference(tmp_path: Path) -> None:
    built = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    api = (tmp_path / "site" / "api" / "pactmw" / "index.html").read_text()
    for name in ("IdentityVerifier", "MissingExtra", "AgentRegistry"):
        assert f'id="pactmw.{name}"' in api, name
    adapters = (tmp_path / "site" / "api" / "adapters" / "index.html").read_text()
    assert 'id="pactmw.adapters.django.PersonalAgentMiddleware"' in adapters
    security = (tmp_path / "site" / "security" / "index.html").read_text()
    assert "Deployment checklist" in security  # SECURITY.md, included


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        pytest.param("[a page](nowhere.md)\n", "nowhere.md", id="broken-link"),
        pytest.param("[an anchor](#nowhere)\n", "#nowhere", id="missing-anchor"),
        pytest.param("::: pactmw.nowhere\n", "pactmw.nowhere", id="missing-reference"),
    ],
)
def test_the_strict_build_fails_on_what_it_must_catch(
    tmp_path: Path, page: str, expected: str
) -> None:
    # The project's own configuration, on one page of its own.
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# Index\n\n{page}")
    config.update(docs_dir=str(docs), nav=["index.md"], exclude_docs="")
    config["markdown_extensions"] = [
        e for e in config["markdown_extensions"] if "pymdownx.snippets" not in str(e)
    ]
    written = tmp_path / "mkdocs.yml"
    written.write_text(yaml.safe_dump(config))
    built = build(written, tmp_path / "site")
    assert built.returncode != 0
    assert expected in built.stderr


def test_the_readme_is_a_short_overview_with_two_quick_start_commands() -> None:
    readme = (REPO / "README.md").read_text()
    quick_start = readme.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    (commands,) = re.findall(r"```sh\n(.*?)```", quick_start, re.S)
    assert [line.split()[:2] for line in commands.splitlines()] == [
        ["make", "demo"],
        ["make", "test"],
    ]
    assert 'pip install "pactmw[' in readme
    assert len(readme.splitlines()) < 80
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if not target.startswith("https://"):
            assert (REPO / target).exists(), target


def nav_pages(entries: Any) -> list[str]:
    """The pages of a MkDocs `nav` (a list of pages, or of {title: page or list})."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    return [page for entry in entries for page in nav_pages(entry)]


NAV = nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])

#: The pages issue 18 asks the site for: getting started per framework, then the reference.
REQUIRED = (
    "getting-started/django.md", "getting-started/flask.md",
    "getting-started/starlette-fastapi.md", "getting-started/wsgi.md",
    "getting-started/custom-server.md", "provider.md", "delegated.md", "parafe.md", "client.md",
    "cli.md", "configuration.md", "deployment.md", "security.md", "performance.md",
)  # fmt: skip


def section(page: str, title: str) -> str:
    """The text of `page`'s `## title` section, up to the next `## ` heading."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    assert f"\n## {title}\n" in text, f"{page} has no '## {title}' section"
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_site_has_every_page_the_issue_asks_for() -> None:
    assert set(REQUIRED) <= set(NAV), set(REQUIRED) - set(NAV)
    for title in ("PostgreSQL", "Several processes", "Behind a proxy"):
        assert section("deployment.md", title).strip(), title


@pytest.mark.parametrize("page", [p for p in NAV if not p.startswith("api/")])
def test_every_page_says_what_it_does_not_do(page: str) -> None:
    # As Starlette's documentation does: a Limitations section, and something in it.
    assert section(page, "Limitations").strip()


def test_what_pactmw_writes_itself_says_why_for_each_part() -> None:
    text = (REPO / "docs" / "dependencies.md").read_text(encoding="utf-8")
    part = text.split("**What pactmw writes itself, and why:**\n", 1)[1].split("\n## ", 1)[0]
    bullets = re.findall(r"^- \*\*(.+?)\*\*(.+?)(?=^- |\Z)", part, re.M | re.S)
    topics = [title for title, _ in bullets]
    assert topics == [
        "JOSE verification", "The SSRF-safe fetcher", "The device-code authorization server",
        "Not the page HTML any more: Jinja2", "The client transport",
    ]  # fmt: skip
    for title, reason in bullets:
        assert len(reason.split()) > 30, title  # a reason, not a name


#: The extras a user installs: every extra of the distribution but the project's own tools.
USER_EXTRAS = set(metadata("pactmw").get_all("Provides-Extra") or []) - {"dev", "docs", "bench"}


@pytest.mark.parametrize("page", ["README.md", "docs/index.md", "docs/pypi.md"])
def test_every_install_section_names_every_extra(page: str) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    install = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"\[(\w+)\]", install)) == USER_EXTRAS


def documented_modules() -> set[str]:
    """The modules the API reference documents (its `::: module` lines): pactmw's public API."""
    return {
        line.removeprefix("::: ").strip()
        for page in (REPO / "docs" / "api").glob("*.md")
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("::: ")
    }


def test_every_method_of_the_top_level_api_is_in_the_reference() -> None:
    # Found in a custom-server trial: the reference (mkdocstrings, `show_if_no_docstring:
    # false`) left out what has no docstring, so `pactmw.ReceiptVerifier` showed no way to
    # check a session receipt and `ParafeVerifier` no async `averify_token`.
    import pactmw

    undocumented = []
    for name in pactmw.__all__:
        exported = getattr(pactmw, name)
        if not isinstance(exported, type):
            continue
        for member, value in vars(exported).items():
            if member.startswith("_"):
                continue
            function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            is_member = callable(function) or isinstance(function, property)
            if is_member and not (function.__doc__ or "").strip():
                undocumented.append(f"{name}.{member}")
    assert undocumented == []


def test_the_custom_server_page_names_every_reason_the_identity_verifier_gives() -> None:
    # Found in a custom-server trial: the page listed seven reasons and "...", and a server
    # telling an agent's unreachable keys (`jwks_unavailable`) from a bad token had to read
    # the source. The reasons: the verifier's own, and its key cache's (refusals keep them).
    sources = (REPO / "src" / "pactmw" / "protocols" / "identity.py").read_text(encoding="utf-8")
    keys = (REPO / "src" / "pactmw" / "core" / "keys.py").read_text(encoding="utf-8")
    # A reason is the first argument, or each branch of a conditional one.
    raised = re.findall(r'AuthenticationFailed\(\s*"(\w+)"(?: if [^\n]*? else "(\w+)")?', sources)
    reasons = {reason for pair in raised for reason in pair if reason}
    reasons |= set(re.findall(r'KeyUnavailable\(\s*"(\w+)"', keys))
    page = (REPO / "docs" / "getting-started" / "custom-server.md").read_text(encoding="utf-8")
    listed = page.split("with a stable\n`reason`", 1)[1].split("Each is a 401", 1)[0]
    assert reasons == set(re.findall(r"`([a-z_]+)`", listed)) - {"str"}


def sample_imports(sample: str) -> ast.Module:
    """The sample parsed, or only its import statements where it is a fragment (`{...}`)."""
    try:
        return ast.parse(sample)
    except SyntaxError:
        imports = re.findall(r"^(?:from \S+ )?import (?:\([^)]*\)|.*)$", sample, re.M)
        return ast.parse("\n".join(imports))


@pytest.mark.parametrize("page", ["README.md", *(f"docs/{page}" for page in NAV)])
def test_the_samples_import_only_documented_api(page: str) -> None:
    # A reader copies the samples: each pactmw name they import must be one the API
    # reference documents, not an internal such as pactmw.core.jose that may change. A
    # framework's settings module (`pactmw.adapters.django.settings`) is not imported.
    documented = documented_modules()
    internal = []
    text = (REPO / page).read_text(encoding="utf-8")
    for sample in re.findall(r"```python\n(.*?)```", text, re.S):
        for node in ast.walk(sample_imports(textwrap.dedent(sample))):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            if node.module.split(".")[0] != "pactmw":
                continue
            exported: set[str] = set()
            if node.module in documented:
                exported = set(importlib.import_module(node.module).__all__)
            internal += [f"{node.module}.{a.name}" for a in node.names if a.name not in exported]
    assert internal == [], (page, internal)


#: A Markdown link or image `[text](target)`; its target up to the first space (a title).
MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)[^)]*\)")
#: A line of pymdownx.snippets, which docs/security.md includes SECURITY.md with.
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.M)


def without_blocks(text: str) -> str:
    """`text` without its fenced code blocks, where `#` starts no heading."""
    return re.sub(r"^ *```.*?^ *```", "", text, flags=re.S | re.M)


def without_code(text: str) -> str:
    """`text` without its code blocks and inline code, where brackets are no links."""
    return re.sub(r"`[^`\n]*`", "", without_blocks(text))


def heading_anchor(title: str) -> str:
    """The id Python-Markdown's `toc` gives a heading (its default `slugify`)."""
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title.replace("`", ""))
    value = unicodedata.normalize("NFKD", title)
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def page_text(page: Path) -> str:
    """A page as the reader sees it: the snippets it includes expanded."""
    text = page.read_text(encoding="utf-8")
    return SNIPPET.sub(lambda m: (REPO / m.group(1)).read_text(encoding="utf-8"), text)


def dead_links(page: Path) -> list[str]:
    """The relative links of `page` whose file, or anchor in that file, does not exist."""
    dead = []
    for target in MARKDOWN_LINK.findall(without_code(page_text(page))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path) if path else page
        if not linked.exists():
            dead.append(target)
        elif anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ +(.+?) *$", without_blocks(page_text(linked)), re.M)
            if anchor not in {heading_anchor(h) for h in headings}:
                dead.append(target)
    return dead


#: Every page a reader opens on GitHub or the site, the ones `mkdocs build` leaves out too
#: (the README, SECURITY.md, docs/pypi.md, docs/design/): a link there must lead somewhere.
LINKED_PAGES = [REPO / "README.md", REPO / "SECURITY.md", *sorted((REPO / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", LINKED_PAGES, ids=[str(p.relative_to(REPO)) for p in LINKED_PAGES])
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    assert dead_links(page) == []


def test_a_dead_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Its `code` heading\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md) [ok](other.md#its-code-heading) [ok](#page)\n"
        "[gone](gone.md) [no heading](other.md#nowhere) [no anchor](#nowhere)\n"
        "`[in code](gone-too.md)` [web](https://example.com/x.md)\n"
    )
    assert dead_links(page) == ["gone.md", "other.md#nowhere", "#nowhere"]


def test_the_django_guide_lists_every_system_check_in_its_table() -> None:
    # A check id the code reports and the table does not explain (or one the table keeps after
    # the code dropped it) leaves a Django reader with `manage.py check` output to guess at.
    adapter = REPO / "src" / "pactmw" / "adapters" / "django"
    code = {
        found
        for module in ("checks.py", "rest_framework.py")
        for found in re.findall(r"pactmw\.[EW]\d{3}", (adapter / module).read_text())
    }
    guide = (REPO / "docs" / "getting-started" / "django.md").read_text()
    rows = set(re.findall(r"^\| (pactmw\.[EW]\d{3}) \|", guide, flags=re.MULTILINE))
    assert rows == code


def cli_commands(text: str) -> list[str]:
    """The `pactmw check` and `pactmw send` command lines a page tells its reader to run, each
    on one line: inline ones and those of its `sh` blocks (continuations joined)."""
    spans = re.findall(r"`(pactmw\s+(?:check|send)\s+http[^`]*)`", text)
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)
    lines = [
        line
        for block in blocks
        for line in block.replace("\\\n", " ").splitlines()
        if re.match(r"pactmw (?:check|send) http", line)
    ]
    return [" ".join(command.split()) for command in [*spans, *lines]]


@pytest.mark.parametrize("page", ["django.md", "flask.md", "starlette-fastapi.md", "wsgi.md"])
def test_each_provider_guide_writes_a_check_command_its_cli_takes(page: str) -> None:
    # Found in a plain WSGI trial: wsgi.md said to run `pactmw check` with the options of its
    # `pactmw send` plus `--delegated`, and `--sub` is no option of `pactmw check`: argparse
    # refused the command.
    commands = cli_commands((REPO / "docs" / "getting-started" / page).read_text("utf-8"))
    assert any(c.startswith("pactmw check ") and "--delegated" in c for c in commands), commands
    parser = build_parser()
    for command in commands:
        if "..." in command:  # `pactmw send ... "Show my orders"`: a command shortened
            continue
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit:
            pytest.fail(f"{page}: the CLI refuses {command!r}")
