"""A `pactmw serve` whose sqlite file is replaced by a backup while it runs.

The operator restores a backup with `mv` while the server runs. The server's connection
kept the old file: turns after the restore answered 200 and went to a file nobody opens
again, and at the restart the old file's WAL, left at the path, was replayed onto the
restored file, silently undoing the restore. Now those turns answer 503 (`StoreUnavailable`,
the store says why once in the log), and the restarted server serves the backup as it was.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from pactmw.core.jwk import generate_private_jwk
from tests.reliability.support import (
    assert_reply,
    bearer,
    bot_env,
    inline_agent,
    send,
    write_config,
)
from tests.support.net import free_port, loopback_client
from tests.support.servers import process_server, serve_argv


def test_turns_after_a_restore_are_refused_and_the_restart_serves_the_backup(
    tmp_path: Path,
) -> None:
    key = generate_private_jwk("ES256", kid="restore-1")
    port = free_port()
    database = tmp_path / "pactmw.db"
    backup = tmp_path / "backup.db"
    config = write_config(
        tmp_path / "pactmw.toml",
        port=port,
        store=f"sqlite:///{database}",
        agents=[inline_agent(key)],
    )
    argv, env = serve_argv(config, port), bot_env(tmp_path / "runs.txt")
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "first.log"
    with loopback_client(timeout=30) as client:
        with process_server(argv, port, env=env, log=log):
            first = send(client, base, bearer(key), "hello", "m1")
            context_id = assert_reply(first, message_id="m1", text="hello", earlier=[])["contextId"]
            source, target = sqlite3.connect(database), sqlite3.connect(backup)
            try:
                source.backup(target)  # the operator's backup, taken after m1
            finally:
                source.close()
                target.close()
            second = send(client, base, bearer(key), "and again", "m2", context_id)
            assert_reply(second, message_id="m2", text="and again", earlier=["m1"])
            os.replace(backup, database)  # `mv backup.db pactmw.db`
            third = send(client, base, bearer(key), "still there?", "m3", context_id)
            assert third.status_code == 503, (third.status_code, third.text)
            assert third.headers["Retry-After"] == "1"
        said = log.read_text(errors="replace")
        assert f"sqlite database {database} was deleted or replaced" in said, said[-2000:]
        assert "restart" in said

        with process_server(argv, port, env=env, log=tmp_path / "second.log"):
            # The backup as it was taken: m1 only, so the next turn follows m1 alone.
            fourth = send(client, base, bearer(key), "thanks", "m4", context_id)
            assert_reply(
                fourth, message_id="m4", text="thanks", earlier=["m1"], context_id=context_id
            )
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
