"""poppy.json and the issuer's metadata as each adapter serves them, over real servers on
127.0.0.1: the Provider at the site root (`pactmw serve`, ASGI, WSGI), the Flask extension,
and the helpers a Brand mounts on its own site. Always the document itself (200), never a
redirect (PAP-3.1-02), for the Brand's own hosts only."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask
from starlette.applications import Starlette

from pactmw.adapters.asgi import A2AProviderApp, poppy_discovery_route
from pactmw.adapters.flask import Pactmw, poppy_discovery_view
from pactmw.adapters.wsgi import A2AProviderApp as WsgiProviderApp
from pactmw.adapters.wsgi import poppy_discovery_app
from pactmw.config import ConfigError
from pactmw.protocols.poppy import discovery_document
from pactmw.provider import Provider
from pactmw.store import MemoryStore
from tests.adapters.commands import CHECKOUT_ENV
from tests.poppy.support import site_config
from tests.support.net import free_port
from tests.support.poppy_world import BASE_URL, SHOP, poppy_brand, verifier_for
from tests.support.servers import (
    django_server,
    process_server,
    uvicorn_server,
    werkzeug_server,
)
from tests.support.tls import TestCA

ISSUER = f"{BASE_URL}/a2a/shop/poppy"
METADATA_PATH = "/.well-known/oauth-authorization-server/a2a/shop/poppy"


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    built = Provider(
        base_url=BASE_URL,
        verifier=verifier_for(TestCA(), free_port()),
        store=MemoryStore(),
        brands=(poppy_brand(domains=[SHOP, "www.shop.example"]),),
    )
    yield built
    built.close()


def _company() -> Any:
    from pactmw.provider.poppy import poppy_companies

    brand = poppy_brand(domains=[SHOP, "www.shop.example"])
    assert brand.poppy is not None
    return poppy_companies(BASE_URL, {"shop": (brand.name, brand.poppy)})["shop"]


def check_served(url: str, *, metadata: bool, unknown_host: int = 404) -> None:
    for host in (SHOP, "www.shop.example"):
        got = httpx.get(f"{url}/.well-known/poppy.json", headers={"Host": host})
        assert got.status_code == 200, got.text
        assert got.headers["content-type"] == "application/json"
        assert got.json() == discovery_document(_company(), host)
        assert got.json()["organization"]["domain"] == host
    other = httpx.get(f"{url}/.well-known/poppy.json", headers={"Host": "elsewhere.example"})
    assert other.status_code == unknown_host
    assert not other.is_redirect
    if metadata:
        document = httpx.get(url + METADATA_PATH).json()
        assert document["issuer"] == ISSUER
        assert document["token_endpoint"] == ISSUER + "/token"
        assert document["poppy_domains"] == [SHOP, "www.shop.example"]


def test_the_asgi_provider_at_the_root_serves_both_documents(provider: Provider) -> None:
    with uvicorn_server(A2AProviderApp(provider)) as url:
        check_served(url, metadata=True)


def test_the_asgi_route_serves_poppy_json_on_the_brand_site(provider: Provider) -> None:
    site = Starlette(routes=[poppy_discovery_route(provider, "shop")])
    with uvicorn_server(site) as url:
        check_served(url, metadata=False)


def test_the_wsgi_provider_and_helper_serve_poppy_json(provider: Provider) -> None:
    with werkzeug_server(WsgiProviderApp(provider)) as url:
        check_served(url, metadata=True)
    with werkzeug_server(poppy_discovery_app(provider, "shop")) as url:
        check_served(url, metadata=False)


def test_a_helper_for_a_brand_without_poppy_fails_at_startup(provider: Provider) -> None:
    # A ConfigError naming the helper (each case: tests/poppy/test_poppy_edges_2.py).
    with pytest.raises(ConfigError, match=r"^poppy_discovery_route\(provider, 'nobody'\)"):
        poppy_discovery_route(provider, "nobody")
    with pytest.raises(ConfigError, match=r"^poppy_discovery_app\(provider, 'nobody'\)"):
        poppy_discovery_app(provider, "nobody")


def flask_app() -> Flask:
    app = Flask(__name__)
    app.config["PACTMW"] = site_config()
    Pactmw(app)
    return app


def test_the_flask_extension_routes_both_documents_to_the_provider() -> None:
    with werkzeug_server(flask_app()) as url:
        check_served(url, metadata=True)


def test_the_flask_view_serves_poppy_json_on_another_route() -> None:
    app = flask_app()
    app.add_url_rule("/brand-site/poppy.json", view_func=poppy_discovery_view("shop"))
    with werkzeug_server(app) as url:
        got = httpx.get(f"{url}/brand-site/poppy.json", headers={"Host": SHOP})
        assert got.status_code == 200
        assert got.json() == discovery_document(_company(), SHOP)


def test_pactmw_serve_answers_poppy_json_for_the_brand_host(tmp_path: Path) -> None:
    (tmp_path / "pactmw.toml").write_text(
        f"""\
base_url = "{BASE_URL}"
audience = "{BASE_URL}/a2a"
store = "memory://"

[brands.shop]
name = "Shop"
handler = "tests.support.poppy_world:bot"

[brands.shop.poppy]
domain = "{SHOP}"
domains = ["{SHOP}", "www.shop.example"]
agents = "any"
custom_scopes = {{ "orders:read" = "Read your orders" }}
apis = [{{ type = "openapi", url = "{BASE_URL}/openapi.json", description = "Orders" }}]
"""
    )
    port = free_port()
    argv = [sys.executable, "-m", "pactmw", "serve", "--config", "pactmw.toml"]
    with process_server([*argv, "--port", str(port)], port, cwd=tmp_path, log=tmp_path / "log"):
        check_served(f"http://127.0.0.1:{port}", metadata=True)


@pytest.mark.parametrize("asgi", [False, True], ids=["wsgi", "asgi"])
def test_django_serves_both_documents_and_the_brand_site_view(asgi: bool, tmp_path: Path) -> None:
    settings = "pactmw_testsite.contract_settings"
    name = f"django-poppy-{'asgi' if asgi else 'wsgi'}"
    with django_server(
        site_config(),
        asgi=asgi,
        settings=settings,
        workdir=tmp_path,
        name=name,
        extra_env=CHECKOUT_ENV,  # this checkout's pactmw, not the one installed
    ) as url:
        # Django itself refuses a Host outside ALLOWED_HOSTS (400) before any view runs.
        check_served(url, metadata=True, unknown_host=400)
        got = httpx.get(f"{url}/brand-site/poppy.json", headers={"Host": SHOP})
        assert got.status_code == 200
        assert got.json() == discovery_document(_company(), SHOP)


def test_django_without_poppy_leaves_the_well_known_paths_to_the_site(tmp_path: Path) -> None:
    # No Brand has Poppy: a2a_urlpatterns() routes /a2a/ alone, so the site's own route under
    # /.well-known/oauth-authorization-server/ (listed after them) is reached, and poppy.json
    # is the site's 404, not the Provider's.
    config = site_config()
    del config["brands"]["shop"]["poppy"]
    with django_server(
        config,
        asgi=False,
        settings="pactmw_testsite.contract_settings",
        workdir=tmp_path,
        name="django-no-poppy",
        extra_env=CHECKOUT_ENV,
    ) as url:
        own = httpx.get(f"{url}/.well-known/oauth-authorization-server/o")
        assert own.status_code == 200, own.text[:200]
        assert own.json()["via"] == "sync"  # the site's view answered
        assert httpx.get(f"{url}/.well-known/poppy.json").status_code == 404
        card = httpx.get(f"{url}/a2a/shop/.well-known/agent-card.json")
        assert card.status_code == 200  # the Provider is still routed


def check_methods(url: str, refused: tuple[str, ...] = ("POST", "PUT", "DELETE", "FOO")) -> None:
    """The helpers a Brand mounts on its own site answer HEAD as GET, without the body (RFC
    9110 §9.3.2), and the `refused` methods with a 405 that says what the route takes
    (§15.5.6), as each framework's own GET routes do."""
    get = _exchange(url, "GET")
    head = _exchange(url, "HEAD")
    assert head[0] == get[0] == 200, (head, get)
    assert head[2] == b""
    assert head[1]["content-length"] == get[1]["content-length"] == str(len(get[2]))
    assert head[1]["content-type"] == get[1]["content-type"]
    for method in refused:
        answered = httpx.request(method, url, headers={"Host": SHOP})
        assert answered.status_code == 405, (method, answered.text[:200])
        allowed = {name.strip() for name in answered.headers["allow"].split(",")}
        assert {"GET", "HEAD"} <= allowed <= {"GET", "HEAD", "OPTIONS"}, (method, allowed)


#: A browser's preflight for a cross-origin GET that sends a header of its own.
PREFLIGHT = {
    "Host": SHOP,
    "Origin": "https://agent.example",
    "Access-Control-Request-Method": "GET",
    "Access-Control-Request-Headers": "a2a-version",
}


def check_options(url: str) -> None:
    """OPTIONS as every routed public document answers it: 204 with `Allow` (RFC 9110
    §9.3.7), and the CORS preflight's answer (poppy.json is public, read from any origin)."""
    answered = httpx.request("OPTIONS", url, headers=PREFLIGHT)
    where = (url, answered.status_code, dict(answered.headers), answered.text[:200])
    assert answered.status_code == 204, where
    assert answered.content == b"", where
    assert answered.headers["allow"] == "GET, HEAD, OPTIONS", where
    assert answered.headers["access-control-allow-origin"] == "*", where
    assert answered.headers["access-control-allow-methods"] == "GET, HEAD", where
    assert answered.headers["access-control-allow-headers"] == "*", where


def _exchange(url: str, method: str) -> tuple[int, dict[str, str], bytes]:
    """One request to `url` on its own connection, and all that came back: status, headers
    (lower-case names) and the bytes after them (httpx reads no body after a HEAD)."""
    parsed = httpx.URL(url)
    request = f"{method} {parsed.raw_path.decode()} HTTP/1.1\r\nHost: {SHOP}\r\n"
    received = b""
    with socket.create_connection((parsed.host, parsed.port or 80), timeout=20) as sock:
        sock.sendall(f"{request}Connection: close\r\n\r\n".encode())
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    fields = {name.lower(): value.strip() for name, _, value in (s.partition(":") for s in lines)}
    return int(status_line.split(" ")[1]), fields, body


def test_the_brand_site_helpers_answer_head_as_get_options_and_405_to_other_methods(
    provider: Provider, tmp_path: Path
) -> None:
    # Found checking HEAD: the WSGI app and the Django view answered every method with the
    # document (a POST too), and the WSGI app wrote the body after a HEAD's headers.
    # Reported later: OPTIONS was each framework's answer (405; Flask's own 200 without
    # CORS), where every other routed public document answers 204, `Allow` and the preflight.
    with werkzeug_server(poppy_discovery_app(provider, "shop")) as url:
        check_methods(f"{url}/.well-known/poppy.json")
        check_options(f"{url}/.well-known/poppy.json")
    with uvicorn_server(Starlette(routes=[poppy_discovery_route(provider, "shop")])) as url:
        check_methods(f"{url}/.well-known/poppy.json")
        check_options(f"{url}/.well-known/poppy.json")
    app = flask_app()
    app.add_url_rule("/brand-site/poppy.json", view_func=poppy_discovery_view("shop"))
    with werkzeug_server(app) as url:
        check_methods(f"{url}/brand-site/poppy.json")
        check_options(f"{url}/brand-site/poppy.json")
    settings = "pactmw_testsite.contract_settings"
    with django_server(
        site_config(),
        asgi=False,
        settings=settings,
        workdir=tmp_path,
        name="django-poppy-methods",
        extra_env=CHECKOUT_ENV,
    ) as url:
        # Django's CSRF middleware refuses the unsafe methods (403) before any view of the
        # site runs, as for its own GET-only views: none reaches the view to be refused.
        check_methods(f"{url}/brand-site/poppy.json", refused=())
        check_options(f"{url}/brand-site/poppy.json")
