"""The Flask example under `gunicorn --preload -w 2`: the master builds the app, and so opens
the sqlite store, then forks the workers; each must write through a connection of its own."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.store.sqlite import SqliteStore
from tests.examples.support import A2A, BRAND, ISSUER, write_config
from tests.support.agent import identity_token, user_message
from tests.support.net import free_port, loopback_client
from tests.support.servers import REPO, process_server

CONVERSATIONS = 8


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="k1")


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory, key: PrivateJWK
) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """The example served by two preforked workers: its base URL, its tmp folder and the
    gunicorn master's process."""
    tmp = tmp_path_factory.mktemp("gunicorn")
    port = free_port()
    config = write_config(tmp, port, key, "examples.flask_app.app:support_bot")
    argv = [
        sys.executable,
        "-m",
        "gunicorn",
        "--preload",
        "--workers",
        "2",
        "--bind",
        f"127.0.0.1:{port}",
        "examples.flask_app.app:create_app()",
    ]
    env = {"PACTMW_CONFIG": str(config)}
    with process_server(argv, port, env=env, cwd=REPO, log=tmp / "server.log") as master:
        yield f"http://127.0.0.1:{port}", tmp, master


def _open_files(pid: int) -> set[str]:
    """The files process `pid` has open (Linux's /proc)."""
    names = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            names.add(os.readlink(fd))
    return names


def _send(
    client: httpx.Client, key: PrivateJWK, audience: str, text: str, context_id: str | None = None
) -> httpx.Response:
    message = user_message(text, context_id=context_id)
    token = identity_token(key, ISSUER, audience)
    return client.post(
        f"/a2a/{BRAND}/message:send",
        content=json.dumps({"message": message}),
        headers={"Authorization": f"Bearer {token}", "Content-Type": A2A},
    )


def test_preforked_workers_write_every_turn(
    site: tuple[str, Path, subprocess.Popen[bytes]], key: PrivateJWK
) -> None:
    base_url, tmp, master = site
    audience = f"{base_url}/a2a"

    def conversation(n: int) -> str:
        # A fresh connection per request (gunicorn's sync workers close each one), so the
        # requests spread over both workers.
        with loopback_client(base_url=base_url, timeout=30) as client:
            first = _send(client, key, audience, "Where is my order A-1001?")
            assert first.status_code == 200, first.text
            context_id = str(first.json()["message"]["contextId"])
            follow_up = _send(client, key, audience, "Can I return it?", context_id)
            assert follow_up.status_code == 200, follow_up.text
            assert follow_up.json()["message"]["contextId"] == context_id
            return context_id

    with ThreadPoolExecutor(max_workers=4) as pool:
        contexts = list(pool.map(conversation, range(CONVERSATIONS)))

    assert len(set(contexts)) == CONVERSATIONS
    database = tmp / "pactmw" / "pactmw.db"
    # The workers wrote through connections of their own: the master, which opened the
    # store to build the app, closed its connection before forking them.
    if Path("/proc").is_dir():
        held = {name for name in _open_files(master.pid) if name.startswith(str(database))}
        assert not held, f"the gunicorn master still has {held} open"
    store = SqliteStore(database)
    try:
        for context_id in contexts:
            turns = store.history(context_id)
            assert [t.text for t in turns] == ["Where is my order A-1001?", "Can I return it?"]
            assert all(t.reply_text for t in turns)
    finally:
        store.close()
