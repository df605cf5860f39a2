"""No test module is a library (issue #12): no module under tests/ imports from a test module
(a `test_*.py` file), so that changing one test never breaks another. What tests share lives
in tests/support/, or in a folder's own `support.py` (or `conftest.py`) when only that folder
needs it; other folders may import a folder's support module, never its tests.

Every import of every module under tests/ is read with `ast` (no importing), including imports
inside functions and under `TYPE_CHECKING`, and relative imports resolved.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(TESTS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_test_module(name: str) -> bool:
    # A test module's own name, or a test function imported by name (which pytest would
    # also collect, and run again, in the importing module).
    return name.startswith("tests.") and name.rpartition(".")[2].startswith("test_")


def imported_tests(source: str, package: str) -> list[tuple[int, str]]:
    """(line, name) of each test module (or test) that `source`, a module of `package`,
    imports, whatever the spelling: `import tests.a.test_b`, `from tests.a.test_b import x`,
    `from tests.a import test_b`, `from .test_b import x`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.extend((node.lineno, name) for name in names if _is_test_module(name))
    return sorted(set(found))


def test_the_rule_sees_every_spelling() -> None:
    source = "\n".join(
        (
            "import tests.browser.test_consent_page",
            "from tests.browser.test_consent_page import screenshot",
            "from tests.browser import test_consent_page",
            "from .test_decide_once import press",
            "from . import test_page_layout",
            "def later() -> None:",
            "    from tests.test_cli import run",
            "from tests.browser.support import screenshot",
            "from tests.support.cli import run",
        )
    )
    assert [name for _, name in imported_tests(source, "tests.browser")] == [
        "tests.browser.test_consent_page",
        "tests.browser.test_consent_page",
        "tests.browser.test_consent_page",
        "tests.browser.test_decide_once",
        "tests.browser.test_page_layout",
        "tests.test_cli",
    ]


MODULES = sorted(TESTS.rglob("*.py"), key=_module_name)


def test_the_walk_sees_test_and_support_modules() -> None:
    names = {_module_name(path) for path in MODULES}
    assert {"tests.test_test_layout", "tests.support.cli", "tests.browser.support"} <= names
    assert "tests.browser.conftest" in names


def _package(path: Path) -> str:
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def test_no_module_under_tests_imports_a_test_module() -> None:
    broken = [
        f"{path.relative_to(TESTS.parent)}:{line} imports {name}"
        for path in MODULES
        for line, name in imported_tests(path.read_text(encoding="utf-8"), _package(path))
    ]
    assert broken == [], "\n".join(broken)
