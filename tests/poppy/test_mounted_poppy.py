"""Poppy served by a Starlette/FastAPI app mounted below a path in another
(`site.mount("/support", app)`), its `base_url` holding the path as the guide says: a
Session's DPoP proof names the URL the agent called (`https://shop.example/support/...`,
what `poppy.json` lists), and the Provider checks it against that URL.

Found after a FastAPI trial made the PACT Provider answer below a mount: the Provider's own
Poppy endpoints (feedback, conversations, operations) rebuilt the proof's `htu` from
`base_url`'s origin and the path below the app's root, leaving the mount out, so every
proof to them was refused (401 `invalid_dpop_proof`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Security
from flask import Flask
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.wrappers import Response as WerkzeugResponse

from pactmw.adapters import flask as pactmw_flask
from pactmw.adapters.asgi import a2a_routes
from pactmw.adapters.fastapi import EXCEPTION_HANDLERS, PoppySessionScheme
from pactmw.provider import Provider
from pactmw.provider.poppy import PoppyCaller
from tests.poppy.support import site_config
from tests.support.net import loopback_async_client
from tests.support.poppy_world import (
    BASE_URL,
    PoppyWorld,
    dpop_headers,
    poppy_brand,
    verifier_for,
    world_fixture,
)
from tests.support.servers import uvicorn_server, werkzeug_server

pytestmark = pytest.mark.timeout(120)

MOUNT = "/support"
SITE = BASE_URL + MOUNT  # the mounted app's base_url: where agents reach it
FEEDBACK = "/a2a/shop/poppy/feedback"  # below the mounted app's root
API = "/api/orders"

world = world_fixture(stores=("sqlite",))


def mounted_site(provider: Provider) -> FastAPI:
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)
    poppy = PoppySessionScheme(provider, "shop")

    @app.get(API)
    async def orders(caller: PoppyCaller = Security(poppy)) -> dict[str, Any]:  # noqa: B008
        return {"brand": caller.brand_id}

    app.router.routes.extend(a2a_routes(provider, current_user=lambda connection: None))
    site = FastAPI()
    site.mount(MOUNT, app)
    return site


def calls(world: PoppyWorld, url: str, *, api: bool = True) -> list[httpx.Response]:
    """A feedback report and (with `api`) a read of the app's API, each with a new Session
    Token of the world's Brand `shop` and a proof for the public URL (`SITE` and the path),
    sent to the mounted site on `url` as behind a TLS-terminating proxy."""

    async def scenario() -> list[httpx.Response]:
        async with world.http() as http, loopback_async_client() as plain:
            ctx = world.context(http)
            user = ctx.new_user()
            answers = []
            report = {"kind": "missing", "task": "Return", "description": "No form."}
            wanted: list[tuple[str, str, Any]] = [("POST", FEEDBACK, report)]
            if api:
                wanted.append(("GET", API, None))
            for method, path, body in wanted:
                session = await ctx.session(user)
                headers = await dpop_headers(ctx, user, method, SITE + path, session)
                headers["Host"] = "shop.example"
                content = None if body is None else json.dumps(body).encode()
                if content is not None:
                    headers["Content-Type"] = "application/json"
                answers.append(
                    await plain.request(
                        method, url + MOUNT + path, headers=headers, content=content
                    )
                )
            return answers

    return asyncio.run(scenario())


def test_a_mounted_apps_poppy_checks_proofs_for_the_url_the_agent_called(
    world: PoppyWorld,
) -> None:
    provider = Provider(
        base_url=SITE,
        verifier=verifier_for(world.ca, world.port),
        store=world.reopen(),
        brands=(poppy_brand(),),
    )
    try:
        with uvicorn_server(mounted_site(provider)) as url:
            feedback, api = calls(world, url)
    finally:
        provider.close()
    # The Provider's own endpoint, and the app's API behind `PoppySessionScheme`.
    assert (feedback.status_code, feedback.content) == (202, b""), feedback.text
    assert (api.status_code, api.json()) == (200, {"brand": "shop"}), api.text


def test_a_flask_app_under_a_script_name_checks_them_alike(world: PoppyWorld) -> None:
    # The same rule on WSGI: the Provider's path is PATH_INFO, below SCRIPT_NAME.
    app = Flask(__name__)
    app.config["PACTMW"] = {
        **site_config(),
        "base_url": SITE,
        "audience": SITE + "/a2a",
        "store": world.store_url,
    }
    pactmw_flask.Pactmw(app)
    site = DispatcherMiddleware(WerkzeugResponse("the outer site", 404), {MOUNT: app})
    with werkzeug_server(site) as url:
        (feedback,) = calls(world, url, api=False)
    assert (feedback.status_code, feedback.content) == (202, b""), feedback.text
