"""A check asking for a delegated scope the Brand does not offer (a misspelt one) refuses
every caller, since no person can ever grant it: every adapter says so once at WARNING on
`pactmw.adapters`, naming the route, the scopes asked and the Brand's, in the words
FastAPI's `Security(scheme, scopes=[...])` says it (tests/adapters/test_framework_idioms.py),
and Django's `manage.py check` says it at startup (pactmw.W006). The answers stay the
guard's: 401 without a delegation, 403 `insufficient_scope` with one."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask, jsonify
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pactmw.adapters import asgi, wsgi
from pactmw.adapters import flask as flask_adapter
from pactmw.provider.guard import guard_from_mapping
from pactmw.store import open_store
from tests.adapters.commands import CHECKOUT_ENV, django_check
from tests.adapters.contract_apps import BRAND, PREFIX
from tests.adapters.contract_harness import Harness, Target, config, harness
from tests.adapters.support import INVALID_TOKEN
from tests.support.net import loopback_client
from tests.support.servers import django_server, uvicorn_server, werkzeug_server

pytestmark = pytest.mark.timeout(120)

#: What follows the route: the scope asked that `acme` does not offer, and the ones it does.
NOT_OFFERED = (
    " refuses every caller: Brand 'acme' does not offer 'order:read' (it offers: "
    "orders:read, orders:cancel)"
)
#: `delegation_required("order:read")` as each adapter names it.
DECORATOR = "delegation_required('order:read')"

#: The test site's switch that routes its views asking for `order:read`
#: (tests/adapters/django_project/pactmw_testsite/contract_urls.py).
ROUTE_UNOFFERED = {"PACTMW_TEST_UNOFFERED_SCOPES": "1"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with harness(tmp_path_factory.mktemp("unoffered")) as started:
        yield started


@pytest.fixture(scope="module")
def settings(world: Harness) -> dict[str, Any]:
    return config(world.workdir, "unoffered", world.agent, world.parafe)


@pytest.fixture(scope="module")
def grants(world: Harness, settings: dict[str, Any]) -> Target:
    """Grants in the store the settings name, signed with the configured key."""
    store = open_store(str(settings["store"]))
    world.stack.callback(store.close)
    return Target(
        "site", loopback_client(), (), store, world.signing, world.agent, world.parafe, settings
    )


# -- the apps: one route per way each adapter asks for `order:read` ------------------------------


def _starlette(settings: dict[str, Any]) -> Any:
    guard = guard_from_mapping(settings)

    @asgi.delegation_required("order:read")
    async def behind_middleware(request: Request) -> Response:
        return JSONResponse({"ok": True})

    # Outside the middleware's prefix: the decorator above it verified the caller.
    @asgi.personal_agent_required(
        guard.verifier, delegation_provider=guard.provider, delegation_brand=BRAND
    )
    @asgi.delegation_required("order:read")
    def behind_decorator(request: Request) -> Response:
        return JSONResponse({"ok": True})

    app = Starlette(
        routes=[
            Route(f"{PREFIX}/unoffered", behind_middleware),
            Route("/unoffered-decorated", behind_decorator),
        ]
    )
    return asgi.PersonalAgentMiddleware(
        app,
        guard.verifier,
        path_prefix=f"{PREFIX}/",
        delegation_provider=guard.provider,
        delegation_brand=BRAND,
    )


def _starlette_backend(settings: dict[str, Any]) -> Any:
    """Starlette's own `AuthenticationMiddleware` with `PersonalAgentBackend`, and its
    `requires` with a `scope:` the Brand does not offer."""
    guard = guard_from_mapping(settings)

    @asgi.requires(["personal_agent", "scope:order:read"])
    async def orders(request: Request) -> Response:
        return JSONResponse({"ok": True})

    backend = asgi.PersonalAgentBackend(
        guard.verifier, delegation_provider=guard.provider, delegation_brand=BRAND
    )
    return Starlette(
        routes=[Route("/unoffered-requires", orders)],
        middleware=[
            Middleware(AuthenticationMiddleware, backend=backend, on_error=asgi.on_auth_error)
        ],
    )


def test_starlettes_requires_with_a_scope_the_brand_does_not_offer_says_so_once(
    settings: dict[str, Any], grants: Target, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pactmw")
    with (
        uvicorn_server(_starlette_backend(settings)) as base,
        loopback_client(base_url=base) as client,
    ):
        _refused_every_time(client, grants, ["/unoffered-requires"])
    warned = [r.getMessage() for r in caplog.records if r.name == "pactmw.adapters"]
    assert warned == [f"requires() with scope:... on /unoffered-requires{NOT_OFFERED}"], warned


def _wsgi(settings: dict[str, Any]) -> Any:
    guard = guard_from_mapping(settings)

    def ok(environ: Any, start_response: Any) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"ok": true}']

    views = {
        f"{PREFIX}/unoffered": wsgi.delegation_required("order:read")(ok),
        "/unoffered-decorated": wsgi.personal_agent_required(
            guard.verifier, delegation_provider=guard.provider, delegation_brand=BRAND
        )(wsgi.delegation_required("order:read")(ok)),
    }

    def dispatch(environ: Any, start_response: Any) -> Iterable[bytes]:
        view = views.get(environ.get("PATH_INFO", ""))
        if view is None:
            start_response("404 Not Found", [])
            return [b""]
        answer: Iterable[bytes] = view(environ, start_response)
        return answer

    return wsgi.PersonalAgentMiddleware(
        dispatch,
        guard.verifier,
        path_prefix=f"{PREFIX}/",
        delegation_provider=guard.provider,
        delegation_brand=BRAND,
    )


def _flask(settings: dict[str, Any]) -> Flask:
    app = Flask(__name__)
    app.config["PACTMW"] = dict(settings)

    # Decorated before `init_app`, which says it at startup; added after it, at its first
    # refused request. Either says it once.
    @app.get(f"{PREFIX}/unoffered")
    @flask_adapter.delegation_required("order:read")
    def before_init_app() -> Any:
        return jsonify(ok=True)

    flask_adapter.Pactmw(app)

    @app.get("/unoffered-decorated")
    @flask_adapter.delegation_required("order:read")
    def after_init_app() -> Any:
        return jsonify(ok=True)

    return app


InProcess = Callable[[dict[str, Any]], Any]
IN_PROCESS: dict[str, tuple[InProcess, Callable[[Any], Any]]] = {
    "starlette": (_starlette, uvicorn_server),
    "wsgi": (_wsgi, werkzeug_server),
    "flask": (_flask, werkzeug_server),
}


def _refused_every_time(client: httpx.Client, grants: Target, paths: Iterable[str]) -> None:
    """Each path refuses a caller without a delegation (401) and one whose delegation holds
    every scope the Brand offers (403), three times over."""
    delegation, _ = grants.delegation("orders:read", "orders:cancel")
    identity = grants.headers(grants.token())
    delegated = grants.headers(grants.token(), delegation)
    for path in paths:
        # DRF's 401 has its own body: the challenge is the same.
        unauthorized = client.get(path, headers=identity)
        assert unauthorized.status_code == 401, (path, unauthorized.text[:200])
        assert unauthorized.headers["www-authenticate"] == INVALID_TOKEN, path
        for _ in range(3):
            refused = client.get(path, headers=delegated)
            assert refused.status_code == 403, (path, refused.status_code, refused.text[:200])
            assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]


@pytest.mark.parametrize("adapter", list(IN_PROCESS))
def test_a_scope_the_brand_does_not_offer_is_said_once(
    adapter: str,
    settings: dict[str, Any],
    grants: Target,
    caplog: pytest.LogCaptureFixture,
) -> None:
    build, serve = IN_PROCESS[adapter]
    caplog.set_level(logging.WARNING, logger="pactmw")
    paths = [f"{PREFIX}/unoffered", "/unoffered-decorated"]
    with serve(build(settings)) as base, loopback_client(base_url=base) as client:
        _refused_every_time(client, grants, paths)
    warned = [r.getMessage() for r in caplog.records if r.name == "pactmw.adapters"]
    assert warned == [f"{DECORATOR} on {path}{NOT_OFFERED}" for path in paths], warned
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "pactmw.adapters")


#: Each view of the Django test site asking for `order:read`, as it is named.
DJANGO_VIEWS = {
    "/api/unoffered": f"{DECORATOR} on /api/unoffered",
    "/api/unoffered-method": f"{DECORATOR} on /api/unoffered-method",
    "/drf/unoffered": "HasDelegatedScope (required_scopes ['order:read']) on /drf/unoffered",
}


def test_a_scope_the_brand_does_not_offer_is_said_once_on_django(
    settings: dict[str, Any], grants: Target, tmp_path: Path
) -> None:
    # Under uvicorn, which runs no system check: the first refused request says it.
    server = django_server(
        settings,
        asgi=True,
        settings="pactmw_testsite.contract_settings",
        workdir=tmp_path,
        name="site",
        extra_env={**CHECKOUT_ENV, **ROUTE_UNOFFERED},
    )
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(server)
        client = stack.enter_context(loopback_client(base_url=base))
        _refused_every_time(client, grants, DJANGO_VIEWS)
    said = (tmp_path / "site.log").read_text()
    for path, named in DJANGO_VIEWS.items():
        # A class-based view's method is decorated anew at each request: still once.
        assert said.count(f"{named}{NOT_OFFERED}") == 1, (path, said)


def test_manage_py_check_warns_of_a_scope_the_brand_does_not_offer(
    settings: dict[str, Any], tmp_path: Path
) -> None:
    done = django_check(settings, tmp_path / "pactmw.json", **ROUTE_UNOFFERED)
    said = " ".join(done.stderr.split())
    assert done.returncode == 0, said  # a warning: the site still starts
    for where in (
        f"{DECORATOR} on /api/unoffered",
        f"{DECORATOR} on /api/unoffered-method (UnofferedMethod.get)",
        "HasDelegatedScope (required_scopes ['order:read']) on /drf/unoffered (UnofferedOrders)",
    ):
        assert f"(pactmw.W006) {where}{NOT_OFFERED}." in said, said
    # Views asking only for offered scopes are not named.
    assert "/api/scoped-sync" not in said, said
    # Without the switch, the site's views are none of them.
    clean = django_check(settings, tmp_path / "pactmw.json")
    assert "unoffered" not in clean.stderr, clean.stderr
