"""PostgreSQL stops under a running Poppy company, then comes back: meanwhile its endpoints,
and the company's own API behind `poppy_session_required`, answer in Poppy's own words, `503
temporarily_unavailable` with `Retry-After` (a JSON error body, not cacheable, as every Poppy
refusal), never a bare status an agent cannot read or a 500; once the database is back, the
same Session is answered as before."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator

import httpx
import pytest

from tests.support.pg import PostgresServer, pg_start, pg_stop, postgres_server_fixture
from tests.support.poppy_world import BASE_URL, PoppyWorld, dpop_call, dpop_headers, world_on

ENDPOINT = f"{BASE_URL}/a2a/shop/poppy/feedback"
REPORT = json.dumps(
    {"kind": "missing", "task": "Return a jacket", "description": "No returns page."}
).encode()

# Its own server, not the session's: this module stops and starts it.
postgres_server = postgres_server_fixture(scope="module")


@pytest.fixture(params=["postgres"])
def world(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    postgres_server: PostgresServer,
) -> Iterator[PoppyWorld]:
    try:
        yield from world_on(request, tmp_path_factory)
    finally:
        with contextlib.suppress(RuntimeError):  # started again, unless the test failed first
            pg_start(postgres_server)


def test_a_stopped_database_is_poppys_temporarily_unavailable(
    world: PoppyWorld, postgres_server: PostgresServer
) -> None:
    async def scenario() -> list[httpx.Response]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            session = await ctx.session(user)
            token = session.access_token.get_secret_value()

            async def report() -> httpx.Response:
                headers = await dpop_headers(ctx, user, "POST", ENDPOINT, token)
                headers["Content-Type"] = "application/json"
                answer: httpx.Response = await ctx.send(
                    "POST", ENDPOINT, headers=headers, content=REPORT
                )
                return answer

            async def read_orders() -> httpx.Response:
                # The shop's own API, behind `poppy_session_required`.
                return await dpop_call(ctx, user, "GET", ctx.url("/api/orders"), token=token)

            before = [await report(), await read_orders()]
            pg_stop(postgres_server)
            during = [await report(), await read_orders()]
            pg_start(postgres_server)
            after = [await report(), await read_orders()]
            return [*before, *during, *after]

    answers = asyncio.run(scenario())
    statuses = [answer.status_code for answer in answers]
    # Signed out, the Session reports feedback (202) but may not read orders (403); meanwhile
    # both are Poppy's 503, and then the same Session is answered as before.
    assert statuses == [202, 403, 503, 503, 202, 403], [a.text for a in answers]
    for during in answers[2:4]:
        assert during.headers.get("content-type") == "application/json", during.headers
        assert during.json() == {"error": "temporarily_unavailable"}
        assert during.headers.get("cache-control") == "no-store"
        assert (during.headers.get("retry-after") or "").isdigit(), during.headers
