"""A folder in which no file can be created, for the tests of what a failed write leaves."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["read_only_file", "unwritable_folder"]


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


@contextlib.contextmanager
def read_only_file(path: Path) -> Iterator[Path]:
    """`path` made read-only: mode 0444, and immutable (`chattr +i`) when this user ignores
    permission bits (root); skips the test where neither holds. Writable again afterwards."""
    path.chmod(0o444)
    immutable = False
    try:
        try:
            path.open("r+b").close()
        except PermissionError:
            pass
        else:
            try:
                done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
            except OSError as exc:  # no chattr here
                pytest.skip(f"cannot make {path} read-only as this user: {exc}")
            if done.returncode != 0:  # a filesystem without the immutable flag
                pytest.skip(f"cannot make {path} read-only as this user: {done.stderr!r}")
            immutable = True
        yield path
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(0o644)
