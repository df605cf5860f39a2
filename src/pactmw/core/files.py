"""Files written whole or not at all: a temporary file beside the target, then a rename.

A reader never sees half a file (a key, a JWKS a web server publishes), a crash leaves the
old file or the new one, and a private key has its mode from the moment it exists. Errors
name the path the caller gave, never the temporary file, which the caller has never heard of.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

__all__ = ["stage_file", "write_file_atomically"]


def stage_file(path: str | os.PathLike[str], text: str, mode: int) -> Path:
    """Write `text` (UTF-8) completely, flushed to disk, to a new temporary file beside
    `path`, with permission `mode` before anything is written; return that file.

    The caller renames it onto `path` (`os.replace`) or removes it. An `OSError` is the
    temporary file's, and nothing is left behind.
    """
    target = Path(path)
    descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def write_file_atomically(
    path: str | os.PathLike[str], text: str, mode: int, *, parents: bool = False
) -> Path:
    """Write `text` to `path` whole or not at all, with permission `mode`; return the path.

    An existing file is replaced. A missing folder is created only with `parents=True`;
    otherwise `FileNotFoundError`. Every `OSError` has `path` as given for its `filename`.
    """
    target = Path(path)
    try:
        if parents:
            target.parent.mkdir(parents=True, exist_ok=True)
        elif not target.parent.is_dir():
            raise FileNotFoundError(errno.ENOENT, "no such folder (parents=True creates it)")
        temporary = stage_file(target, text, mode)
        try:
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    except OSError as exc:
        # OSError(errno, ...) is the matching subclass (PermissionError, IsADirectoryError).
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
    return target
