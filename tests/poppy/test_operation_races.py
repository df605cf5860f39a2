"""Poppy API writes racing over real TLS, on sqlite and PostgreSQL: two requests with one
`Idempotency-Key` in flight at once (a retrying agent whose first request has not answered
yet), released together on two threads."""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
from typing import Any

import httpx
import psycopg

from tests.store.support import all_at_once
from tests.support.poppy_world import (
    OPERATIONS_SCENARIO,
    PoppyWorld,
    ShopExecutors,
    dpop_headers,
    signed_in_brand,
    world_fixture,
)

#: Pairs raced per test: each pair races on its own key and its own order.
ROUNDS = 20


world = world_fixture(signed_in_brand(operations=ShopExecutors().config()))


def _stored_operations(world: PoppyWorld, order: str) -> int:
    """How many operations the store holds whose terms name `order` (read in SQL: the Store
    protocol lists none, and a dangling proposal is exactly what no answer names)."""
    query = "SELECT COUNT(*) FROM pactmw_poppy_operations WHERE terms LIKE {}"
    pattern = f'%"{order}"%'
    if world.store_url.startswith("sqlite:///"):
        with sqlite3.connect(world.store_url.removeprefix("sqlite:///")) as db:
            (count,) = db.execute(query.format("?"), (pattern,)).fetchone()
    else:
        with psycopg.connect(world.store_url) as db:
            row = db.execute(query.format("%s"), (pattern,)).fetchone()
            assert row is not None
            (count,) = row
    return int(count)


async def _keyed_request(
    ctx: Any, user: str, token: Any, url: str, key: str, body: Any
) -> tuple[dict[str, str], bytes]:
    headers = {
        **(await dpop_headers(ctx, user, "POST", url, token)),
        "Content-Type": "application/json",
        "Idempotency-Key": key,
    }
    return headers, json.dumps(body).encode()


def _post_together(
    world: PoppyWorld, url: str, requests: list[tuple[dict[str, str], bytes]]
) -> list[httpx.Response]:
    """POST each request on its own thread (and connection), released together."""

    async def post(headers: dict[str, str], content: bytes) -> httpx.Response:
        async with world.http() as http:
            return await http.post(url, headers=headers, content=content)

    return all_at_once(len(requests), lambda i: asyncio.run(post(*requests[i])))


Round = tuple[str, str, list[tuple[dict[str, str], bytes]]]


def _rounds(world: PoppyWorld, sizes: tuple[str, ...], repeats: int = 0) -> list[Round]:
    """ROUNDS rounds, each an order of its own and one key, with a request per size (and
    `repeats` more of the first size, sent later): the order, its URL and the requests."""

    async def prepare(ctx: Any) -> list[Round]:
        user = ctx.new_user()
        session = await ctx.session(user)
        rounds = []
        for _ in range(ROUNDS):
            order = "ord_" + secrets.token_hex(6)
            url = ctx.url(f"/api/orders/{order}/exchanges")
            key = secrets.token_urlsafe(12)
            requests = [
                await _keyed_request(ctx, user, session, url, key, {"size": size})
                for size in sizes + (sizes[0],) * repeats
            ]
            rounds.append((order, url, requests))
        return rounds

    async def one() -> list[Round]:
        async with world.http() as http:
            return await prepare(world.context(http, scenario=OPERATIONS_SCENARIO))

    return asyncio.run(one())


def test_one_key_in_flight_twice_proposes_once(world: PoppyWorld) -> None:
    # Each request checked the key, found no answer and proposed: with another body the
    # loser was told 409 while its proposal stayed pending, one no answer ever named.
    for order, url, pair in _rounds(world, ("M", "L")):
        answers = _post_together(world, url, pair)
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [202, 409], [a.text for a in answers]
        (refused,) = [a for a in answers if a.status_code == 409]
        assert refused.json()["error"] == "idempotency_key_conflict"
        assert _stored_operations(world, order) == 1


def test_a_repeat_in_flight_is_told_to_retry_then_gets_the_first_answer(
    world: PoppyWorld,
) -> None:
    # The SDK's reference company: a repeat while the first is under way gets `503
    # temporarily_unavailable` with `Retry-After: 1`; retried, the first answer.
    for order, url, requests in _rounds(world, ("M", "M"), repeats=1):
        *racing, retry = requests
        answers = _post_together(world, url, racing)
        accepted = [a.json() for a in answers if a.status_code == 202]
        assert accepted, [a.text for a in answers]
        assert all(a == accepted[0] for a in accepted)
        for waiting in (a for a in answers if a.status_code != 202):
            assert (waiting.status_code, waiting.json()) == (
                503,
                {"error": "temporarily_unavailable"},
            )
            assert waiting.headers["retry-after"] == "1"
        (again,) = _post_together(world, url, [retry])
        assert (again.status_code, again.json()) == (202, accepted[0])
        assert _stored_operations(world, order) == 1
