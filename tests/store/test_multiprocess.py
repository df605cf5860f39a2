"""Separate OS processes sharing one sqlite file or one PostgreSQL database.

Threads in one process share a lock, so only real processes prove the cross-process
guarantees: one owner per turn, and a worker killed with SIGKILL (even inside a write
transaction) neither wedges the store nor loses the turn for good.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.store import Store, open_store
from tests.store.support import PERSISTENT, process_url, processes_at_once, racer_script

LEASE = 30.0
T0 = 1_700_000_000.0
PROCESSES = 6

# argv: url, context id, message id, work dir, worker index.
RACER = racer_script(
    "url, ctx, mid, work, index",
    """claim = store.claim_message(
    context_id=ctx, message_id=mid, text="hi", now=float(sys.argv[6]), lease_seconds=30.0
)
if claim.kind == "new":
    store.store_reply(
        context_id=ctx,
        message_id=mid,
        reply_message_id="r-" + index,
        reply_text="answered by " + index,
        reply=("answered by " + index).encode(),
        now=float(sys.argv[6]),
    )
print(claim.kind, flush=True)
store.close()
""",
)

# argv: url, the derived context id, work dir, worker index. Starts the conversation with
# that id and answers its first message, or is refused because another process started it.
STARTER = racer_script(
    "url, ctx, work, index",
    """try:
    store.start_conversation(
        brand_id="acme", issuer="https://pa.example", sub="u1", account="acct-" + index,
        message_id="m-" + index, text="hi", now=1.0, context_id=ctx,
    )
except ValueError:
    print("refused", flush=True)
else:
    store.store_reply(
        context_id=ctx, message_id="m-" + index, reply_message_id="r-" + index,
        reply_text="hello", reply=b"hello", now=2.0,
    )
    print("started", flush=True)
store.close()
""",
)

# argv: url, context id, message id. Claims the turn, then dies before answering.
CLAIM_AND_DIE = """
import os, signal, sys
from pactmw.store import open_store

url, ctx, mid = sys.argv[1:4]
store = open_store(url)
claim = store.claim_message(
    context_id=ctx, message_id=mid, text="hi", now=float(sys.argv[4]), lease_seconds=30.0
)
assert claim.kind == "new", claim
os.kill(os.getpid(), signal.SIGKILL)
"""

# argv: url, context id. Dies while holding the backend's write lock mid-transaction.
DIE_IN_TRANSACTION = """
import os, signal, sys

url, ctx = sys.argv[1:3]
if url.startswith("sqlite:"):
    import sqlite3
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)"
        " VALUES (?, 'm1', 'half-written', 0)",
        (ctx,),
    )
elif url.startswith("django:"):
    # The Django store's own connection, mid-transaction, holding what its writes hold.
    from django.db import connections
    conn = connections[url.partition(":")[2]]
    conn.set_autocommit(False)
    cursor = conn.cursor()
    if conn.vendor == "sqlite":
        cursor.execute("DELETE FROM pactmw_agent_overrides WHERE issuer IS NULL")
    else:
        cursor.execute(
            "SELECT 1 FROM pactmw_conversations WHERE context_id = %s FOR UPDATE", (ctx,)
        )
    cursor.execute(
        "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)"
        " VALUES (%s, 'm1', 'half-written', 0)",
        (ctx,),
    )
else:
    import psycopg
    conn = psycopg.connect(url)
    conn.execute("SELECT 1 FROM pactmw_conversations WHERE context_id = %s FOR UPDATE", (ctx,))
    conn.execute(
        "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)"
        " VALUES (%s, 'm1', 'half-written', 0)",
        (ctx,),
    )
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(params=PERSISTENT)
def url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    yield from process_url(request.param, request, tmp_path, monkeypatch)


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    s = open_store(url)
    yield s
    s.close()


def _conversation(store: Store) -> str:
    return store.create_conversation(brand_id="acme", issuer="https://pa.example", sub="u1", now=T0)


def _python(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


def test_processes_racing_for_one_turn_have_one_owner(
    url: str, store: Store, tmp_path: Path
) -> None:
    ctx = _conversation(store)
    work = tmp_path / "race"
    work.mkdir()
    # Release everyone at once, after all have connected, so the claims truly overlap.
    argvs = [_python(RACER, url, ctx, "m1", str(work), str(i), str(T0)) for i in range(PROCESSES)]
    kinds = processes_at_once(argvs, work)
    # Exactly one owner; a loser sees "pending" or, if it came after the answer, the reply.
    assert kinds.count("new") == 1, kinds
    assert set(kinds) <= {"new", "pending", "reply"}, kinds

    # The one reply stored is what every later retry gets, byte for byte.
    claim = store.claim_message(
        context_id=ctx, message_id="m1", text="hi", now=T0 + 1, lease_seconds=LEASE
    )
    assert claim.kind == "reply"
    assert claim.reply is not None
    assert claim.reply.startswith(b"answered by ")
    [turn] = store.history(ctx)
    assert turn.reply_text.encode() == claim.reply


def test_processes_starting_one_derived_id_have_one_winner(
    url: str, store: Store, tmp_path: Path
) -> None:
    # One writing statement each on sqlite (store/sqlite.py), one data-modifying WITH on
    # PostgreSQL: the write lock or the key decides, across processes as across threads.
    ctx = "derived-context-1"
    work = tmp_path / "starts"
    work.mkdir()
    argvs = [_python(STARTER, url, ctx, str(work), str(i)) for i in range(PROCESSES)]
    outcomes = processes_at_once(argvs, work)
    assert sorted(outcomes) == ["refused"] * (PROCESSES - 1) + ["started"], outcomes
    conversation = store.get_conversation(ctx)
    assert conversation is not None
    assert conversation.last_activity == 2.0
    [turn] = store.history(ctx)  # only the winner's message was claimed, and answered
    assert conversation.account == "acct-" + turn.message_id.removeprefix("m-")


def test_turn_of_a_killed_worker_is_taken_over_after_the_lease(url: str, store: Store) -> None:
    ctx = _conversation(store)
    done = subprocess.run(_python(CLAIM_AND_DIE, url, ctx, "m1", str(T0)), timeout=60)
    assert done.returncode == -signal.SIGKILL
    claim = store.claim_message(
        context_id=ctx, message_id="m1", text="hi", now=T0 + LEASE - 1, lease_seconds=LEASE
    )
    assert claim.kind == "pending"
    claim = store.claim_message(
        context_id=ctx, message_id="m1", text="hi", now=T0 + LEASE, lease_seconds=LEASE
    )
    assert claim.kind == "new"


def test_worker_killed_inside_a_transaction_does_not_wedge_the_store(
    url: str, store: Store
) -> None:
    ctx = _conversation(store)
    done = subprocess.run(_python(DIE_IN_TRANSACTION, url, ctx), timeout=60)
    assert done.returncode == -signal.SIGKILL
    # The half-written claim was rolled back, and its lock released, with the process.
    claim = store.claim_message(
        context_id=ctx, message_id="m1", text="hi", now=T0, lease_seconds=LEASE
    )
    assert claim.kind == "new"
    assert store.get_conversation(ctx) is not None
