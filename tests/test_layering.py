"""The layers import only downwards: every import of every module is read with `ast` (no
importing), including imports inside functions and under `TYPE_CHECKING`.

    core                 pure building blocks: nothing of pactmw but core
    protocols            pure: core only (no web framework, store, Provider, adapters,
                         client, settings)
    store                no Provider, no adapters, no client
    provider             no adapters, no client, no web framework (it is framework-neutral)
    client               no server code (Provider, adapters, store), no settings, no
                         web framework
    adapters, config     may import the layers above
    brand_login, check,  the tools on top: may import anything; no layer above imports them
    cli, demo

Today's arrows all follow these rules, so there is no known exception; a new arrow that
breaks one fails here with the module and the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pactmw

SRC = Path(pactmw.__file__).parent

FRAMEWORKS = ("starlette", "werkzeug", "django", "flask", "fastapi", "asgiref")
SERVER = ("pactmw.store", "pactmw.provider", "pactmw.adapters")
#: The tools on top: the development login app, the conformance checker, the CLI, the demo.
TOOLS = ("pactmw.brand_login", "pactmw.check", "pactmw.cli", "pactmw.demo")

#: layer -> the packages (and their submodules) its modules must not import.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "pactmw.core": (
        *FRAMEWORKS,
        *SERVER,
        *TOOLS,
        "pactmw.client",
        "pactmw.protocols",
        "pactmw.config",
    ),
    "pactmw.protocols": (*FRAMEWORKS, *SERVER, *TOOLS, "pactmw.client", "pactmw.config"),
    "pactmw.store": (*FRAMEWORKS, *TOOLS, "pactmw.provider", "pactmw.adapters", "pactmw.client"),
    "pactmw.provider": (*FRAMEWORKS, *TOOLS, "pactmw.adapters", "pactmw.client"),
    "pactmw.client": (*FRAMEWORKS, *SERVER, *TOOLS, "pactmw.config"),
}

#: (importing module, imported module) pairs that break a rule on purpose, with the reason.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = {
    # The Django store (store = "django") runs the SQL store on Django's own connection and
    # transactions; DESIGN.md puts it in the store layer. It uses django.db (and django.apps
    # only to tell a database not migrated yet from an app not installed, in the message that
    # says which step is missing), and only a "django" store URL imports it.
    ("pactmw.store.django", name)
    for name in (
        "django.db",
        "django.db.DEFAULT_DB_ALIAS",
        "django.db.connections",
        "django.db.transaction",
        "django.db.utils",
        "django.conf",
        "django.conf.settings",
        "django.core.exceptions",
        "django.core.exceptions.ImproperlyConfigured",
        "django.apps",
        "django.apps.apps",
    )
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The absolute names of the modules `path` imports (relative imports resolved)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            # `from pactmw import provider` imports the module pactmw.provider.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


MODULES = sorted(SRC.rglob("*.py"), key=_module_name)


def test_the_walk_sees_every_layer() -> None:
    names = {_module_name(path) for path in MODULES}
    for layer in FORBIDDEN:
        assert any(_within(name, layer) for name in names), layer


def test_imports_are_resolved() -> None:
    found = imports(SRC / "provider" / "delegated" / "_errors.py")
    assert "pactmw.core.errors" in found
    assert "pactmw.core.errors.PactmwError" in found


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_no_import_breaks_the_layering(path: Path) -> None:
    name = _module_name(path)
    rules = [banned for layer, banned in FORBIDDEN.items() if _within(name, layer)]
    broken = sorted(
        imported
        for imported in imports(path)
        for banned in rules
        if any(_within(imported, package) for package in banned)
        and (name, imported) not in KNOWN_EXCEPTIONS
    )
    assert broken == [], f"{name} imports {broken}"
