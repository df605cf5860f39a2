"""Poppy views naming a Brand that is unknown or has no Poppy, where no startup check saw
them: Flask's added after `init_app`, Django's under uvicorn (which runs no system check).
Each request is a 503 with Poppy's error body, never a 500 or a traceback, and the log says
once per view, at ERROR, which Brand and what to fix. Over real servers: Flask on Werkzeug,
Django under uvicorn. (Starlette, FastAPI and WSGI take the Provider where the view is made
and refuse the Brand there: `test_a_brand_without_poppy_is_refused_where_the_check_is_made`
and `test_a_discovery_helper_for_a_brand_without_poppy_is_refused_where_it_is_made`.)"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask, jsonify

from pactmw.adapters import flask as pactmw_flask
from tests.adapters.commands import CHECKOUT_ENV
from tests.poppy.support import site_config
from tests.support.poppy_world import SHOP
from tests.support.servers import django_server, werkzeug_server

pytestmark = pytest.mark.timeout(120)

#: The views, as the Django test site routes them (`PACTMW_TEST_POPPY_APIS`) and the Flask
#: app below adds them after `init_app`: each path and its decorator as written.
VIEWS = [
    ("/api/poppy-orders", "poppy_session_required('shop')"),
    ("/api/poppy-orders-async", "poppy_session_required('shop')"),
    ("/brand-site/poppy.json", "poppy_discovery_view('shop')"),
]

#: What the log says after `{view} on {path} refuses every request: `.
FIX = "name one of the Brands with Poppy in it, or give the Brand a [brands.X.poppy] table"


def _without_poppy() -> dict[str, Any]:
    """Poppy on a Brand "store"; "shop", which the views name, has none."""
    config = site_config()
    shop = config["brands"]["shop"]
    config["brands"] = {"shop": {k: v for k, v in shop.items() if k != "poppy"}, "store": shop}
    return config


def _unknown() -> dict[str, Any]:
    """Poppy on a Brand "store" only: "shop", which the views name, is not one of brands."""
    config = site_config()
    config["brands"] = {"store": config["brands"]["shop"]}
    return config


#: (the settings, what the log says of the Brand "shop" under them).
CASES = [
    pytest.param(
        _without_poppy,
        "Brand 'shop' does not enable Poppy (no [brands.shop.poppy]); Brands with Poppy: 'store'",
        id="no-poppy",
    ),
    pytest.param(
        _unknown,
        "Brand 'shop' is not one of the Provider's brands; Brands with Poppy: 'store'",
        id="unknown",
    ),
]

#: The answer's body: Poppy's error (`{"error": code}`), which a Poppy agent reads.
UNAVAILABLE = {"error": "temporarily_unavailable"}


@contextmanager
def _flask(config: dict[str, Any], workdir: Path) -> Iterator[str]:
    app = Flask(__name__)
    app.config["PACTMW"] = config
    pactmw_flask.Pactmw(app)  # the views below are added after it: it never saw them

    @app.get("/api/poppy-orders")
    @pactmw_flask.poppy_session_required("shop", "orders:read")
    def orders() -> Any:
        return jsonify(ran=True)

    @app.get("/api/poppy-orders-async")
    @pactmw_flask.poppy_session_required("shop", "orders:read")
    async def orders_async() -> Any:
        return jsonify(ran=True)

    app.add_url_rule("/brand-site/poppy.json", view_func=pactmw_flask.poppy_discovery_view("shop"))
    with werkzeug_server(app) as url:
        yield url


@contextmanager
def _django(config: dict[str, Any], workdir: Path) -> Iterator[str]:
    with django_server(
        config,
        asgi=True,
        settings="pactmw_testsite.contract_settings",
        workdir=workdir,
        name="django-poppy",
        extra_env={**CHECKOUT_ENV, "PACTMW_TEST_POPPY_APIS": "1"},
    ) as url:
        yield url


SERVERS = [pytest.param(_flask, id="flask"), pytest.param(_django, id="django-uvicorn")]


def _said(server: Callable[..., Any], workdir: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    """The ERROR lines of `pactmw.adapters`: in this process (Flask's server runs in a
    thread), or in the Django server's log, a line each (its format is the bare message)."""
    if server is _django:
        return (workdir / "django-poppy.log").read_text().splitlines()
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "pactmw.adapters" and record.levelno == logging.ERROR
    ]


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize(("settings", "problem"), CASES)
def test_a_poppy_view_whose_brand_has_no_poppy_is_a_503_said_once(
    server: Callable[[dict[str, Any], Path], Any],
    settings: Callable[[], dict[str, Any]],
    problem: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Reported: each request raised `ConfigError` inside the view, a 500 on every request,
    # where no startup check had seen the view.
    caplog.set_level(logging.ERROR, logger="pactmw.adapters")
    with server(settings(), tmp_path) as url:
        for path, _ in VIEWS:
            for _ in range(3):
                answer = httpx.get(f"{url}{path}", headers={"Host": SHOP})
                assert answer.status_code == 503, (path, answer.text[:300])
                assert answer.json() == UNAVAILABLE, path
                assert answer.headers["cache-control"] == "no-store"
                assert answer.headers["content-type"].startswith("application/json")
    said = _said(server, tmp_path, caplog)
    for path, view in VIEWS:
        line = f"{view} on {path} refuses every request: {problem}; {FIX}"
        assert said.count(line) == 1, (line, said)
    assert not [line for line in said if "Traceback" in line], said
