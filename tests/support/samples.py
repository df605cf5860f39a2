"""The code samples of README.md and docs/, as the tests that run them find them.

A sample is a fenced ```python block right after a `<!-- readme-test: NAME -->` line; names
are unique across every page. Inside a list item the mark and the block are indented alike,
and the sample is the block's code without that indentation. tests/test_readme.py runs each
against real servers, and tests/test_packaging.py runs some of them in a clean venv that
installed only the wheel and the extra the sample needs.
"""

from __future__ import annotations

import re
from pathlib import Path

from attrs import frozen

from tests.support.servers import REPO

__all__ = ["PAGES", "SAMPLE", "Sample", "find_samples"]

SAMPLE = re.compile(r"^( *)<!-- readme-test: (\w+) -->\n\1```python\n(.*?)^\1```$", re.S | re.M)

#: Every page whose samples are executed: the README and each page of the documentation.
PAGES = (REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")))


@frozen
class Sample:
    """One marked sample: its `name`, the `page` it is on, and its `code`."""

    name: str
    page: Path
    code: str

    @property
    def filename(self) -> str:
        """What tracebacks show: the page (relative to the repository) and the sample."""
        return f"{self.page.relative_to(REPO)}:{self.name}"


def find_samples(pages: tuple[Path, ...] = PAGES) -> dict[str, Sample]:
    """Every marked sample of `pages` by name; a name used twice is an error."""
    found: dict[str, Sample] = {}
    for page in pages:
        for indent, name, code in SAMPLE.findall(page.read_text(encoding="utf-8")):
            if name in found:
                raise ValueError(f"sample {name!r} is marked on {found[name].page} and {page}")
            lines = code.splitlines(keepends=True)
            found[name] = Sample(name, page, "".join(line.removeprefix(indent) for line in lines))
    return found
