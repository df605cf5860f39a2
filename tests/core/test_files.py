"""Files written whole or not at all, and errors that name the caller's path (issue 18)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.core.files import stage_file, write_file_atomically
from tests.support.folders import unwritable_folder


@pytest.fixture
def unwritable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with unwritable_folder(tmp_path_factory.mktemp("read-only")) as folder:
        yield folder


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_has_its_text_and_mode(tmp_path: Path) -> None:
    written = write_file_atomically(str(tmp_path / "key.jwk"), "secret ✓", 0o600)
    assert written == tmp_path / "key.jwk"
    assert (written.read_text(encoding="utf-8"), mode(written)) == ("secret ✓", 0o600)
    assert os.listdir(tmp_path) == ["key.jwk"]


def test_an_existing_file_is_replaced_with_the_new_mode(tmp_path: Path) -> None:
    target = tmp_path / "key.jwk"
    target.write_text("old, world-readable")
    target.chmod(0o644)
    write_file_atomically(target, "new", 0o600)
    assert (target.read_text(), mode(target)) == ("new", 0o600)
    assert os.listdir(tmp_path) == ["key.jwk"]


def test_a_missing_folder_is_created_only_when_asked(tmp_path: Path) -> None:
    given = str(tmp_path / "public" / "jwks.json")
    with pytest.raises(FileNotFoundError) as missing:
        write_file_atomically(given, "{}", 0o644)
    assert missing.value.filename == given
    assert "parents=True" in str(missing.value)
    assert not (tmp_path / "public").exists()
    write_file_atomically(given, "{}", 0o644, parents=True)
    assert Path(given).read_text() == "{}"


def test_a_folder_in_the_way_is_named_as_given(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").mkdir()
    with pytest.raises(IsADirectoryError) as refused:
        write_file_atomically(tmp_path / "jwks.json", "{}", 0o644)
    assert refused.value.filename == str(tmp_path / "jwks.json")
    assert os.listdir(tmp_path) == ["jwks.json"]  # no temporary file left beside it


def test_an_unwritable_folder_is_named_as_given(unwritable: Path) -> None:
    given = str(unwritable / "jwks.json")
    with pytest.raises(PermissionError) as refused:
        write_file_atomically(given, "{}", 0o644)
    assert refused.value.filename == given
    assert str(refused.value) == f"[Errno 13] Permission denied: {given!r}"


def test_a_write_that_fails_keeps_the_old_file_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "jwks.json"
    target.write_text("old")

    def disk_full(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left") as failed:
        write_file_atomically(target, "new", 0o644)
    assert failed.value.filename == str(target)
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["jwks.json"]


def test_a_staged_file_is_complete_beside_its_target(tmp_path: Path) -> None:
    staged = stage_file(tmp_path / "agent.jwk", "whole", 0o600)
    assert staged.parent == tmp_path
    assert staged.name.startswith(".agent.jwk.")
    assert (staged.read_text(), mode(staged)) == ("whole", 0o600)
    assert not (tmp_path / "agent.jwk").exists()  # renaming it is the caller's step
