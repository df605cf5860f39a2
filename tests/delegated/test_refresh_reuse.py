"""The refresh-token reuse interval over a real server (issue 15, point 5; RFC 9700 §4.14.2).

Within a Brand's `refresh_reuse_interval` a spent refresh token gets the same token pair
again (tests/delegated/test_flow_http.py, and 20 racers in test_concurrency.py); after it,
the same presentation is a reuse and revokes the whole grant. The pair kept for repeats is
sealed, never stored in clear, and cleared once the interval is over.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.provider.delegated._codes import secret_hash
from pactmw.provider.delegated._reuse import open_answer, seal_answer
from tests.delegated.support import Env, delegated_brand, new_sub, serve
from tests.support.clock import OffsetClock
from tests.support.parties import ISSUER

INTERVAL = 5.0


@pytest.fixture
def clock() -> OffsetClock:
    return OffsetClock()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "pactmw.db"


@pytest.fixture
def env(database: Path, clock: OffsetClock) -> Iterator[Env]:
    calls: list[tuple[str, str, dict[str, Any]]] = []
    brands = [
        delegated_brand("acme", "Acme Shop", calls, refresh_reuse_interval=INTERVAL),
        delegated_brand("globex", "Globex", calls, refresh_reuse_interval=0),
    ]
    with serve(f"sqlite:///{database}", brands, calls=calls, clock=clock) as running:
        yield running


def _error(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    assert response.headers["cache-control"] == "no-store"
    error: str = response.json()["error"]
    return error


def _sealed(database: Path, refresh_token: str) -> bytes | None:
    with sqlite3.connect(database) as conn:
        row = conn.execute(
            "SELECT successor FROM pactmw_refresh_tokens WHERE token_hash = ?",
            (secret_hash(refresh_token),),
        ).fetchone()
    assert row is not None
    return None if row[0] is None else bytes(row[0])


def test_reuse_after_the_interval_revokes_the_grant(
    env: Env, clock: OffsetClock, database: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pactmw.audit")
    sub, user = new_sub(), env.new_user()
    first = env.connect("acme", "orders:read", user=user, sub=sub)
    answer = env.refresh("acme", first["refresh_token"], sub=sub)
    assert answer.status_code == 200, answer.text
    second = answer.json()
    # The pair kept for repeats is sealed: neither token is in the database in clear.
    sealed = _sealed(database, first["refresh_token"])
    assert sealed is not None
    for secret in (second["refresh_token"], second["access_token"]):
        assert secret.encode() not in sealed
        assert secret.split(".")[-1].encode() not in sealed
    clock.advance(INTERVAL - 1)
    assert env.refresh("acme", first["refresh_token"], sub=sub).content == answer.content

    clock.advance(1)  # the interval is over: a spent token is a replay again
    assert _error(env.refresh("acme", first["refresh_token"], sub=sub)) == "invalid_grant"
    revoked = env.send("acme", "my orders", token=second["access_token"], sub=sub)
    assert revoked.status_code == 401, revoked.text
    assert _error(env.refresh("acme", second["refresh_token"], sub=sub)) == "invalid_grant"
    events = env.events("agent.grant_revoked", grant_id=first["grant_id"])
    assert [(e.issuer, e.reason) for e in events] == [(ISSUER, "refresh_token_reuse")]
    assert any(
        "agent.grant_revoked" in r.getMessage() and first["grant_id"] in r.getMessage()
        for r in caplog.records
    )
    # The sealed pair is gone with the interval.
    assert _sealed(database, first["refresh_token"]) is None


def test_interval_zero_keeps_the_strict_rule(env: Env, database: Path) -> None:
    sub, user = new_sub(), env.new_user()
    first = env.connect("globex", "orders:read", user=user, sub=sub)
    answer = env.refresh("globex", first["refresh_token"], sub=sub)
    assert answer.status_code == 200, answer.text
    assert _sealed(database, first["refresh_token"]) is None  # nothing kept
    assert _error(env.refresh("globex", first["refresh_token"], sub=sub)) == "invalid_grant"
    refused = env.refresh("globex", answer.json()["refresh_token"], sub=sub)
    assert _error(refused) == "invalid_grant"
    assert [e.reason for e in env.events("agent.grant_revoked", grant_id=first["grant_id"])] == [
        "refresh_token_reuse"
    ]


def test_a_repeat_after_revocation_gets_nothing(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    first = env.connect("acme", "orders:read", user=user, sub=sub)
    assert env.refresh("acme", first["refresh_token"], sub=sub).status_code == 200
    assert env.provider.revoke_grant(first["grant_id"]) is True
    assert _error(env.refresh("acme", first["refresh_token"], sub=sub)) == "invalid_grant"


def test_another_agent_user_cannot_repeat_a_refresh(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    first = env.connect("acme", "orders:read", user=user, sub=sub)
    answer = env.refresh("acme", first["refresh_token"], sub=sub)
    assert answer.status_code == 200, answer.text
    stolen = env.refresh("acme", first["refresh_token"], sub=new_sub())
    assert _error(stolen) == "invalid_grant"
    assert env.refresh("acme", first["refresh_token"], sub=sub).content == answer.content


def test_a_sealed_answer_opens_only_with_its_refresh_token() -> None:
    token, token_hash = "rt_spent", secret_hash("rt_spent")
    answer = b'{"access_token":"at","refresh_token":"rt_next"}'
    sealed = seal_answer(token, token_hash, answer)
    assert b"rt_next" not in sealed
    assert seal_answer(token, token_hash, answer) != sealed  # a fresh nonce each time
    assert open_answer(token, token_hash, sealed) == answer
    assert open_answer("rt_other", token_hash, sealed) is None
    assert open_answer(token, secret_hash("rt_other"), sealed) is None  # bound to its hash
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    assert open_answer(token, token_hash, tampered) is None
    assert open_answer(token, token_hash, b"short") is None
