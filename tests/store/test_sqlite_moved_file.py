"""A sqlite file deleted or replaced under an open `SqliteStore` refuses writes, loudly.

sqlite keeps writing to the file it opened: after an `rm`, or an `mv` of a backup over the
path, every later write went to a file nobody will open again, and was gone at the next
restart. Worse, the old file's WAL stays at the path, and the next opener replayed it onto
the restored file, silently undoing the restore. Now a write on a file that is no longer the
one at the path fails with `StoreUnavailable` (logged once at ERROR), the old file's WAL is
emptied into the old file so that the file now at the path opens as it is, and reads go on
answering from the old file. A path that still names the same file (through a hard link) is
no change at all.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import pactmw
from pactmw.store import SqliteStore, StoreUnavailable

T0 = 1_700_000_000.0
AGENT = "https://pa.example"
MOVED = "was deleted or replaced"


def _conversations(path: Path) -> int:
    """How many conversations the file at `path` holds, as a fresh process's store sees it."""
    SqliteStore(path).close()  # opening replays what a WAL at the path holds
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM pactmw_conversations").fetchone()[0])
    finally:
        conn.close()


def _start(store: SqliteStore, message_id: str) -> str:
    """A new turn: the single-statement write of `message:send`."""
    return store.start_conversation(
        brand_id="acme",
        issuer=AGENT,
        sub="u1",
        account=None,
        message_id=message_id,
        text="hello",
        now=T0,
    )


def _backup(path: Path, to: Path) -> None:
    """A consistent copy, as an operator's backup job takes it."""
    source, target = sqlite3.connect(path), sqlite3.connect(to)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def _refused(store: SqliteStore, path: Path) -> None:
    """Every kind of write fails, naming the path; reads go on from the file it has open."""
    with pytest.raises(StoreUnavailable, match=MOVED) as info:
        store.create_conversation(brand_id="acme", issuer=AGENT, sub="u1", now=T0)
    assert str(path) in str(info.value)
    assert "restart" in str(info.value)
    with pytest.raises(StoreUnavailable, match=MOVED):
        _start(store, "m-after")  # message:send's one-statement write
    with pytest.raises(StoreUnavailable, match=MOVED):
        store.set_agent_enabled(AGENT, False)
    assert store.agent_enabled(AGENT) is True


def test_a_deleted_file_refuses_writes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    try:
        store.set_agent_enabled(AGENT, True)
        _start(store, "m1")
        os.unlink(path)
        with caplog.at_level(logging.ERROR, logger="pactmw.store"):
            _refused(store, path)
            _refused(store, path)
        assert len(caplog.records) == 1, caplog.records  # once, not once a write
        assert MOVED in caplog.records[0].getMessage()
        assert str(path) in caplog.records[0].getMessage()
    finally:
        store.close()
    assert _conversations(path) == 0  # a new, empty file: nothing claimed to be stored in it


def test_a_file_replaced_by_its_backup_refuses_writes_and_opens_as_restored(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    try:
        store.set_agent_enabled(AGENT, True)
        _start(store, "m1")
        _backup(path, tmp_path / "backup.db")
        for n in range(2, 40):  # in the WAL, not yet checkpointed into the file
            _start(store, f"m{n}")
        os.replace(tmp_path / "backup.db", path)  # `mv backup.db store.db`
        _refused(store, path)
    finally:
        store.close()
    # The restored file as it was backed up: the old file's WAL, still at the path, is not
    # replayed onto it.
    assert _conversations(path) == 1
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        check.close()


def test_a_file_replaced_and_closed_without_a_write_opens_as_restored(tmp_path: Path) -> None:
    """No write came after the restore (a quiet server stopped to pick it up): closing the
    store must not leave the old file's WAL for the restored file either."""
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    try:
        _start(store, "m1")
        _backup(path, tmp_path / "backup.db")
        for n in range(2, 40):
            _start(store, f"m{n}")
        os.replace(tmp_path / "backup.db", path)
    finally:
        store.close()
    assert _conversations(path) == 1


@pytest.mark.parametrize("how", ["second name", "same file moved back"])
def test_a_path_that_names_the_same_file_keeps_working(tmp_path: Path, how: str) -> None:
    """Only the file matters, not how it is named: a hard link (`ln store.db copy.db`), or a
    link renamed over the path (`ln store.db tmp; mv tmp store.db`), changes nothing."""
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    try:
        _start(store, "m1")
        os.link(path, tmp_path / "other.db")
        if how == "same file moved back":
            os.replace(tmp_path / "other.db", path)
        _start(store, "m2")
        store.set_agent_enabled(AGENT, True)
        assert store.agent_enabled(AGENT) is True
    finally:
        store.close()
    assert _conversations(path) == 2


def test_a_deleted_wal_refuses_writes_and_a_crash_then_loses_nothing(tmp_path: Path) -> None:
    """sqlite goes on appending to a deleted `-wal`, which nothing reads again: a process
    killed later (SIGKILL, the OOM killer, a power cut) lost every write since the last
    checkpoint, and a fresh open found an empty database. The refusal checkpoints them into
    the file first. The writer is a child process ended by `os._exit`, as a kill ends it."""
    path = tmp_path / "store.db"
    child = f"""
import os
from pactmw.store import SqliteStore, StoreUnavailable
store = SqliteStore({str(path)!r})
for n in range(3):
    store.start_conversation(brand_id="acme", issuer={AGENT!r}, sub="u1", account=None,
        message_id=f"m{{n}}", text="hello", now={T0!r})
os.unlink({str(path)!r} + "-wal")
try:
    store.start_conversation(brand_id="acme", issuer={AGENT!r}, sub="u1", account=None,
        message_id="m-after", text="hello", now={T0!r})
    print("stored")
except StoreUnavailable as exc:
    print(exc)
os._exit(0)
"""
    src = str(Path(pactmw.__file__).parents[1])  # this checkout's, as the test imports it
    out = subprocess.run(
        [sys.executable, "-c", child],
        env={**os.environ, "PYTHONPATH": src},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert MOVED in out, out
    assert f"{path}-wal" in out, out
    assert _conversations(path) == 3


def test_a_relative_path_names_the_file_it_opened_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default store is `sqlite:///.pactmw/pactmw.db`, relative: sqlite makes it absolute
    when it opens it, so a process that changes its working folder later (a daemonizing
    server) still has the same file at the same path."""
    (tmp_path / "app").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "app")
    store = SqliteStore(Path(".pactmw/pactmw.db"))
    try:
        _start(store, "m1")
        monkeypatch.chdir(tmp_path / "elsewhere")
        _start(store, "m2")
    finally:
        store.close()
    assert _conversations(tmp_path / "app" / ".pactmw" / "pactmw.db") == 2


def test_a_symlinked_path_follows_its_target(tmp_path: Path) -> None:
    """A path that is a symlink names its target, where sqlite also keeps the `-wal`: writes
    go on; pointing the link at another file is a replacement."""
    (tmp_path / "data").mkdir()
    link = tmp_path / "store.db"
    link.symlink_to(tmp_path / "data" / "store.db")
    store = SqliteStore(link)
    try:
        _start(store, "m1")
        _start(store, "m2")
        _backup(link, tmp_path / "data" / "backup.db")
        link.unlink()
        link.symlink_to(tmp_path / "data" / "backup.db")
        with pytest.raises(StoreUnavailable, match=MOVED):
            _start(store, "m3")
    finally:
        store.close()
    assert _conversations(tmp_path / "data" / "store.db") == 2
