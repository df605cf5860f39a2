"""Poppy edges: the discovery helpers naming a Brand without Poppy are a `ConfigError` where
they are made (Flask's added after `init_app` answer 503), and a conversation request with a
bad query parameter is refused before it has any effect (no bot run, no turn stored, its
message id still free). Over real servers: Flask on Werkzeug, the TLS world for
conversations."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from flask import Flask

from pactmw.adapters import flask as pactmw_flask
from pactmw.adapters.asgi import poppy_discovery_route
from pactmw.adapters.wsgi import poppy_discovery_app
from pactmw.config import ConfigError
from pactmw.provider import Brand, Provider, Reply, Turn
from pactmw.store import MemoryStore, Store
from tests.adapters.commands import django_check
from tests.poppy.support import NOT_POPPY, assert_names, site_config
from tests.support.net import free_port
from tests.support.poppy_world import (
    BASE_URL,
    SHOP,
    PoppyWorld,
    bot,
    dpop_call,
    poppy_brand,
    verifier_for,
    world_on,
)
from tests.support.servers import werkzeug_server
from tests.support.tls import TestCA

# -- 1. a discovery helper naming a Brand without Poppy -----------------------------------------


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    """The Poppy Brand `shop` and `acme`, a Brand without Poppy."""
    built = Provider(
        base_url=BASE_URL,
        verifier=verifier_for(TestCA(), free_port()),
        store=MemoryStore(),
        brands=(poppy_brand(), Brand(id="acme", name="Acme", handler=bot)),
    )
    yield built
    built.close()


def _provider_call(provider: Provider, brand_id: str) -> object:
    return provider.poppy_discovery(brand_id, SHOP)


#: Where each helper given its Provider refuses the Brand, and the call it names.
WHERE_MADE = [
    pytest.param(_provider_call, "Provider.poppy_discovery({!r})", id="provider"),
    pytest.param(poppy_discovery_route, "poppy_discovery_route(provider, {!r})", id="asgi"),
    pytest.param(poppy_discovery_app, "poppy_discovery_app(provider, {!r})", id="wsgi"),
]


@pytest.mark.parametrize(("make", "setting"), WHERE_MADE)
@pytest.mark.parametrize(("brand_id", "said"), NOT_POPPY)
def test_a_discovery_helper_for_a_brand_without_poppy_is_refused_where_it_is_made(
    provider: Provider,
    brand_id: str,
    said: str,
    make: Callable[[Provider, str], object],
    setting: str,
) -> None:
    with pytest.raises(ConfigError) as caught:
        make(provider, brand_id)
    assert_names(caught.value, setting.format(brand_id), said)


def test_flask_refuses_a_discovery_view_of_a_misspelt_brand_at_init_app() -> None:
    app = Flask(__name__)
    app.config["PACTMW"] = site_config()
    app.add_url_rule("/brand-site/poppy.json", view_func=pactmw_flask.poppy_discovery_view("shopp"))
    with pytest.raises(ConfigError) as caught:
        pactmw_flask.Pactmw(app)
    assert_names(caught.value, "poppy_discovery_view('shopp')", "is not one of")


def test_flask_answers_503_for_a_discovery_view_of_a_misspelt_brand_added_after_init_app() -> None:
    # Added after `Pactmw(app)`: its requests are Poppy's 503, never a 500 nor a KeyError
    # (the log line: tests/adapters/test_poppy_unconfigured.py), and the Brand's own view
    # still serves its document.
    app = Flask(__name__)
    app.config["PACTMW"] = site_config()
    pactmw_flask.Pactmw(app)
    app.add_url_rule("/brand-site/poppy.json", view_func=pactmw_flask.poppy_discovery_view("shopp"))
    app.add_url_rule("/shop/poppy.json", view_func=pactmw_flask.poppy_discovery_view("shop"))
    with werkzeug_server(app) as url:
        answer = httpx.get(f"{url}/brand-site/poppy.json", headers={"Host": SHOP})
        assert answer.status_code == 503
        assert answer.json() == {"error": "temporarily_unavailable"}
        assert httpx.get(f"{url}/shop/poppy.json", headers={"Host": SHOP}).status_code == 200


def _shop_without_poppy() -> dict[str, Any]:
    """The site's settings with Poppy on a Brand "store" instead of "shop"."""
    config = site_config()
    shop = config["brands"]["shop"]
    config["brands"] = {"shop": {k: v for k, v in shop.items() if k != "poppy"}, "store": shop}
    return config


def test_django_check_reports_a_discovery_view_of_a_brand_without_poppy(tmp_path: Path) -> None:
    # The test site's `brand-site/poppy.json` is Brand "shop"'s view: `manage.py check`
    # (which runserver runs first) names the view and the Brands with Poppy, before any
    # request.
    done = django_check(_shop_without_poppy(), tmp_path / "pactmw.json", PACTMW_TEST_POPPY_APIS="1")
    assert done.returncode != 0, done.stdout + done.stderr
    assert "pactmw.E004" in done.stderr, done.stderr
    assert "poppy_discovery_view('shop'): Brand 'shop' does not enable Poppy" in done.stderr
    assert "Brands with Poppy: 'store'" in done.stderr


# -- 2. a conversation request with a bad query parameter has no effect ------------------------


#: A message whose text starts so is taken over by another worker during its first bot run,
#: which then fails.
TAKEN_OVER = "taken over: "


class CountingBot:
    """Counts its runs per message id; on the first run of a `TAKEN_OVER` message, another
    worker (`taker`, a handle of its own on the store) takes the claim over, as it does
    once this worker's lease has run out, and the bot fails."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.taker: Store | None = None

    def __call__(self, turn: Turn) -> Reply:
        with self._lock:
            self.runs[turn.message_id] += 1
            first = self.runs[turn.message_id] == 1
        if first and turn.text.startswith(TAKEN_OVER):
            assert self.taker is not None
            claim = self.taker.claim_turn(
                context_id=turn.context_id,
                message_id=turn.message_id,
                text=turn.text,
                now=time.time() + TAKEOVER_AFTER,  # past this worker's lease
                lease_seconds=TAKEOVER_AFTER,
            )
            assert claim.kind == "new"
            raise RuntimeError("the bot failed after its turn was taken over")
        return Reply(text=f"You said: {turn.text}")


#: How far past the lease the other worker takes over: its claim stays live for the test.
TAKEOVER_AFTER = 3600.0


BOT = CountingBot()


@pytest.fixture(scope="module", params=["sqlite"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoppyWorld]:
    brand = attrs.evolve(poppy_brand(), handler=BOT)
    for running in world_on(request, tmp_path_factory, brands=(brand,)):
        BOT.taker = running.reopen()
        yield running


async def _call(ctx: Any, user: str, token: str, url: str, body: Any = None) -> Any:
    """A POST (a GET without `body`) with the Session Token and a fresh DPoP proof."""
    method = "GET" if body is None else "POST"
    return await dpop_call(ctx, user, method, url, body, token=token)


def _message(text: str) -> dict[str, str]:
    return {"id": "msg_" + secrets.token_hex(12), "sender": "agent", "text": text}


#: Cursors a message POST must refuse before the message is received: malformed, and past
#: the events the conversation holds before the message (no agent can have read those).
BAD_CURSORS = ["bad", "cur_-1", "cur_01", "cur_99"]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
def test_a_bad_cursor_on_a_message_post_is_refused_before_the_message_is_received(
    world: PoppyWorld, cursor: str
) -> None:
    async def scenario() -> dict[str, Any]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            token = (await ctx.session(user)).access_token.get_secret_value()
            endpoint = await ctx.conversations_endpoint()
            first, second = _message("Hello"), _message("My parcel?")
            bad_start = await _call(
                ctx, user, token, f"{endpoint}?cursor={cursor}", {"message": first}
            )
            runs_after_bad_start = BOT.runs[first["id"]]
            started = await _call(ctx, user, token, endpoint, {"message": first})
            cid = started.json()["conversation_id"]
            messages = f"{endpoint}/{cid}/messages"
            bad_send = await _call(
                ctx, user, token, f"{messages}?cursor={cursor}", {"message": second}
            )
            runs_after_bad_send = BOT.runs[second["id"]]
            events = (await _call(ctx, user, token, f"{endpoint}/{cid}/events")).json()
            sent = await _call(ctx, user, token, messages, {"message": second})
            return {
                "bad": [(r.status_code, r.json()["error"]) for r in (bad_start, bad_send)],
                "runs": (runs_after_bad_start, runs_after_bad_send),
                "started": started.status_code,
                "texts": [e["message"]["text"] for e in events["events"]],
                "sent": sent.status_code,
                "runs_after": (BOT.runs[first["id"]], BOT.runs[second["id"]]),
            }

    got = asyncio.run(scenario())
    assert got["bad"] == [(400, "invalid_cursor"), (400, "invalid_cursor")]
    # Neither bad request ran the bot or stored the message...
    assert got["runs"] == (0, 0)
    assert got["texts"] == ["Hello", "You said: Hello"]
    # ...nor held its id: each is a new message when sent properly, its bot run once.
    assert (got["started"], got["sent"]) == (201, 202)
    assert got["runs_after"] == (1, 1)


def test_a_valid_cursor_on_a_message_post_still_pages_the_events(world: PoppyWorld) -> None:
    async def scenario() -> list[Any]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            token = (await ctx.session(user)).access_token.get_secret_value()
            endpoint = await ctx.conversations_endpoint()
            started = await _call(
                ctx, user, token, f"{endpoint}?cursor=cur_0", {"message": _message("Hi")}
            )
            body = started.json()
            messages = f"{endpoint}/{body['conversation_id']}/messages"
            # cur_2: both events already read; the page holds the new message's two.
            sent = await _call(
                ctx, user, token, f"{messages}?cursor=cur_2", {"message": _message("More")}
            )
            return [
                (started.status_code, [e["message"]["text"] for e in body["events"]]),
                (sent.status_code, [e["message"]["text"] for e in sent.json()["events"]]),
            ]

    assert asyncio.run(scenario()) == [
        (201, ["Hi", "You said: Hi"]),
        (202, ["More", "You said: More"]),
    ]


# -- 3. a failed turn releases only the claim it holds ---------------------------------------


def test_a_failed_turn_leaves_the_claim_another_worker_took_over(world: PoppyWorld) -> None:
    # The first worker's bot fails after another worker took the message's claim over: the
    # failure releases nothing of the taker's, so a retry is told the message is being
    # answered (the taker runs it), never a second run of the bot next to the taker's.
    async def scenario() -> list[tuple[int, str]]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            token = (await ctx.session(user)).access_token.get_secret_value()
            endpoint = await ctx.conversations_endpoint()
            message = _message(TAKEN_OVER + "hello")
            failed = await _call(ctx, user, token, endpoint, {"message": message})
            retried = await _call(ctx, user, token, endpoint, {"message": message})
            return [
                (failed.status_code, failed.json().get("error", "")),
                (retried.status_code, retried.json().get("status", "")),
                (BOT.runs[message["id"]], ""),
            ]

    assert asyncio.run(scenario()) == [
        (503, "temporarily_unavailable"),
        (201, "working"),
        (1, ""),
    ]
