"""What the client's helpers write: whole files, the user's path in errors, no folder made
unless asked (issue 18 point 5; the CLI's own writes are in tests/test_cli.py)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from pactmw.client import AgentSigner, BrokerCredential, write_jwks
from pactmw.core.jwk import generate_private_jwk


def test_write_jwks_names_the_path_it_was_given(tmp_path: Path) -> None:
    signer = AgentSigner.generate(issuer="https://pa.example")
    (tmp_path / "jwks.json").mkdir()  # a folder where the file should go
    with pytest.raises(IsADirectoryError) as refused:
        signer.write_jwks(tmp_path / "jwks.json")
    assert refused.value.filename == str(tmp_path / "jwks.json")  # not the temporary file
    assert os.listdir(tmp_path) == ["jwks.json"]
    given = str(tmp_path / "site" / "jwks.json")
    with pytest.raises(FileNotFoundError) as missing:
        write_jwks(signer.public_jwks(), given)
    assert missing.value.filename == given
    assert not (tmp_path / "site").exists()
    written = write_jwks(signer.public_jwks(), given, parents=True)
    assert json.loads(written.read_text()) == signer.public_jwks()
    assert stat.S_IMODE(written.stat().st_mode) == 0o644


def credential() -> BrokerCredential:
    return BrokerCredential(agent_id="agent-1", credential="c.j.w", key=generate_private_jwk())


def test_a_saved_credential_replaces_an_older_file_readable_by_the_owner_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / "parafe-credential.json"
    path.write_text("an older, world-readable file")
    path.chmod(0o644)
    held = credential()
    held.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert BrokerCredential.load(path).to_dict() == held.to_dict()
    assert os.listdir(tmp_path) == ["parafe-credential.json"]


def test_a_save_that_fails_midway_keeps_the_older_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "parafe-credential.json"
    older = credential()
    older.save(path)
    real_fdopen = os.fdopen

    def disk_fills_up_midway(descriptor: int, *args: Any, **kwargs: Any) -> Any:
        handle = real_fdopen(descriptor, *args, **kwargs)
        real_write = handle.write

        def write(text: str) -> int:
            real_write(text[:20])
            handle.flush()
            raise OSError(28, "No space left on device")

        handle.write = write
        return handle

    monkeypatch.setattr(os, "fdopen", disk_fills_up_midway)
    with pytest.raises(OSError, match="No space left"):
        credential().save(path)
    monkeypatch.undo()
    assert BrokerCredential.load(path).to_dict() == older.to_dict()
    assert os.listdir(tmp_path) == ["parafe-credential.json"]


def test_a_credential_is_not_saved_into_a_missing_folder(tmp_path: Path) -> None:
    given = str(tmp_path / "secrets" / "parafe-credential.json")
    with pytest.raises(FileNotFoundError) as missing:
        credential().save(given)
    assert missing.value.filename == given
    assert not (tmp_path / "secrets").exists()
