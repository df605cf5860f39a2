"""Separate OS processes racing on one sqlite file or one PostgreSQL database.

Threads in one process share the store's lock, so only real processes prove that the
delegation operations are atomic across workers: one refresh-token rotation wins, one poll
of an approved device code gets the tokens, one use of a single-use value counts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.store import Store, open_store
from tests.store.support import PERSISTENT, process_url, processes_at_once, racer_script

T0 = 1_700_000_000.0
PROCESSES = 6
BRAND = "skyline"
CLIENT = "https://pa.example"

# argv: url, operation, work dir, worker index. Prints the outcome's kind.
RACER = racer_script(
    "url, op, work, index",
    """now = 1_700_000_100.0
if op == "rotate":
    result = store.rotate_refresh_token(
        token_hash="rt-0", new_token_hash="rt-new-" + index, client_id="https://pa.example",
        brand_id="skyline", pa_sub="pa-user-1", now=now, expires_at=now + 3600,
    ).kind
elif op == "poll":
    result = store.poll_device_code(
        device_code_hash="dc-hash", client_id="https://pa.example", brand_id="skyline",
        pa_sub="pa-user-1", now=now,
    ).kind
elif op == "decide":
    # Even workers approve (widening the grant by orders:cancel), odd ones deny.
    if int(index) % 2:
        won = store.decide_device_authorization(
            user_code="WDJB-MJHT", approved=False, account="sky-4471", granted_scopes=(),
            grant_id=None, now=now,
        ) is not None
        result = "denied" if won else "lost"
    else:
        won = store.approve_device_authorization(
            user_code="WDJB-MJHT", brand_id="skyline", account="sky-4471",
            granted_scopes=("orders:cancel",), new_grant_id="g-" + index, now=now,
            grant_expires_at=now + 86_400,
        ) is not None
        result = "approved" if won else "lost"
else:
    result = store.use_once(namespace="assertion", value="jti-1", now=now, expires_at=now + 60)
print(result, flush=True)
store.close()
""",
)


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


def _race(url: str, op: str, work: Path) -> list[str]:
    """Run PROCESSES racers of `op`, released together; return their printed results."""
    work.mkdir()
    argvs = [[sys.executable, "-c", RACER, url, op, str(work), str(i)] for i in range(PROCESSES)]
    return processes_at_once(argvs, work)


def _grant_id(store: Store) -> str:
    grant = store.upsert_grant(
        grant_id="a2agrant_1",
        brand_id=BRAND,
        account="sky-4471",
        client_id=CLIENT,
        pa_sub="pa-user-1",
        scopes=("flights:upcoming:read",),
        now=T0,
        expires_at=T0 + 86_400,
    )
    return grant.grant_id


def test_processes_rotating_one_refresh_token_have_one_winner(
    url: str, store: Store, tmp_path: Path
) -> None:
    grant_id = _grant_id(store)
    store.issue_refresh_token(
        token_hash="rt-0",
        grant_id=grant_id,
        client_id=CLIENT,
        brand_id=BRAND,
        now=T0,
        expires_at=T0 + 86_400,
    )
    kinds = _race(url, "rotate", tmp_path / "race")
    assert sorted(kinds) == ["reused"] * (PROCESSES - 1) + ["rotated"], kinds
    grant = store.get_grant(grant_id)
    assert grant is not None
    assert grant.revoked_at is not None  # the losers' reuse revoked it (RFC 9700 §4.14)


def _device(store: Store) -> None:
    store.create_device_authorization(
        device_code_hash="dc-hash",
        user_code="WDJB-MJHT",
        brand_id=BRAND,
        client_id=CLIENT,
        pa_sub="pa-user-1",
        scopes=("flights:upcoming:read", "orders:cancel"),
        now=T0,
        expires_at=T0 + 600,
        interval=5,
    )


def test_processes_polling_one_approved_code_have_one_winner(
    url: str, store: Store, tmp_path: Path
) -> None:
    _device(store)
    approval = store.approve_device_authorization(
        user_code="WDJB-MJHT",
        brand_id=BRAND,
        account="sky-4471",
        granted_scopes=("flights:upcoming:read",),
        new_grant_id="a2agrant_1",
        now=T0 + 10,
        grant_expires_at=T0 + 86_400,
    )
    assert approval is not None
    kinds = _race(url, "poll", tmp_path / "race")
    assert sorted(kinds) == ["approved"] + ["consumed"] * (PROCESSES - 1), kinds


def test_processes_approving_and_denying_one_code_have_one_winner(
    url: str, store: Store, tmp_path: Path
) -> None:
    grant_id = _grant_id(store)  # live, with flights:upcoming:read only
    before = store.get_grant(grant_id)
    _device(store)
    outcomes = _race(url, "decide", tmp_path / "race")
    assert sorted(outcomes).count("lost") == PROCESSES - 1, outcomes
    [winner] = [o for o in outcomes if o != "lost"]
    stored = store.device_authorization_by_user_code("WDJB-MJHT")
    assert stored is not None
    assert stored.status == winner
    after = store.get_grant(grant_id)
    assert after is not None
    if winner == "denied":
        assert after == before  # the losing approvals widened nothing
    else:
        assert after.scopes == ("flights:upcoming:read", "orders:cancel")
        assert stored.grant_id == grant_id
    assert [g.grant_id for g in store.list_grants(include_inactive=True, now=T0)] == [grant_id]


def test_processes_using_one_value_have_one_winner(url: str, store: Store, tmp_path: Path) -> None:
    store.agent_enabled("migrate")  # PostgreSQL creates the schema on first use
    results = _race(url, "use_once", tmp_path / "race")
    assert sorted(results) == ["False"] * (PROCESSES - 1) + ["True"], results
