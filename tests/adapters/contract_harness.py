"""Real servers for the adapter contract suite, one per adapter, all configured alike.

Every server gets the same `PACTMW`-style dict (its own sqlite store file): one registered
personal agent with an inline JWKS, the Brand `acme` offering delegation (scope
`orders:read`) and Parafé (against the stand-in broker of `tests.parafe_integration`), the
Provider served at `/a2a/`, and `/api` guarded by the adapter's middleware. The test process
gets its delegation tokens as an app's own tests do: `Provider.grant_delegation` of a
Provider built from the server's settings, on the server's store and signing key.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.delegation import SigningKeys
from pactmw.provider import Provider, ProviderSettings
from pactmw.store import open_store
from pactmw.store.base import Store
from tests.adapters import contract_apps as apps
from tests.adapters.commands import CHECKOUT_ENV
from tests.adapters.tokens import AgentKey, claims, jwks
from tests.parafe_integration.support import World
from tests.support.net import loopback_client
from tests.support.parties import AUDIENCE, ISSUER
from tests.support.servers import (
    django_server,
    uvicorn_server,
    werkzeug_server,
)

BASE_URL = "https://shop.example"

#: The servers, and the view flavours each framework has.
SERVERS: dict[str, tuple[str, ...]] = {
    "starlette": ("sync", "async"),
    "fastapi": ("sync", "async"),
    "wsgi": ("sync",),
    "flask": ("sync", "async"),
    "django-wsgi": ("sync", "async"),
    "django-asgi": ("sync", "async"),
}
#: Started on request only, never by the whole contract: `serve`, the Provider alone at the
#: site root on uvicorn (as `pactmw serve` runs it), which has none of the host app's routes.
PROVIDER_ONLY = ("serve",)
#: A Brand table's `poppy` (the Brand's own site is `shop.example`), for `brand_extra`.
POPPY = {
    "poppy": {
        "domain": "shop.example",
        "agents": "any",
        "custom_scopes": {"orders:read": "Read your orders"},
    }
}


@dataclass
class Target:
    """One server under test."""

    name: str
    client: httpx.Client
    variants: tuple[str, ...]
    store: Store
    signing: SigningKeys
    agent: AgentKey
    parafe: World
    #: The server's settings: what `provider` is built from.
    settings: Mapping[str, Any]
    grants: list[str] = field(default_factory=list)
    _provider: Provider | None = field(default=None, repr=False)

    @property
    def provider(self) -> Provider:
        """The server's Provider as an app's own test process builds it: from the server's
        settings, on the server's store (built on first use; the store's owner closes it, and
        its Parafé files nothing here: `config` drops the filing)."""
        if self._provider is None:
            built = ProviderSettings.from_mapping(dict(self.settings))
            self._provider = Provider.from_settings(built, store=self.store)
        return self._provider

    def token(self, **overrides: Any) -> str:
        return self.agent.sign(claims(ISSUER, **overrides))

    def headers(self, token: str | None = None, delegation: str | None = None) -> dict[str, str]:
        headers: dict[str, str] = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if delegation is not None:
            headers["X-A2A-User-Delegation"] = delegation
        return headers

    def delegation(self, *scopes: str, sub: str = "user-42") -> tuple[str, str]:
        """An `X-A2A-User-Delegation` value for a fresh grant of `scopes`, and its account."""
        account = f"acct-{uuid.uuid4().hex[:8]}"
        granted = self.provider.grant_delegation(
            apps.BRAND, account=account, agent_issuer=ISSUER, agent_sub=sub, scopes=scopes
        )
        return granted.header, account


def config(
    workdir: Path, name: str, agent: AgentKey, parafe: World, *, with_parafe: bool = True
) -> dict[str, Any]:
    """The settings of server `name`; without `with_parafe`, its Brand has no Parafé (and
    no `parafe_brand` names it): the Parafé endpoints then have no runtime to check with."""
    table = parafe.parafe_table()
    del table["file_receipts"], table["credential_file"]  # no background filing here
    settings: dict[str, Any] = {
        "base_url": BASE_URL,
        "audience": AUDIENCE,
        "protect_prefix": apps.PREFIX,
        "agents": [{"issuer": ISSUER, "name": "Contract PA", "jwks": jwks(agent)}],
        "store": f"sqlite:///{workdir / (name + '.db')}",
        "signing_keys": [str(workdir / "signing.jwk")],
        "brands": {
            apps.BRAND: {
                "name": "Acme",
                "handler": "examples.bots:order_bot",
                "delegation": {
                    "scopes": {"orders:read": "See your orders", "orders:cancel": "Cancel"},
                    "login_url": "/login",
                },
                "parafe": table,
            }
        },
        "delegation_brand": apps.BRAND,
        "parafe_brand": apps.BRAND,
    }
    if not with_parafe:
        del settings["brands"][apps.BRAND]["parafe"], settings["parafe_brand"]
    return settings


class Harness:
    """Starts each server on first use; stops them all at the end of the module."""

    def __init__(
        self,
        workdir: Path,
        extra: Mapping[str, Any] | None = None,
        brand_extra: Mapping[str, Any] | None = None,
        *,
        with_parafe: bool = True,
        django_env: Mapping[str, str] | None = None,
    ) -> None:
        """`extra` settings are added to every server's (e.g. rate limits of its own), and
        `brand_extra` to its Brand's table (e.g. a `poppy` table); without `with_parafe` the
        Brand has no Parafé (`config`). `django_env` goes to the Django test site's
        environment (the switches of its routes)."""
        self.workdir = workdir
        self.extra = dict(extra or {})
        self.brand_extra = dict(brand_extra or {})
        self.with_parafe = with_parafe
        self.django_env = dict(django_env or {})
        self.stack = contextlib.ExitStack()
        self.agent = AgentKey.generate("ES256", "contract-1")
        self.parafe = self.stack.enter_context(contextlib.closing(World(workdir, shop_alg="ES256")))
        key = generate_private_jwk("ES256", kid="sign-1")
        (workdir / "signing.jwk").write_text(json.dumps(key.to_dict()))
        self.signing = SigningKeys.from_files([str(workdir / "signing.jwk")])
        self.targets: dict[str, Target] = {}

    def close(self) -> None:
        self.stack.close()

    def get(self, name: str) -> Target:
        if name not in self.targets:
            self.targets[name] = self._start(name)
        return self.targets[name]

    def _start(self, name: str) -> Target:
        settings = {
            **config(self.workdir, name, self.agent, self.parafe, with_parafe=self.with_parafe),
            **self.extra,
        }
        settings["brands"][apps.BRAND].update(self.brand_extra)
        if name == "serve":
            base = self.stack.enter_context(uvicorn_server(apps.provider_root_app(settings)))
        elif name == "starlette":
            base = self.stack.enter_context(uvicorn_server(apps.starlette_app(settings)))
        elif name == "fastapi":
            base = self.stack.enter_context(uvicorn_server(apps.fastapi_app(settings)))
        elif name == "wsgi":
            base = self.stack.enter_context(werkzeug_server(apps.wsgi_app(settings)))
        elif name == "flask":
            base = self.stack.enter_context(werkzeug_server(apps.flask_app(settings)))
        else:
            base = self._start_django(name, settings)
        store = open_store(str(settings["store"]))
        self.stack.callback(store.close)
        client = self.stack.enter_context(loopback_client(base_url=base, timeout=20.0))
        return Target(
            name=name,
            client=client,
            variants=SERVERS.get(name, ()),
            store=store,
            signing=self.signing,
            agent=self.agent,
            parafe=self.parafe,
            settings=settings,
        )

    def _start_django(self, name: str, settings: dict[str, Any]) -> str:
        server = django_server(
            settings,
            asgi=name != "django-wsgi",
            settings="pactmw_testsite.contract_settings",
            workdir=self.workdir,
            name=name,
            extra_env={**CHECKOUT_ENV, **self.django_env},
        )
        return self.stack.enter_context(server)


@contextlib.contextmanager
def harness(
    workdir: Path,
    extra: Mapping[str, Any] | None = None,
    brand_extra: Mapping[str, Any] | None = None,
    *,
    with_parafe: bool = True,
    django_env: Mapping[str, str] | None = None,
) -> Iterator[Harness]:
    started = Harness(workdir, extra, brand_extra, with_parafe=with_parafe, django_env=django_env)
    try:
        yield started
    finally:
        started.close()
