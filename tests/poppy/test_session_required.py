"""`poppy_session_required` in every adapter, over real servers: WSGI and Flask on Werkzeug,
Django under runserver (WSGI) and uvicorn (ASGI). Session Tokens come from the TLS test
world's token endpoint (the SDK's personal agent), on the same sqlite store; the adapter's
API is served on 127.0.0.1 while the DPoP proof names the public URL (`base_url`'s origin
and the path), as behind a TLS-terminating proxy. The rules themselves are proven with the
SDK's cases against the ASGI decorator (test_company_endpoints.py); here each adapter shows
it translates them: signed out 403, signed in 200 with the caller, a replayed proof 401, no
token 401."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask, jsonify
from pydantic import SecretStr

from pactmw.adapters import flask as pactmw_flask
from pactmw.adapters import wsgi as pactmw_wsgi
from pactmw.config import ConfigError
from pactmw.provider import Brand, Provider
from tests.adapters.commands import django_check
from tests.poppy.support import NOT_POPPY, assert_names, site_config
from tests.support.logs import assert_logs_tame, pactmw_records
from tests.support.poppy_accounts import signed_in
from tests.support.poppy_world import (
    BASE_URL,
    PoppyWorld,
    bot,
    poppy_brand,
    verifier_for,
    world_fixture,
)
from tests.support.servers import django_server, uvicorn_server, werkzeug_server

PATH = "/api/orders"


world = world_fixture(stores=("sqlite",))


def credentials(world: PoppyWorld, path: str, count: int) -> dict[str, Any]:
    """A signed-out and a signed-in Session Token of one user, each with `count` fresh
    proofs for GET `{base_url}{path}`."""

    async def make() -> dict[str, Any]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            out = await ctx.session(user)
            session = await ctx.session(user)
            form = {
                "grant_type": "refresh_token",
                "refresh_token": signed_in(world, user, "alice"),
                "session_id": session.session_id,
                **(await ctx.client_form()),
            }
            answer = (await ctx.token_request(user, form)).json()
            url = BASE_URL + path
            tokens = {"out": out.access_token.get_secret_value(), "in": answer["access_token"]}
            return {
                name: (
                    token,
                    [
                        await ctx.proof(user, "GET", url, token=SecretStr(token))
                        for _ in range(count)
                    ],
                )
                for name, token in tokens.items()
            }

    return asyncio.run(make())


def check(
    url: str,
    made: dict[str, Any],
    account_of: Callable[[httpx.Response], Any],
    path: str = PATH,
) -> None:
    out_token, out_proofs = made["out"]
    in_token, in_proofs = made["in"]

    def get(token: str | None, proof: str | None) -> httpx.Response:
        headers = {"Host": "shop.example"}
        if token is not None:
            headers["Authorization"] = f"DPoP {token}"
        if proof is not None:
            headers["DPoP"] = proof
        return httpx.get(url + path, headers=headers)

    signed_out = get(out_token, out_proofs[0])
    assert (signed_out.status_code, signed_out.json()) == (
        403,
        {"error": "sign_in_required", "scope": "orders:read"},
    )
    assert signed_out.headers["www-authenticate"].startswith('DPoP error="sign_in_required"')
    served = get(in_token, in_proofs[0])
    assert served.status_code == 200, served.text
    assert account_of(served) == "alice"
    replayed = get(in_token, in_proofs[0])
    assert (replayed.status_code, replayed.json()) == (401, {"error": "invalid_dpop_proof"})
    anonymous = get(None, in_proofs[1])
    assert (anonymous.status_code, anonymous.json()) == (401, {"error": "invalid_token"})


def test_wsgi(world: PoppyWorld) -> None:
    provider = Provider(
        base_url=BASE_URL,
        verifier=verifier_for(world.ca, world.port),
        store=world.reopen(),
        brands=(poppy_brand(),),
    )

    @pactmw_wsgi.poppy_session_required(provider, "shop", "orders:read")
    def orders(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        caller = pactmw_wsgi.current_poppy_caller(environ)
        assert caller is not None
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"account": caller.account}).encode()]

    try:
        with werkzeug_server(orders) as url:
            check(url, credentials(world, PATH, 2), lambda r: r.json()["account"])
    finally:
        provider.close()


def flask_site(world: PoppyWorld) -> Flask:
    """A Flask app of the Poppy site's settings on the world's store, with pactmw's extension."""
    app = Flask(__name__)
    app.config["PACTMW"] = {**site_config(), "store": world.store_url}
    pactmw_flask.Pactmw(app)
    return app


def test_flask(world: PoppyWorld) -> None:
    app = flask_site(world)

    @app.get(PATH)
    @pactmw_flask.poppy_session_required("shop", "orders:read")
    def orders() -> Any:
        caller = pactmw_flask.current_poppy_caller()
        assert caller is not None
        return jsonify(account=caller.account)

    with werkzeug_server(app) as url:
        check(url, credentials(world, PATH, 2), lambda r: r.json()["account"])


@pytest.mark.parametrize("asgi", [False, True], ids=["wsgi", "asgi"])
def test_django(world: PoppyWorld, asgi: bool, tmp_path: Path) -> None:
    name = f"django-poppy-api-{secrets.token_hex(3)}"
    config = {**site_config(), "store": world.store_url}
    settings = "pactmw_testsite.contract_settings"
    with django_server(config, asgi=asgi, settings=settings, workdir=tmp_path, name=name) as url:
        # The test site's views: a sync one under WSGI, an async one under ASGI.
        path = "/api/poppy-orders-async" if asgi else "/api/poppy-orders"
        check(url, credentials(world, path, 2), lambda r: r.json()["account"], path)


def test_fastapi(world: PoppyWorld) -> None:
    from fastapi import FastAPI, Security

    from pactmw.adapters.fastapi import EXCEPTION_HANDLERS, PoppySessionScheme
    from pactmw.provider.poppy import PoppyCaller

    provider = Provider(
        base_url=BASE_URL,
        verifier=verifier_for(world.ca, world.port),
        store=world.reopen(),
        brands=(poppy_brand(),),
    )
    poppy = PoppySessionScheme(provider, "shop")
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get(PATH, responses=poppy.responses(scopes=["orders:read"]))
    async def orders(
        caller: PoppyCaller = Security(poppy, scopes=["orders:read"]),  # noqa: B008
    ) -> dict[str, Any]:
        return {"account": caller.account}

    try:
        with uvicorn_server(app) as url:
            check(url, credentials(world, PATH, 2), lambda r: r.json()["account"])
            document = httpx.get(url + "/openapi.json").json()
            schemes = document["components"]["securitySchemes"]
            assert schemes["PoppySession.shop"]["scheme"] == "DPoP"
            # The refusals `check` saw are the ones the route documents, with the challenge.
            documented = document["paths"][PATH]["get"]["responses"]
            for status in ("401", "403"):
                assert "WWW-Authenticate" in documented[status]["headers"]
    finally:
        provider.close()


# -- a Brand that is not a Poppy Brand of the Provider: reported at startup, naming it --------


def two_brand_provider(world: PoppyWorld) -> Provider:
    """The Poppy Brand `shop` and `acme`, a Brand without Poppy."""
    return Provider(
        base_url=BASE_URL,
        verifier=verifier_for(world.ca, world.port),
        store=world.reopen(),
        brands=(poppy_brand(), Brand(id="acme", name="Acme", handler=bot)),
    )


def _wsgi_decorator(provider: Provider, brand_id: str) -> object:
    return pactmw_wsgi.poppy_session_required(provider, brand_id, "orders:read")


def _asgi_decorator(provider: Provider, brand_id: str) -> object:
    from pactmw.adapters import asgi as pactmw_asgi

    return pactmw_asgi.poppy_session_required(provider, brand_id, "orders:read")


def _fastapi_scheme(provider: Provider, brand_id: str) -> object:
    from pactmw.adapters.fastapi import PoppySessionScheme

    return PoppySessionScheme(provider, brand_id)


#: Where each adapter that is given its Provider refuses the Brand, and the setting it names.
WHERE_MADE = [
    pytest.param(_wsgi_decorator, "poppy_session_required({!r})", id="wsgi"),
    pytest.param(_asgi_decorator, "poppy_session_required({!r})", id="asgi"),
    pytest.param(_fastapi_scheme, "PoppySessionScheme(provider, {!r})", id="fastapi"),
]


@pytest.mark.parametrize(("make", "setting"), WHERE_MADE)
@pytest.mark.parametrize(("brand_id", "said"), NOT_POPPY)
def test_a_brand_without_poppy_is_refused_where_the_check_is_made(
    world: PoppyWorld,
    brand_id: str,
    said: str,
    make: Callable[[Provider, str], object],
    setting: str,
) -> None:
    provider = two_brand_provider(world)
    try:
        with pytest.raises(ConfigError) as caught:
            make(provider, brand_id)
        assert_names(caught.value, setting.format(brand_id), said)
    finally:
        provider.close()


def test_flask_refuses_a_misspelt_brand_at_init_app(world: PoppyWorld) -> None:
    # The app's views are decorated before `Pactmw(app)` knows the Provider: init_app looks
    # at them.
    app = Flask(__name__)
    app.config["PACTMW"] = {**site_config(), "store": world.store_url}

    @app.get(PATH)
    @pactmw_flask.poppy_session_required("shopp", "orders:read")
    def orders() -> Any:
        return jsonify(account=None)

    with pytest.raises(ConfigError) as caught:
        pactmw_flask.Pactmw(app)
    assert_names(caught.value, "poppy_session_required('shopp')", "is not one of")


def test_flask_names_a_misspelt_brand_of_a_view_added_after_init_app(
    world: PoppyWorld, caplog: pytest.LogCaptureFixture
) -> None:
    # A view decorated after `Pactmw(app)`: its request is Poppy's 503 (never a 500, nor a
    # bare KeyError), no view runs, and the log names the decorator and the Brands with
    # Poppy (tests/adapters/test_poppy_unconfigured.py: over real servers, said once).
    app = flask_site(world)
    ran: list[str] = []

    @app.get(PATH)
    @pactmw_flask.poppy_session_required("shopp", "orders:read")
    def orders() -> Any:
        ran.append("orders")
        return jsonify(account=None)

    answer = app.test_client().get(PATH)
    assert answer.status_code == 503
    assert answer.get_json() == {"error": "temporarily_unavailable"}
    said = [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR]
    assert any(
        line.startswith(f"poppy_session_required('shopp') on {PATH} refuses every request")
        and "Brands with Poppy: 'shop'" in line
        for line in said
    ), said
    assert ran == []


def test_django_check_reports_a_brand_without_poppy(tmp_path: Path) -> None:
    # The test site's views ask for Brand "shop": with Poppy on a Brand "store" instead,
    # `manage.py check` (which runserver runs first) names the setting, before any request.
    config = site_config()
    shop = config["brands"]["shop"]
    without_poppy = {key: value for key, value in shop.items() if key != "poppy"}
    config["brands"] = {"shop": without_poppy, "store": shop}
    done = django_check(config, tmp_path / "pactmw.json", PACTMW_TEST_POPPY_APIS="1")
    assert done.returncode != 0, done.stdout + done.stderr
    assert "pactmw.E004" in done.stderr, done.stderr
    assert "poppy_session_required('shop'): Brand 'shop' does not enable Poppy" in done.stderr
    assert "Brands with Poppy: 'store'" in done.stderr


# -- a refusal's reason is logged (never the token) ---------------------------------------------


def test_flask_logs_why_a_request_is_refused(
    world: PoppyWorld, caplog: pytest.LogCaptureFixture
) -> None:
    # A new user's first calls: a Bearer token, no Authorization at all, an unknown DPoP
    # token. Each answer is `401 invalid_token`; the log says which mistake it was, once.
    app = flask_site(world)

    @app.get(PATH)
    @pactmw_flask.poppy_session_required("shop", "orders:read")
    def orders() -> Any:
        return jsonify(account=None)

    secret = "abc" + secrets.token_hex(8)
    sent = [
        ({"Authorization": f"Bearer {secret}"}, "a Session Token goes in Authorization: DPoP"),
        ({}, "no Session Token"),
        ({"Authorization": f"DPoP {secret}"}, "not a live Session Token of this Brand"),
    ]
    with werkzeug_server(app) as url:
        for headers, reason in sent:
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="pactmw.poppy"):
                answer = httpx.get(url + PATH, headers={"Host": "shop.example", **headers})
            assert (answer.status_code, answer.json()) == (401, {"error": "invalid_token"})
            said = [
                message
                for message in assert_logs_tame(caplog.records)
                if message.startswith("poppy session refused")
            ]
            assert said == [
                f"poppy session refused: error=invalid_token brand=shop reason={reason!r}"
            ]
            assert secret not in caplog.text
            assert all(r.levelno == logging.INFO for r in pactmw_records(caplog.records))
