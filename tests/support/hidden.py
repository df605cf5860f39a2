"""Run Python in a subprocess as if some installed packages were not there.

A `sitecustomize` module (imported by `site` at start-up, from PYTHONPATH) puts None in
`sys.modules` for each hidden name: `import name` then raises ModuleNotFoundError and
`importlib.util.find_spec(name)` answers None, exactly what an environment without the
package gives. The clean-venv test of tests/test_packaging.py proves the same with nothing
hidden and nothing installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from tests.support.servers import REPO

__all__ = ["env_without"]


def env_without(directory: Path, names: Iterable[str]) -> dict[str, str]:
    """Environment variables for a subprocess in which the top-level packages `names` are
    not importable (the repository stays importable, for `tests.` and `examples.`, and so
    does its `src`: in a second worktree, the venv's editable pactmw is another tree's)."""
    directory.mkdir(parents=True, exist_ok=True)
    hidden = tuple(sorted(names))
    (directory / "sitecustomize.py").write_text(
        f"import sys\n\nsys.modules.update(dict.fromkeys({hidden!r}))\n"
    )
    return {"PYTHONPATH": os.pathsep.join((str(directory), str(REPO / "src"), str(REPO)))}
