"""The guard's caller rules, asked directly, through its blocking and its async entry point.

Every adapter reaches the caller through `Guard.authenticate` or `Guard.aauthenticate`; the
async one answers a cached token without driving a flow. Both must give the same answer to
the same request, whether the token is new or cached, including when a cached token has
expired or its agent was blocked since it was cached.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send

from pactmw.adapters import asgi, fastapi, wsgi
from pactmw.adapters import flask as flask_adapter
from pactmw.adapters._arguments import scope_list_problem
from pactmw.adapters._common import Once
from pactmw.adapters.django import decorators as django_decorators
from pactmw.adapters.django import views as django_views
from pactmw.config import ConfigError, Settings
from pactmw.core.errors import AuthenticationFailed
from pactmw.core.http import Request
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import public_key_set
from pactmw.protocols.delegation import DelegationRejected
from pactmw.protocols.identity import (
    AgentRegistry,
    IdentityVerifier,
    PersonalAgent,
    RegisteredAgent,
)
from pactmw.provider import Brand, Provider
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.guard import Guard
from pactmw.provider.parafe import ParafeAgent, ParafeConfig
from pactmw.provider.poppy import PoppyConfig
from pactmw.store import open_store
from tests.adapters.support import AUDIENCE, World
from tests.support.net import closed_port_url
from tests.support.parties import ISSUER

Authenticate = Callable[[Guard, Request, bool], "PersonalAgent | None"]


def _sync(guard: Guard, request: Request, optional: bool) -> PersonalAgent | None:
    return guard.authenticate(request, optional=optional)


def _async(guard: Guard, request: Request, optional: bool) -> PersonalAgent | None:
    return asyncio.run(guard.aauthenticate(request, optional=optional))


@pytest.fixture(params=[_sync, _async], ids=["authenticate", "aauthenticate"])
def authenticate(request: pytest.FixtureRequest) -> Authenticate:
    found: Authenticate = request.param
    return found


@pytest.fixture(scope="module")
def world() -> World:
    return World()


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _request(*headers: tuple[str, str]) -> Request:
    return Request("GET", "/a2a/whoami", headers=headers)


def _refusal(
    authenticate: Authenticate, guard: Guard, request: Request, optional: bool = False
) -> AuthenticationFailed:
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate(guard, request, optional)
    return refused.value


def _guard(registry: AgentRegistry, clock: Clock) -> Guard:
    verifier = IdentityVerifier(audience=AUDIENCE, registry=registry, clock=clock)
    return Guard(verifier)


def _registry(world: World) -> AgentRegistry:
    return AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks=public_key_set([world.agent_key]))])


def _token(world: World, clock: Clock, sub: str = "user-1") -> str:
    now = int(clock.now)
    claims = {"iss": ISSUER, "sub": sub, "aud": AUDIENCE, "iat": now, "exp": now + 120}
    return "Bearer " + sign_compact(claims, world.agent_key, typ="JWT")


@pytest.mark.parametrize("store_backed", [False, True], ids=["in-memory", "may-block"])
def test_a_token_new_then_cached_gives_the_same_caller(
    world: World, authenticate: Authenticate, store_backed: bool
) -> None:
    agent = RegisteredAgent(issuer=ISSUER, jwks=public_key_set([world.agent_key]))
    # A resolver may block: the async guard then takes the verifier's awaited path.
    registry = (
        AgentRegistry(resolver=lambda issuer: agent if issuer == ISSUER else None)
        if store_backed
        else AgentRegistry([agent])
    )
    clock = Clock()
    guard = _guard(registry, clock)
    request = _request(("authorization", _token(world, clock)))
    first = authenticate(guard, request, False)
    again = authenticate(guard, request, False)
    assert first is not None
    assert again is not None
    assert (again.issuer, again.sub, again.audience) == (ISSUER, "user-1", AUDIENCE)
    assert (first.issuer, first.sub, first.actor_id) == (again.issuer, again.sub, again.actor_id)
    assert again.delegation is None
    assert dict(again.claims) == dict(first.claims)


def test_a_cached_token_is_refused_once_its_agent_is_blocked(
    world: World, authenticate: Authenticate
) -> None:
    registry = _registry(world)
    clock = Clock()
    guard = _guard(registry, clock)
    request = _request(("authorization", _token(world, clock)))
    assert authenticate(guard, request, False) is not None  # verified, now cached
    registry.disable(ISSUER)
    assert _refusal(authenticate, guard, request).reason == "disabled_issuer"
    registry.enable(ISSUER)
    assert authenticate(guard, request, False) is not None


def test_a_cached_token_is_refused_once_it_has_expired(
    world: World, authenticate: Authenticate
) -> None:
    clock = Clock()
    guard = _guard(_registry(world), clock)
    request = _request(("authorization", _token(world, clock)))
    assert authenticate(guard, request, False) is not None  # verified, now cached
    clock.now += 120 + guard.verifier.leeway + 1
    assert _refusal(authenticate, guard, request).reason == "expired"


def test_optional_takes_no_credential_but_checks_one_that_is_sent(
    world: World, authenticate: Authenticate
) -> None:
    clock = Clock()
    guard = _guard(_registry(world), clock)
    assert authenticate(guard, _request(("host", "provider.example")), True) is None
    # Another scheme's credential is no personal agent's: none, when optional...
    other = _request(("authorization", "Bearer x.y.z"))
    assert authenticate(guard, other, True) is None
    assert _refusal(authenticate, guard, other).reason == "malformed_token"
    basic = _request(("authorization", "Basic dXNlcjpwYXNz"))
    assert authenticate(guard, basic, True) is None
    assert _refusal(authenticate, guard, basic).reason == "malformed_header"
    # ...unless a delegation, bound to a personal agent's identity, came with it.
    delegated = _request(("authorization", "Bearer x.y.z"), ("x-a2a-user-delegation", "a.b.c"))
    assert _refusal(authenticate, guard, delegated, optional=True).reason == "malformed_token"
    # A personal agent's token that fails is refused, never taken for none.
    expired = _token(world, clock)
    clock.now += 3600
    refused = _refusal(authenticate, guard, _request(("authorization", expired)), optional=True)
    assert refused.reason == "expired"
    good = _request(("authorization", _token(world, clock)))
    assert authenticate(guard, good, True) is not None


def test_a_delegation_without_the_identity_is_no_credential(
    world: World, authenticate: Authenticate
) -> None:
    guard = _guard(_registry(world), Clock())
    alone = _request(("x-a2a-user-delegation", world.delegation(("orders:read",))))
    for optional in (False, True):
        assert _refusal(authenticate, guard, alone, optional).reason == "missing_token"


def test_no_or_a_repeated_authorization_is_missing(
    world: World, authenticate: Authenticate
) -> None:
    clock = Clock()
    guard = _guard(_registry(world), clock)
    assert _refusal(authenticate, guard, _request()).reason == "missing_token"
    token = _token(world, clock)
    twice = _request(("authorization", token), ("authorization", token))
    assert _refusal(authenticate, guard, twice).reason == "missing_token"


def test_a_delegation_where_none_is_offered_is_refused_after_the_identity(
    world: World, authenticate: Authenticate
) -> None:
    clock = Clock()
    guard = _guard(_registry(world), clock)
    delegation = ("x-a2a-user-delegation", world.delegation(("orders:read",)))
    good = _request(("authorization", _token(world, clock)), delegation)
    refused = _refusal(authenticate, guard, good)
    assert isinstance(refused, DelegationRejected)
    assert refused.reason == "not_offered"
    # The identity is checked first: a bad one is refused as such, not as the delegation.
    bad = _request(("authorization", "Bearer x.y.z"), delegation)
    refused = _refusal(authenticate, guard, bad)
    assert not isinstance(refused, DelegationRejected)
    assert refused.reason == "malformed_token"


def test_a_delegation_adds_its_grant_to_the_caller(
    world: World, authenticate: Authenticate
) -> None:
    guard = Guard(world.verifier, provider=world.provider, delegation_brand="acme")
    identity = world.identity()
    delegated = _request(
        ("authorization", identity),
        ("x-a2a-user-delegation", world.delegation(("orders:read",))),
    )
    caller = authenticate(guard, delegated, False)
    assert caller is not None
    assert caller.delegation is not None
    assert caller.delegation.scopes == frozenset({"orders:read"})
    plain = authenticate(guard, _request(("authorization", identity)), False)
    assert plain is not None
    assert plain.delegation is None
    forged = _request(("authorization", identity), ("x-a2a-user-delegation", "Bearer x.y.z"))
    assert isinstance(_refusal(authenticate, guard, forged), DelegationRejected)


# -- the guarded prefix: a path, or nothing --------------------------------------------------


def _any_app(*arguments: Any) -> Any:
    """An application to wrap where only the middleware's own arguments are checked."""


@pytest.mark.parametrize(
    ("middleware", "application"),
    [
        (asgi.PersonalAgentMiddleware, "an ASGI application"),
        (wsgi.PersonalAgentMiddleware, "a WSGI application"),
    ],
)
@pytest.mark.parametrize("app", ["app:application", None, b"app"])
def test_a_middleware_given_no_application_to_wrap_is_refused_when_built(
    world: World,
    middleware: type[asgi.PersonalAgentMiddleware | wsgi.PersonalAgentMiddleware],
    application: str,
    app: object,
) -> None:
    # Found in a plain WSGI trial: an import string (or None) where the app goes started under
    # gunicorn and failed every request it did not refuse with a 500 (a TypeError).
    verifier = IdentityVerifier(audience=AUDIENCE, registry=_registry(world))
    with pytest.raises(ConfigError) as caught:
        middleware(app, verifier)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"PersonalAgentMiddleware(app, verifier): app must be {application}, "
        f"not {type(app).__name__}"
    )


@pytest.mark.parametrize("middleware", [asgi.PersonalAgentMiddleware, wsgi.PersonalAgentMiddleware])
@pytest.mark.parametrize("prefix", ["api/", "", "a2a"])
def test_a_middleware_prefix_that_is_not_a_path_is_refused_when_built(
    world: World,
    middleware: type[asgi.PersonalAgentMiddleware | wsgi.PersonalAgentMiddleware],
    prefix: str,
) -> None:
    # Request paths start with "/": "api/" would guard nothing, and "" would guard every path
    # while the settings' "" guards none, so neither is guessed at.
    verifier = IdentityVerifier(audience=AUDIENCE, registry=_registry(world))
    with pytest.raises(ConfigError) as caught:
        middleware(_any_app, verifier, path_prefix=prefix)
    assert str(caught.value) == f"path_prefix must be a path starting with '/' (got {prefix!r})"


@pytest.mark.parametrize("prefix", ["/", "/api/", None])
def test_a_middleware_prefix_that_is_a_path_or_none_is_taken(
    world: World, prefix: str | None
) -> None:
    verifier = IdentityVerifier(audience=AUDIENCE, registry=_registry(world))
    guarded = asgi.PersonalAgentMiddleware(_any_app, verifier, path_prefix=prefix)
    assert guarded.guard.protect_prefix == prefix


@pytest.mark.parametrize(("written", "taken"), [("/api/", "/api/"), ("", None), (None, None)])
def test_the_settings_prefix_is_a_path_or_empty_for_none(
    written: str | None, taken: str | None
) -> None:
    settings = Settings.from_mapping({"audience": AUDIENCE, "protect_prefix": written})
    assert settings.protect_prefix == taken


@pytest.mark.parametrize("written", ["api/", "a2a", " /a2a/", 3])
def test_a_settings_prefix_that_is_not_a_path_names_the_key(written: object) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_mapping({"audience": AUDIENCE, "protect_prefix": written})
    assert str(caught.value).startswith("protect_prefix must be a")


@pytest.mark.parametrize(
    ("path", "apps_own_view", "guarded"),
    [
        ("/a2a/whoami", True, True),  # the app's view, routed before the Provider's
        ("/a2a/acme/mine", True, True),  # under a Brand's id too
        ("/a2a", True, True),
        ("/a2a/whoami", False, False),  # routed to the Provider (or not routed at all)
        ("/a2a/acme/.well-known/agent-card.json", False, False),
        ("/a2a/nobody/unknown", False, False),  # the Provider's 404 before any credential
        ("/api/echo", True, False),  # outside the guarded prefix
    ],
)
def test_serving_the_provider_leaves_its_paths_to_it_but_not_the_apps_views_there(
    world: World, path: str, apps_own_view: bool, guarded: bool
) -> None:
    # Before routing, all of /a2a/ is the Provider's (`protects`); once the framework has
    # routed a request there to a view of the app's own, the Provider never sees it.
    guard = Guard(world.verifier, provider=world.provider, serves_provider=True)
    assert guard.protects(path) is False
    assert guard.protects_once_routed(path, apps_own_view=apps_own_view) is guarded
    # Another guarded prefix: a view under /a2a/ is outside it, and one under /api/ was
    # verified before routing.
    elsewhere = Guard(
        world.verifier, provider=world.provider, serves_provider=True, protect_prefix="/api/"
    )
    assert elsewhere.protects_once_routed(path, apps_own_view=apps_own_view) is False
    # Without the Provider in the app, `protects` guards every path under the prefix before
    # routing; nothing is left to verify once routed (a caller is never verified twice).
    alone = Guard(world.verifier, provider=world.provider)
    assert alone.protects(path) is path.startswith("/a2a")
    assert alone.protects_once_routed(path, apps_own_view=apps_own_view) is False


@pytest.mark.parametrize(
    ("path", "public"),
    [
        ("/.well-known/agent-card.json", True),  # the Brand domain's card (PACT §2.1)
        ("/.well-known/poppy.json", True),
        ("/.well-known/oauth-authorization-server", True),  # RFC 8414, an issuer at the root
        ("/.well-known/oauth-authorization-server/a2a/acme/poppy", True),
        ("/.well-known/oauth-authorization-server/a2a/nobody/poppy", True),  # the server's 404
        ("/.well-known/apple-app-site-association", False),  # the app's own document
        ("/.well-known/poppy.json/x", False),
        ("/.well-known/oauth-authorization-serverx", False),
        ("/public", False),
    ],
)
def test_a_site_wide_guard_leaves_only_the_discovery_documents_public(
    world: World, path: str, public: bool
) -> None:
    # The documents an agent reads to discover the service, before it holds a credential,
    # are public by their specs: with the app serving the Provider or not, whichever view the
    # framework routes them to.
    for serves_provider in (True, False):
        guard = Guard(
            world.verifier,
            provider=world.provider,
            serves_provider=serves_provider,
            protect_prefix="/",
        )
        assert guard.protects(path) is not public, (path, serves_provider)
        assert guard.protects_once_routed(path, apps_own_view=True) is False


# -- the adapters' arguments: checked where the adapter is built -----------------------------

Build = Callable[..., object]

BUILDERS: dict[str, Build] = {
    "asgi middleware": lambda verifier, **more: asgi.PersonalAgentMiddleware(
        _any_app,
        verifier,
        **more,
    ),
    "wsgi middleware": lambda verifier, **more: wsgi.PersonalAgentMiddleware(
        _any_app,
        verifier,
        **more,
    ),
    "starlette backend": lambda verifier, **more: asgi.PersonalAgentBackend(verifier, **more),
    "fastapi scheme": lambda verifier, **more: fastapi.PersonalAgentScheme(verifier, **more),
    "asgi decorator": lambda verifier, **more: asgi.personal_agent_required(verifier, **more),
    "wsgi decorator": lambda verifier, **more: wsgi.personal_agent_required(verifier, **more),
}


@pytest.fixture(params=sorted(BUILDERS))
def build(request: pytest.FixtureRequest) -> Build:
    return BUILDERS[request.param]


def test_settings_given_for_a_verifier_are_refused_saying_what_makes_one(build: Build) -> None:
    settings = Settings.from_mapping({"audience": AUDIENCE})
    with pytest.raises(ConfigError) as caught:
        build(settings)
    assert str(caught.value) == (
        "verifier must be an IdentityVerifier (Settings.build_verifier() makes one), not Settings"
    )


def test_a_provider_given_for_a_verifier_is_refused_saying_what_to_pass(
    build: Build, world: World
) -> None:
    # Found in a FastAPI trial: `PersonalAgentScheme(provider)` said only "not Provider".
    with pytest.raises(ConfigError) as caught:
        build(world.provider)
    assert str(caught.value) == (
        "verifier must be an IdentityVerifier (pass provider.verifier), not Provider"
    )


def test_a_delegation_setup_that_could_never_verify_a_token_is_refused(
    build: Build, world: World
) -> None:
    # Each of these took every delegation token sent to a 401 (or a 500) at request time.
    undelegated = Provider(
        base_url="https://provider.example",
        verifier=world.verifier,
        store=open_store("memory://"),
        brands=[Brand(id="plain", name="Plain", handler=lambda turn: "hi")],
    )
    refusals: dict[str, list[dict[str, object]]] = {
        "delegation_provider and delegation_brand go together: give both": [
            {"delegation_brand": "acme"},
            {"delegation_provider": world.provider},
        ],
        "delegation_brand 'globex' is not one of brands": [
            {"delegation_provider": world.provider, "delegation_brand": "globex"}
        ],
        "delegation_brand 'plain' offers no delegation": [
            {"delegation_provider": undelegated, "delegation_brand": "plain"}
        ],
        "delegation_provider must be a Provider, not str": [
            {"delegation_provider": "acme", "delegation_brand": "acme"}
        ],
    }
    for message, arguments in refusals.items():
        for more in arguments:
            with pytest.raises(ConfigError) as caught:
                build(world.verifier, **more)
            assert str(caught.value) == message, more
    build(world.verifier, delegation_provider=world.provider, delegation_brand="acme")


@pytest.mark.parametrize("name", ["asgi middleware", "wsgi middleware"])
def test_a_middleware_told_a_wrong_served_provider_is_refused_where_it_is_built(
    name: str, world: World
) -> None:
    # `serves_provider` leaves the Provider's paths to it; the guard checks one Provider's
    # grants, so a delegation Provider other than the served one could only be a mistake.
    build = BUILDERS[name]
    other = Provider(
        base_url="https://provider.example",
        verifier=world.verifier,
        store=open_store("memory://"),
        brands=[Brand(id="plain", name="Plain", handler=lambda turn: "hi")],
    )
    refusals: dict[str, dict[str, object]] = {
        "serves_provider must be a Provider, not str": {"serves_provider": "acme"},
        "delegation_provider and serves_provider must be the same Provider": {
            "serves_provider": other,
            "delegation_provider": world.provider,
            "delegation_brand": "acme",
        },
    }
    for message, arguments in refusals.items():
        with pytest.raises(ConfigError) as caught:
            build(world.verifier, **arguments)
        assert str(caught.value) == message, arguments
    build(world.verifier, serves_provider=world.provider)
    build(
        world.verifier,
        serves_provider=world.provider,
        delegation_provider=world.provider,
        delegation_brand="acme",
    )


def _wsgi_app(environ: object, start_response: object) -> list[bytes]:
    return []


def test_the_wsgi_provider_app_given_no_provider_is_refused_where_it_is_built(
    world: World,
) -> None:
    # Found in a plain WSGI trial: settings for the Provider, or the app and the Provider
    # swapped, was an AttributeError ('Settings' object has no attribute 'brands').
    settings = Settings.from_mapping({"audience": AUDIENCE})
    refusals: dict[str, tuple[object, object]] = {
        "A2AProviderApp(provider, app=...): provider must be a Provider, not Settings": (
            settings,
            None,
        ),
        "A2AProviderApp(provider, app=...): provider must be a Provider, not function": (
            _wsgi_app,
            world.provider,
        ),
        "A2AProviderApp(provider, app=...): app must be a WSGI application, not str": (
            world.provider,
            "app:application",
        ),
    }
    for message, (provider, app) in refusals.items():
        with pytest.raises(ConfigError) as caught:
            wsgi.A2AProviderApp(provider, app)  # type: ignore[arg-type]
        assert str(caught.value) == message
    wsgi.A2AProviderApp(world.provider, _wsgi_app, current_user=lambda environ: None)


def test_the_wsgi_scope_decorator_without_its_scopes_is_refused_where_it_decorates() -> None:
    # Found in a plain WSGI trial: `@delegation_required` without its parentheses took the
    # application for a scope and made every request a 500 (a TypeError) instead.
    with pytest.raises(ConfigError) as caught:
        wsgi.delegation_required(_wsgi_app)  # type: ignore[arg-type]
    assert str(caught.value) == (
        "delegation_required takes the scopes to require: "
        "@delegation_required('orders:read'), not @delegation_required; got function"
    )
    wsgi.delegation_required("orders:read")(_wsgi_app)
    wsgi.delegation_required()(_wsgi_app)


def test_the_wsgi_poppy_helpers_given_no_provider_are_refused_where_they_are_built() -> None:
    # As `A2AProviderApp`: settings where the Provider goes was an AttributeError.
    settings: Any = Settings.from_mapping({"audience": AUDIENCE})
    builders: dict[str, Callable[[], object]] = {
        "poppy_session_required(provider, brand_id, *scopes)": lambda: wsgi.poppy_session_required(
            settings, "shop"
        ),
        "poppy_discovery_app(provider, brand_id)": lambda: wsgi.poppy_discovery_app(
            settings, "shop"
        ),
    }
    for call, build in builders.items():
        with pytest.raises(ConfigError) as caught:
            build()
        assert str(caught.value) == f"{call}: provider must be a Provider, not Settings"


# -- every adapter alike: a misconfigured entry point is a ConfigError where it is built ------


def _view(request: object) -> None:
    return None


#: Each adapter's scope decorator, and the call as the app writes it.
SCOPE_DECORATORS: dict[str, tuple[Callable[..., Callable[..., object]], str, str]] = {
    "asgi delegation_required": (asgi.delegation_required, "delegation_required", "orders:read"),
    "wsgi delegation_required": (wsgi.delegation_required, "delegation_required", "orders:read"),
    "flask delegation_required": (
        flask_adapter.delegation_required,
        "delegation_required",
        "orders:read",
    ),
    "django delegation_required": (
        django_decorators.delegation_required,
        "delegation_required",
        "orders:read",
    ),
    "starlette requires": (asgi.requires, "requires", "scope:orders:read"),
}


@pytest.mark.parametrize("name", sorted(SCOPE_DECORATORS))
def test_a_scope_decorator_without_its_parentheses_is_refused_where_it_decorates(
    name: str,
) -> None:
    # `@delegation_required` for `@delegation_required(...)` took the view for a scope: a 500
    # (or a TypeError) on every request, on each adapter its own way.
    decorator, call, example = SCOPE_DECORATORS[name]
    with pytest.raises(ConfigError) as caught:
        decorator(_view)
    assert str(caught.value) == (
        f"{call} takes the scopes to require: @{call}({example!r}), not @{call}; got function"
    )
    decorator(example)(_view)


#: Each adapter's call that takes a Provider, given its settings instead.
def _provider_builders(settings: Any) -> dict[str, Callable[[], object]]:
    return {
        "A2AProviderApp(provider, app=...)": lambda: asgi.A2AProviderApp(settings),
        "a2a_routes(provider, current_user=...)": lambda: asgi.a2a_routes(settings),
        "a2a_mount(provider, current_user=...)": lambda: asgi.a2a_mount(settings),
        "poppy_session_required(provider, brand_id, *scopes)": lambda: asgi.poppy_session_required(
            settings, "shop"
        ),
        "poppy_discovery_route(provider, brand_id)": lambda: asgi.poppy_discovery_route(
            settings, "shop"
        ),
        "PoppySessionScheme(provider, brand_id)": lambda: fastapi.PoppySessionScheme(
            settings, "shop"
        ),
        "wsgi A2AProviderApp(provider, app=...)": lambda: wsgi.A2AProviderApp(settings),
        "wsgi poppy_session_required(provider, brand_id, *scopes)": lambda: (
            wsgi.poppy_session_required(settings, "shop")
        ),
        "wsgi poppy_discovery_app(provider, brand_id)": lambda: wsgi.poppy_discovery_app(
            settings, "shop"
        ),
    }


@pytest.mark.parametrize("call", sorted(_provider_builders(None)))
def test_a_call_that_takes_a_provider_given_its_settings_is_refused_naming_the_call(
    call: str,
) -> None:
    # Settings where the Provider goes was an AttributeError ('Settings' object has no
    # attribute 'brands') on the ASGI and FastAPI adapters, as on the WSGI one before.
    settings: Any = Settings.from_mapping({"audience": AUDIENCE})
    with pytest.raises(ConfigError) as caught:
        _provider_builders(settings)[call]()
    assert str(caught.value) == (
        f"{call.removeprefix('wsgi ')}: provider must be a Provider, not Settings"
    )


#: Flask's and Django's `poppy_session_required(brand_id, *scopes)`: their Provider is the
#: app's settings', so the first argument is the Brand's id.
BRAND_DECORATORS: dict[str, Callable[..., Callable[..., object]]] = {
    "flask": flask_adapter.poppy_session_required,
    "django": django_decorators.poppy_session_required,
}


@pytest.mark.parametrize("name", sorted(BRAND_DECORATORS))
def test_a_poppy_decorator_without_its_brand_is_refused_where_it_decorates(
    name: str, world: World
) -> None:
    # Without its parentheses (or given the Provider, as the ASGI one takes it), the view or
    # the Provider was taken for the Brand's id: the view never ran, every request a 500.
    decorator = BRAND_DECORATORS[name]
    for wrong, kind in ((_view, "function"), (world.provider, "Provider")):
        with pytest.raises(ConfigError) as caught:
            decorator(wrong)
        assert str(caught.value) == (
            "poppy_session_required takes the Brand's id: "
            f"@poppy_session_required('shop'), not @poppy_session_required; got {kind}"
        )
    # A list of ids, or none at all, is no Brand either.
    for plain, shown in ((["shop"], "list ['shop']"), ("", "an empty string")):
        with pytest.raises(ConfigError) as caught:
            decorator(plain)
        assert str(caught.value) == (
            f"poppy_session_required takes the Brand's id: @poppy_session_required('shop'), "
            f"not {shown}"
        )
    decorator("shop", "orders:read")(_view)


# -- what a decorator names (an action, scopes, a Brand, an agent): checked where written ----


@pytest.fixture(scope="module")
def parafe_agent() -> Iterator[ParafeAgent]:
    # Nothing is fetched from the broker until a consent is checked, and none is here.
    config = ParafeConfig(
        agent_id="shop", broker_url=closed_port_url(), allow_http_broker_on_loopback=True
    )
    agent = ParafeAgent(config)
    yield agent
    agent.close()


@pytest.fixture(scope="module")
def poppy_provider(world: World) -> Iterator[Provider]:
    # One Brand, `shop`, with Poppy: what the ASGI and WSGI Poppy helpers name.
    provider = Provider(
        base_url="https://provider.example",
        verifier=world.verifier,
        store=open_store("memory://"),
        brands=[
            Brand(
                id="shop",
                name="Shop",
                handler=lambda turn: "hi",
                poppy=PoppyConfig(domain="shop.example", agents="any"),
            )
        ],
    )
    yield provider
    provider.close()


#: Each adapter's `parafe_action`, given the action (the WSGI one takes its agent too).
PARAFE_DECORATORS: dict[str, Callable[[ParafeAgent], Callable[..., Callable[..., object]]]] = {
    "asgi": lambda agent: asgi.parafe_action,  # the agent from app.state at the request
    "wsgi": lambda agent: lambda action: wsgi.parafe_action(action, agent),
    "flask": lambda agent: flask_adapter.parafe_action,
    "django": lambda agent: django_decorators.parafe_action,
}

#: What was given for a name (an action, a scope) that is no non-empty string, as said.
WRONG_NAMES: list[tuple[object, str]] = [
    (b"create_order", "bytes b'create_order'"),
    (["create_order", "refund"], "list ['create_order', 'refund']"),
    (None, "None"),
    ("", "an empty string"),
]
#: Strings no delegation or Session can hold as one scope (RFC 6749 §3.3 scope-token): two
#: scopes in one, a quote. Taken as written, every caller was refused.
NO_SCOPE_TOKENS = ["orders:read orders:write", 'say"hi', "tab\there"]


@pytest.mark.parametrize("name", sorted(PARAFE_DECORATORS))
def test_a_parafe_action_without_its_action_is_refused_where_it_decorates(
    name: str, parafe_agent: ParafeAgent
) -> None:
    # `@parafe_action` for `@parafe_action("create_order")` took the view for the action, and
    # any other action that is no string was a ValueError (a 500) at each request: the
    # consent is checked for a named action only. (WSGI's takes its agent too: there
    # `@parafe_action` alone is Python's TypeError, on the same line.)
    decorator = PARAFE_DECORATORS[name](parafe_agent)
    with pytest.raises(ConfigError) as caught:
        decorator(_view)
    assert str(caught.value) == (
        "parafe_action takes the action to perform: "
        "@parafe_action('create_order'), not @parafe_action; got function"
    )
    for wrong, shown in WRONG_NAMES:
        with pytest.raises(ConfigError) as caught:
            decorator(wrong)
        assert str(caught.value) == (
            "parafe_action takes the action to perform: "
            f"@parafe_action('create_order'), not {shown}"
        ), wrong
    decorator("create_order")(_view)


@pytest.mark.parametrize("name", sorted(PARAFE_DECORATORS))
def test_a_parafe_action_refusal_status_that_is_no_error_status_is_refused_where_it_decorates(
    name: str, parafe_agent: ParafeAgent
) -> None:
    # "403" (a string) was a 500 at the first refused consent, 99 no status at all: as
    # Starlette's `requires(status_code=...)`, said where the view is decorated.
    # Any: what is refused is what the signature's `int` does not let a type checker pass.
    builds: dict[str, Callable[[Any], object]] = {
        "asgi": lambda status: asgi.parafe_action("create_order", refusal_status=status),
        "wsgi": lambda status: wsgi.parafe_action(
            "create_order", parafe_agent, refusal_status=status
        ),
        "flask": lambda status: flask_adapter.parafe_action("create_order", refusal_status=status),
        "django": lambda status: django_decorators.parafe_action(
            "create_order", refusal_status=status
        ),
    }
    for wrong, shown in [
        ("403", "str '403'"),
        (99, "int 99"),
        (600, "int 600"),
        (True, "bool True"),
    ]:
        with pytest.raises(ConfigError) as caught:
            builds[name](wrong)
        assert str(caught.value) == (
            "parafe_action: refusal_status must be an HTTP status, an int from 200 to 599; "
            f"got {shown}"
        ), wrong
    # An A2A agent reads the refusal in the message's Parafé data, under 200 too.
    builds[name](200)
    builds[name](402)


@pytest.mark.parametrize(
    ("name", "call"),
    [
        (
            "asgi",
            "parafe_action(action, agent=...): agent must be a ParafeAgent "
            "(provider.parafe_agent(brand_id)), not Provider",
        ),
        (
            "wsgi",
            "parafe_action(action, agent): agent must be a ParafeAgent "
            "(provider.parafe_agent(brand_id)), not Provider",
        ),
    ],
)
def test_a_parafe_action_given_the_provider_for_its_agent_is_refused_where_it_decorates(
    name: str, call: str, world: World, parafe_agent: ParafeAgent
) -> None:
    # The Provider for `provider.parafe_agent("shop")` was an AttributeError at each request
    # (ASGI: a RuntimeError saying no agent was passed).
    builds: dict[str, Callable[..., Callable[..., object]]] = {
        "asgi": asgi.parafe_action,
        "wsgi": wsgi.parafe_action,
    }
    with pytest.raises(ConfigError) as caught:
        builds[name]("create_order", world.provider)
    assert str(caught.value) == call
    builds[name]("create_order", parafe_agent)(_view)


@pytest.mark.parametrize("name", sorted(SCOPE_DECORATORS))
def test_a_scope_decorator_given_a_scope_that_is_no_name_is_refused_where_it_decorates(
    name: str,
) -> None:
    # A list for `*scopes` was taken for one scope (a TypeError, or never held: every caller
    # refused), an empty scope is held by no delegation: said where the view is decorated.
    decorator, call, example = SCOPE_DECORATORS[name]
    for wrong, shown in WRONG_NAMES:
        with pytest.raises(ConfigError) as caught:
            # Starlette's `requires` takes its scopes as one list (then `status_code`).
            decorator([example, wrong]) if call == "requires" else decorator(example, wrong)
        assert str(caught.value) == (
            f"{call} takes the scopes to require: @{call}({example!r}), not {shown}"
        ), wrong
    for written in NO_SCOPE_TOKENS:
        with pytest.raises(ConfigError) as caught:
            decorator([example, written]) if call == "requires" else decorator(example, written)
        assert str(caught.value) == (
            f"{call} takes the scopes to require, each one scope token (no space, quote or "
            f"backslash; one argument each): @{call}({example!r}), not {written!r}"
        )


#: Each adapter's `poppy_session_required` for the Brand `shop`, given its scopes, and the
#: call as its errors name it.
def _poppy_scope_decorators(
    provider: Provider,
) -> dict[str, tuple[Callable[..., Callable[..., object]], str]]:
    return {
        "asgi": (
            lambda *scopes: asgi.poppy_session_required(provider, "shop", *scopes),
            "poppy_session_required(provider, brand_id, *scopes)",
        ),
        "wsgi": (
            lambda *scopes: wsgi.poppy_session_required(provider, "shop", *scopes),
            "poppy_session_required(provider, brand_id, *scopes)",
        ),
        "flask": (
            lambda *scopes: flask_adapter.poppy_session_required("shop", *scopes),
            "poppy_session_required(brand_id, *scopes)",
        ),
        "django": (
            lambda *scopes: django_decorators.poppy_session_required("shop", *scopes),
            "poppy_session_required(brand_id, *scopes)",
        ),
    }


@pytest.mark.parametrize("name", sorted(_poppy_scope_decorators(None)))  # type: ignore[arg-type]
def test_a_poppy_decorator_given_a_scope_that_is_no_name_is_refused_where_it_decorates(
    name: str, poppy_provider: Provider
) -> None:
    # A list for `*scopes` (or bytes, None) was accepted, then a TypeError at the request or
    # a scope no Session ever approved: every caller refused, and nothing said why.
    decorator, call = _poppy_scope_decorators(poppy_provider)[name]
    for wrong, shown in WRONG_NAMES:
        with pytest.raises(ConfigError) as caught:
            decorator("orders:read", wrong)
        assert str(caught.value) == (
            f"{call}: a scope is one scope token (a non-empty string without space, quote or "
            f"backslash), one argument each; not {shown}"
        ), wrong
    for written in NO_SCOPE_TOKENS:
        with pytest.raises(ConfigError) as caught:
            decorator("orders:read", written)
        assert str(caught.value) == (
            f"{call}: a scope is one scope token (a non-empty string without space, quote or "
            f"backslash), one argument each; not str {written!r}"
        )
    decorator("orders:read", "orders:write")(_view)
    decorator()(_view)


#: Each call that names a Brand, given its id, and the argument and call its errors name.
def _brand_builders(provider: Provider) -> dict[str, tuple[Callable[[Any], object], str]]:
    return {
        "asgi poppy_session_required": (
            lambda brand: asgi.poppy_session_required(provider, brand),
            "poppy_session_required(provider, brand_id, *scopes): brand_id",
        ),
        "asgi poppy_discovery_route": (
            lambda brand: asgi.poppy_discovery_route(provider, brand),
            "poppy_discovery_route(provider, brand_id): brand_id",
        ),
        "fastapi PoppySessionScheme": (
            lambda brand: fastapi.PoppySessionScheme(provider, brand),
            "PoppySessionScheme(provider, brand_id): brand_id",
        ),
        "wsgi poppy_session_required": (
            lambda brand: wsgi.poppy_session_required(provider, brand),
            "poppy_session_required(provider, brand_id, *scopes): brand_id",
        ),
        "wsgi poppy_discovery_app": (
            lambda brand: wsgi.poppy_discovery_app(provider, brand),
            "poppy_discovery_app(provider, brand_id): brand_id",
        ),
        "flask poppy_discovery_view": (
            flask_adapter.poppy_discovery_view,
            "poppy_discovery_view(brand_id): brand_id",
        ),
        "django poppy_discovery_view": (
            django_views.poppy_discovery_view,
            "poppy_discovery_view(brand_id): brand_id",
        ),
        "flask parafe_action": (
            lambda brand: flask_adapter.parafe_action("create_order", brand=brand),
            "parafe_action(action, brand=...): brand",
        ),
        "django parafe_action": (
            lambda brand: django_decorators.parafe_action("create_order", brand=brand),
            "parafe_action(action, brand=...): brand",
        ),
    }


@pytest.mark.parametrize("name", sorted(_brand_builders(None)))  # type: ignore[arg-type]
def test_a_brand_that_is_no_id_is_refused_where_it_is_named(
    name: str, poppy_provider: Provider
) -> None:
    # A list (or the Brand itself) for its id was a TypeError (unhashable) building the ASGI
    # and WSGI helpers, and taken as it was by Flask's and Django's until a request, or
    # `init_app`, failed on it.
    build, named = _brand_builders(poppy_provider)[name]
    brand = poppy_provider.brands["shop"]
    for wrong, shown in ((["shop"], "list ['shop']"), (brand, "Brand"), (None, "None")):
        if wrong is None and "parafe_action" in name:
            continue  # no Brand: the settings' `parafe_brand`, or the one with Parafé
        with pytest.raises(ConfigError) as caught:
            build(wrong)
        assert str(caught.value) == f"{named} must be a Brand's id (a string), not {shown}"
    build("shop")


async def _asgi_app(scope: Scope, receive: Receive, send: Send) -> None:
    return None


def test_the_asgi_provider_app_given_no_app_is_refused_where_it_is_built(world: World) -> None:
    # As the WSGI one: an import string (or settings) for the app behind the Provider was a
    # TypeError at the first request the Provider does not serve.
    with pytest.raises(ConfigError) as caught:
        asgi.A2AProviderApp(world.provider, "app:application")  # type: ignore[arg-type]
    assert str(caught.value) == (
        "A2AProviderApp(provider, app=...): app must be an ASGI application, not str"
    )
    asgi.A2AProviderApp(world.provider, _asgi_app, current_user=lambda connection: None)


#: Each call that takes the app's `current_user`, given it, and the call as its errors name it.
def _current_user_builders(provider: Provider) -> dict[str, Callable[[Any], object]]:
    return {
        "A2AProviderApp(provider, app=...)": lambda user: asgi.A2AProviderApp(
            provider, current_user=user
        ),
        "a2a_routes(provider, current_user=...)": lambda user: asgi.a2a_routes(
            provider, current_user=user
        ),
        "a2a_mount(provider, current_user=...)": lambda user: asgi.a2a_mount(
            provider, current_user=user
        ),
        "wsgi A2AProviderApp(provider, app=...)": lambda user: wsgi.A2AProviderApp(
            provider, current_user=user
        ),
        "Pactmw(app, current_user=...)": lambda user: flask_adapter.Pactmw(current_user=user),
    }


@pytest.mark.parametrize("call", sorted(_current_user_builders(None)))  # type: ignore[arg-type]
def test_a_current_user_that_is_no_function_is_refused_naming_the_call(
    call: str, world: World
) -> None:
    # `current_user=signed_in()` (called, not passed) gave a user for the function: a
    # TypeError ('SignedInUser' object is not callable) on every same-app consent page.
    build = _current_user_builders(world.provider)[call]
    with pytest.raises(ConfigError) as caught:
        build(SignedInUser(account="acct-1", label="Ada"))
    assert str(caught.value) == (
        f"{call.removeprefix('wsgi ')}: current_user must be a function that says who is "
        "signed in, not SignedInUser"
    )
    build(lambda *request: None)


#: Each adapter's `personal_agent_required` (or FastAPI's scheme) given a positional
#: argument meant as `optional`, and what it says. Flask's and Django's first argument is
#: the view they decorate; the others' is the verifier.
_OPTIONAL_BY_POSITION: dict[str, tuple[Callable[..., Any], str]] = {
    "flask": (
        flask_adapter.personal_agent_required,
        "personal_agent_required takes the view it decorates, not {given}: optional= is "
        "keyword-only, @personal_agent_required(optional=True)",
    ),
    "django": (
        django_decorators.personal_agent_required,
        "personal_agent_required takes the view it decorates, not {given}: optional= is "
        "keyword-only, @personal_agent_required(optional=True)",
    ),
    "asgi": (
        asgi.personal_agent_required,
        "personal_agent_required: verifier must be an IdentityVerifier, not {given}: optional= "
        "is keyword-only, @personal_agent_required(verifier, optional=True)",
    ),
    "wsgi": (
        wsgi.personal_agent_required,
        "personal_agent_required: verifier must be an IdentityVerifier, not {given}: optional= "
        "is keyword-only, @personal_agent_required(verifier, optional=True)",
    ),
    "fastapi": (
        fastapi.PersonalAgentScheme,
        "PersonalAgentScheme: verifier must be an IdentityVerifier, not {given}: optional= is "
        "keyword-only, PersonalAgentScheme(verifier, optional=True)",
    ),
}


@pytest.mark.parametrize("name", sorted(_OPTIONAL_BY_POSITION))
@pytest.mark.parametrize(("given", "shown"), [(True, "bool True"), (False, "bool False")])
def test_optional_given_by_position_is_refused_saying_it_is_keyword_only(
    name: str, given: bool, shown: str
) -> None:
    # `@personal_agent_required(True)` took True for the view on Flask and Django: the
    # decorator it returned ran as the view (an error, or silently another view's answer).
    decorator, message = _OPTIONAL_BY_POSITION[name]
    with pytest.raises(ConfigError) as caught:
        decorator(given)
    assert str(caught.value) == message.format(given=shown)


@pytest.mark.parametrize("name", ["flask", "django"])
@pytest.mark.parametrize(("given", "shown"), [("optional", "str 'optional'"), (1, "int 1")])
def test_a_view_decorator_given_no_view_by_position_is_refused(
    name: str, given: object, shown: str
) -> None:
    decorator, message = _OPTIONAL_BY_POSITION[name]
    with pytest.raises(ConfigError) as caught:
        decorator(given)
    assert str(caught.value) == message.format(given=shown)
    # Written right, each way: the view itself, none, and optional by keyword.
    decorator(_view)
    decorator()(_view)
    flask_adapter.personal_agent_required(optional=True)(_view)
    django_decorators.personal_agent_required(optional=True)(_view)


def test_required_scopes_holding_two_scopes_in_one_string_is_said() -> None:
    # DRF's `required_scopes = ["orders:read orders:write"]` required one scope no delegation
    # holds: pactmw.E006 at startup and the 503 where no check runs, as for any other name
    # that is no scope token.
    assert scope_list_problem(["orders:read orders:write"]) == (
        "not one holding str 'orders:read orders:write'"
    )
    assert scope_list_problem(["orders:read", 'say"hi']) == "not one holding str 'say\"hi'"
    assert scope_list_problem(["orders:read", "orders:write"]) is None


def test_once_is_first_for_exactly_one_of_many_threads() -> None:
    # A threaded server's first requests arrive together: a line meant to be said once
    # (a view that refuses every caller) was said by each that saw the flag still unset.
    once = Once()
    start = threading.Barrier(32)
    answers: list[bool] = []

    def ask() -> None:
        start.wait()
        answers.append(once.first())

    threads = [threading.Thread(target=ask) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(answers) == [False] * 31 + [True]
    assert once.first() is False
