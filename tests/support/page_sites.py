"""One Provider with a delegating Brand served by each adapter family, from one settings dict.

Used by the tests of the person-facing pages (templates, connected agents): the same settings
run on uvicorn (ASGI), Werkzeug (plain WSGI, and Flask) and a Django server process, so a rule
of the pages is proven on every adapter. A Brand's own templates are found the way each
framework finds templates: the `templates` setting (ASGI, WSGI), the Flask app's template
folder, the Django project's template directories.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pactmw.core.jwk import generate_private_jwk
from tests.support.net import free_port
from tests.support.servers import django_server, uvicorn_server, werkzeug_server

__all__ = ["ADAPTERS", "BRAND", "page_site", "site_settings"]

#: The adapter families, each a real server.
ADAPTERS = ("asgi", "wsgi", "flask", "django")
BRAND = "acme"


def site_settings(
    workdir: Path,
    base_url: str,
    *,
    delegation: dict[str, Any] | None = None,
    agents: list[dict[str, Any]] | None = None,
    offers_delegation: bool = True,
) -> dict[str, Any]:
    """Settings of a Provider whose Brand `acme` offers delegation (same-app unless told;
    `offers_delegation` False: none, no `delegation` table)."""
    key_file = workdir / "signing.jwk"
    if not key_file.exists():
        key_file.write_text(json.dumps(generate_private_jwk("ES256", kid="sign-1").to_dict()))
    brand: dict[str, Any] = {"name": "Acme Outdoor", "handler": "examples.bots:order_bot"}
    if offers_delegation:
        brand["delegation"] = delegation or {
            "scopes": {"orders:read": "See your orders", "orders:cancel": "Cancel"},
            "login_url": "/login",
        }
    return {
        "base_url": base_url,
        "audience": "urn:test:pages",
        "agents": agents or [],
        "store": f"sqlite:///{workdir / 'pages.db'}",
        "signing_keys": [str(key_file)],
        "brands": {BRAND: brand},
    }


@contextlib.contextmanager
def page_site(
    adapter: str,
    workdir: Path,
    templates: Path,
    *,
    delegation: dict[str, Any] | None = None,
    agents: list[dict[str, Any]] | None = None,
    port: int | None = None,
    offers_delegation: bool = True,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Serve the Provider with `adapter` (on `port`, else a free one); yield (base URL,
    settings). `templates` is the Brand's template folder, handed over as that framework's
    users do."""
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    settings = site_settings(
        workdir, base, delegation=delegation, agents=agents, offers_delegation=offers_delegation
    )
    if adapter == "django":
        with django_server(
            settings,
            asgi=False,
            settings="pactmw_testsite.pages_settings",
            workdir=workdir,
            name="pages-django",
            port=port,
            extra_env={"PACTMW_TEST_TEMPLATES": str(templates)},
        ) as served:
            yield served, settings
        return
    if adapter == "flask":
        from flask import Flask

        from pactmw.adapters.flask import Pactmw

        flask_app = Flask(__name__, template_folder=str(templates))
        flask_app.config["PACTMW"] = settings
        Pactmw(flask_app)
        with werkzeug_server(flask_app, port=port) as served:
            yield served, settings
        return
    from pactmw.provider import Provider
    from pactmw.provider.settings import ProviderSettings

    provider = Provider.from_settings(
        ProviderSettings.from_mapping({**settings, "templates": str(templates)})
    )
    try:
        if adapter == "asgi":
            from pactmw.adapters.asgi import A2AProviderApp

            with uvicorn_server(A2AProviderApp(provider), port=port) as served:
                yield served, settings
        else:
            from pactmw.adapters.wsgi import A2AProviderApp as WsgiProviderApp

            with werkzeug_server(WsgiProviderApp(provider), port=port) as served:
                yield served, settings
    finally:
        provider.close()
