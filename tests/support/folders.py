"""A folder in which no file can be created, for the tests of what a failed write leaves."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

__all__ = ["unwritable_folder"]


@contextlib.contextmanager
def unwritable_folder(folder: Path) -> Iterator[Path]:
    """`folder` made read-only, or /sys when this user ignores permission bits (root):
    sysfs refuses new files even to root. `folder` is writable again afterwards."""
    folder.chmod(0o500)
    try:
        try:
            (folder / "probe").touch()
        except PermissionError:
            yield folder
        else:
            (folder / "probe").unlink()
            yield Path("/sys")
    finally:
        folder.chmod(0o700)
