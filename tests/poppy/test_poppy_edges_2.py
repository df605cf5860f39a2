"""Poppy edges: the discovery helpers naming a Brand without Poppy are a `ConfigError` where
they are made, and a conversation request with a bad query parameter is refused before it
has any effect (no bot run, no turn stored, its message id still free). Over real servers:
Flask on Werkzeug, Django under uvicorn, the TLS world for conversations."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from flask import Flask

from pactmw.adapters import flask as pactmw_flask
from pactmw.adapters.asgi import poppy_discovery_route
from pactmw.adapters.wsgi import poppy_discovery_app
from pactmw.config import ConfigError
from pactmw.provider import Brand, Provider
from pactmw.store import MemoryStore
from tests.adapters.commands import CHECKOUT_ENV
from tests.poppy.test_discovery_serving import site_config
from tests.support.net import free_port
from tests.support.poppy_world import (
    BASE_URL,
    SHOP,
    bot,
    poppy_brand,
    verifier_for,
)
from tests.support.servers import django_server, werkzeug_server
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


#: (the Brand asked for, what the error says of it): a typo, and a Brand without Poppy.
NOT_POPPY = [
    pytest.param("shopp", "Brand 'shopp' is not one of the Provider's brands", id="typo"),
    pytest.param("acme", "Brand 'acme' does not enable Poppy", id="no-poppy"),
]


def assert_names(error: ConfigError, setting: str, said: str) -> None:
    message = str(error)
    assert message.startswith(setting), message
    assert said in message, message
    assert "Brands with Poppy: 'shop'" in message, message


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


def test_flask_names_a_misspelt_brand_of_a_discovery_view_added_after_init_app() -> None:
    # Added after `Pactmw(app)`: its first request raises the error named, never a KeyError.
    app = Flask(__name__)
    app.config["PACTMW"] = site_config()
    pactmw_flask.Pactmw(app)
    app.add_url_rule("/brand-site/poppy.json", view_func=pactmw_flask.poppy_discovery_view("shopp"))
    app.add_url_rule("/shop/poppy.json", view_func=pactmw_flask.poppy_discovery_view("shop"))
    app.testing = True  # the view's exception reaches the test, not Flask's 500 page
    with pytest.raises(ConfigError) as caught:
        app.test_client().get("/brand-site/poppy.json", headers={"Host": SHOP})
    assert_names(caught.value, "poppy_discovery_view('shopp')", "is not one of")
    # The Brand's own view still serves its document over a real server.
    with werkzeug_server(app) as url:
        assert httpx.get(f"{url}/shop/poppy.json", headers={"Host": SHOP}).status_code == 200


def test_django_names_the_brand_of_a_discovery_view_without_poppy(tmp_path: Path) -> None:
    # The test site's `brand-site/poppy.json` is Brand "shop"'s view: with Poppy on "store"
    # instead, a request is Django's 500 and its error names the view and the Brands with
    # Poppy (Django logs a view's exception when DEBUG is on).
    config = site_config()
    shop = config["brands"]["shop"]
    config["brands"] = {"shop": {k: v for k, v in shop.items() if k != "poppy"}, "store": shop}
    with django_server(
        config,
        asgi=True,
        settings="pactmw_testsite.contract_settings",
        workdir=tmp_path,
        name="django-discovery",
        extra_env={**CHECKOUT_ENV, "PACTMW_TEST_DEBUG": "1"},
    ) as url:
        answer = httpx.get(f"{url}/brand-site/poppy.json", headers={"Host": SHOP})
    assert answer.status_code == 500
    said = (tmp_path / "django-discovery.log").read_text()
    assert "KeyError" not in said, said
    assert "poppy_discovery_view('shop'): Brand 'shop' does not enable Poppy" in said, said
    assert "Brands with Poppy: 'store'" in said, said
