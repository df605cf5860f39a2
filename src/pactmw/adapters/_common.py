"""What every adapter does the same way, framework-neutral (no framework is imported here)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from importlib.util import find_spec
from typing import ClassVar, Generic, TypeVar

from pactmw.adapters._arguments import require_application
from pactmw.config import ConfigError, guarded_prefix, require_verifier
from pactmw.core.encoding import is_ascii_digits, loggable
from pactmw.core.errors import AuthenticationFailed, InsufficientScope, MissingExtra, RequestRefused
from pactmw.core.http import Response
from pactmw.protocols.delegation import DelegationRejected
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.provider.app import Provider
from pactmw.provider.brand import Brand
from pactmw.provider.errors import error_response
from pactmw.provider.guard import (
    Guard,
    GuardRefusal,
    check_delegation_brand,
    refusal_response,
    require_scopes,
)
from pactmw.provider.routes import MOUNT
from pactmw.store.base import StoreUnavailable

__all__ = [
    "CHECKER_KEY",
    "NOT_FOUND",
    "REFUSED_PUBLIC_ROUTE",
    "UNVERIFIED_DELEGATION",
    "GuardedMiddleware",
    "Once",
    "OnceWarning",
    "ReadersWarnings",
    "UnofferedScopesWarning",
    "bounded_body",
    "checker_of",
    "declared_length",
    "instance_or_none",
    "make_guard",
    "provider_of",
    "record_checker",
    "refusal_detail",
    "refusal_reason",
    "require_framework",
    "scope_refusal",
    "scopes_not_offered",
    "scopes_without_delegation",
    "takes_no_delegation",
    "whole_body",
]

_T = TypeVar("_T")
_App = TypeVar("_App")

logger = logging.getLogger("pactmw.adapters")

#: What the ASGI and the WSGI `delegation_required` say on a request nothing verified (`%s`:
#: the path). They read the caller a middleware or `personal_agent_required` left; Flask's
#: and Django's verify it themselves, from the app's settings, which these have not.
UNVERIFIED_DELEGATION = (
    "delegation_required() on %s found no verified caller: it reads what "
    "PersonalAgentMiddleware verified under its prefix; elsewhere put "
    "personal_agent_required(verifier, delegation_provider=..., delegation_brand=...) above it"
)

#: Where an adapter records, beside the caller it verified (in the ASGI scope or the WSGI
#: environ), the guard that verified it: a check that asks for scopes, which only reads the
#: caller, reads it to say why every caller is refused (a guard that takes no delegation,
#: `scopes_without_delegation`; a scope its Brand does not offer, `UnofferedScopesWarning`).
CHECKER_KEY = "pactmw.checker"

#: What a check asking for delegated scopes says once when the caller was verified by a
#: guard that takes no delegation (`{what}`: the check as the app wrote it; `{checker}`: what
#: verified the caller; `%s`: the path).
_SCOPES_WITHOUT_DELEGATION = (
    "{what} on %s refuses every caller: {checker} takes no delegation; give it "
    "delegation_provider=... and delegation_brand=..."
)

#: What verified a caller, as `scopes_without_delegation` names it by default.
_ANY_CHECKER = (
    "the check that verified it (PersonalAgentMiddleware, PersonalAgentBackend or "
    "personal_agent_required)"
)

#: What a middleware that refused one of a Provider's public routes says once
#: (`Guard.guards_a_providers_public_route`).
REFUSED_PUBLIC_ROUTE = (
    "PersonalAgentMiddleware refused %s, a Provider's public route (an Agent Card, an "
    "authorization server's metadata or JWKS, a consent page): when the app behind it serves "
    "the Provider (a2a_routes, A2AProviderApp), give the middleware serves_provider=provider"
)

#: The answer to a path nothing serves, the same bare 404 on every adapter.
NOT_FOUND = error_response(RequestRefused(404))


def provider_of(guard: Guard, setting: str) -> Provider:
    """The Provider `guard` serves; a RuntimeError naming `setting` (where the adapter reads
    pactmw's settings) when it lists no brands. Every adapter's `get_provider()`, and so
    every management command, says it in these words."""
    if guard.provider is None:
        raise RuntimeError(
            f"{setting} lists no brands: there is no Provider, and no store of agents, grants "
            "or conversations (add brands)"
        )
    return guard.provider


def require_framework(package: str, adapter: str, framework: str, extra: str) -> None:
    """Raise `MissingExtra` naming `extra` when `package` (the framework `adapter` is written
    for) is not installed. An adapter calls it before its first import of the framework, so
    a missing framework is named with the extra that installs it instead of surfacing as a
    bare ModuleNotFoundError."""
    if find_spec(package) is None:
        raise MissingExtra(adapter, framework, extra)


def declared_length(value: str | None) -> int | None:
    """The body length a request declares in `Content-Length` (None: none declared).

    Raises `RequestRefused(400)` for a value that is not ASCII digits (`+5`, `0x10`, `١٥`, a
    list): such framing is invalid (RFC 9112 §6.3), uvicorn refuses it itself, and the WSGI
    servers pass it on to frameworks that read it each their own way (Django's
    `request.body` raises ValueError, a 500; Werkzeug reads no body). Every body reader of a
    WSGI adapter asks here first, so each refuses it alike.
    """
    if not value:
        return None
    if not is_ascii_digits(value):
        raise RequestRefused(400)
    return int(value)


def whole_body(body: bytes, declared: int | None) -> bytes:
    """`body` when it is as long as its `declared` length (or none was declared).

    Raises `RequestRefused(400)` when the upload ended before it (the client closed its side
    early): Werkzeug raises its own ClientDisconnected then and Django returns the bytes that
    came, so the body readers of the WSGI adapters check here, as the ASGI reader refuses a
    disconnect with 400.
    """
    if declared is not None and len(body) < declared:
        raise RequestRefused(400)
    return body


def bounded_body(
    content_length: str | None, limit: int, read: Callable[[int], bytes]
) -> bytes | None:
    """The request body, or None when it is longer than `limit`, declared or not: a declared
    length over it is refused before anything is read, and `read(n)` (at most `n` bytes of
    the body, the framework's blocking read) stops one byte past it, so a chunked body is
    never read further. Raises `RequestRefused(400)` for a `Content-Length` that is not
    digits (`declared_length`) or a body that ended before it (`whole_body`): the rules of
    every blocking body reader (WSGI, Flask, Django), which only say how to read."""
    declared = declared_length(content_length)
    if declared is not None and declared > limit:
        return None
    body = read(limit + 1)
    if len(body) > limit:
        return None
    return whole_body(body, declared)


def instance_or_none(found: object, kind: type[_T]) -> _T | None:
    """`found` when it is a `kind`, else None: how an adapter reads back what a middleware or
    decorator left on the request (an ASGI scope, a WSGI environ, Flask's `g`), where anything
    else may sit under the same key."""
    return found if isinstance(found, kind) else None


def scope_refusal(caller: PersonalAgent | None, scopes: Iterable[str]) -> Response | None:
    """The answer to a caller without a delegation holding `scopes` (`require_scopes`: no
    delegation is 401 `invalid_token`, a missing scope 403 `insufficient_scope`), or None
    when it holds them: what an adapter that answers with responses (not exceptions) sends."""
    try:
        require_scopes(caller, scopes)
    except (AuthenticationFailed, InsufficientScope) as exc:
        return refusal_response(exc)
    return None


def refusal_detail(exc: AuthenticationFailed | InsufficientScope) -> str:
    """A sentence saying why a caller was refused, for an adapter whose refusals carry a
    body for people (DRF's `detail`; PACT's own 401 and 403 have none): the reason code in
    parentheses, never the refusal's own detail, which may hold what a key fetch or a JOSE
    parser said (the log has it)."""
    if isinstance(exc, InsufficientScope):
        needed = "a scope" if len(exc.missing) == 1 else "scopes"
        return f"The delegation lacks {needed} this endpoint needs: {' '.join(exc.missing)}."
    if isinstance(exc, DelegationRejected):
        if exc.reason == "required":
            return "This endpoint needs a delegation token (X-A2A-User-Delegation)."
        return f"The delegation token was refused ({exc.reason})."
    return f"The personal agent's token was refused ({exc.reason})."


def refusal_reason(exc: GuardRefusal) -> str:
    """The code an adapter's exception for a guard refusal carries (Starlette's
    `AuthenticationError` text, FastAPI's `reason`): the refusal's own (`expired`,
    `insufficient_scope`, ...), or `temporarily_unavailable` for a store that could not be
    used, whose message (naming the database) stays in the log."""
    return "temporarily_unavailable" if isinstance(exc, StoreUnavailable) else exc.reason


class Once:
    """True the first time it is asked, False ever after, whatever the threads: a threaded
    server's concurrent first requests would each see a plain flag unset, and each log the
    line meant to be said once. `next` on an `itertools.count` is atomic under the GIL."""

    def __init__(self) -> None:
        self._asked = itertools.count()

    def first(self) -> bool:
        """Whether this is the first call."""
        return next(self._asked) == 0


class OnceWarning:
    """A WARNING (or another `level`) on `pactmw.adapters`, said once per decorated
    endpoint: a decorator that reads what a middleware verified, on a request that nothing
    verified, refuses every caller (a valid one too), and the log is the only place that can
    say why. `message` takes the path (what the caller wrote, so escaped and cut short)."""

    def __init__(self, message: str, *, level: int = logging.WARNING) -> None:
        self.message = message
        self.level = level
        self._once = Once()

    def __call__(self, path: str) -> None:
        if self._once.first():
            logger.log(self.level, self.message, loggable(path))


def scopes_without_delegation(what: str, checker: str = _ANY_CHECKER) -> OnceWarning:
    """The warning of a check (`what`, as the app wrote it) that asks for delegated scopes
    of a caller `checker` verified without taking delegations: it refuses every caller."""
    return OnceWarning(_SCOPES_WITHOUT_DELEGATION.format(what=what, checker=checker))


def _offered(brands: Iterable[Brand], brand_id: str) -> tuple[str, ...]:
    """The scopes Brand `brand_id` of `brands` offers (none, where it is none of them)."""
    brand = next((found for found in brands if found.id == brand_id), None)
    delegation = brand.delegation if brand is not None else None
    return tuple(delegation.scopes) if delegation is not None else ()


def scopes_not_offered(
    brands: Iterable[Brand], brand_id: str | None, scopes: Iterable[str]
) -> str | None:
    """Why a check asking for `scopes` of a caller whose delegations are Brand `brand_id`'s
    (one of `brands`) refuses every caller: `Brand 'acme' does not offer 'order:read' (it
    offers: orders:read, orders:cancel)`, in the words `grant_delegation` uses; None when the
    Brand offers them all, or when no delegation is taken (`brand_id` None:
    `scopes_without_delegation` says that). No person can grant a scope the Brand does not
    offer (a misspelt one), so no delegation holds it. The checks at startup (Django's
    pactmw.W006, Flask's `init_app`) and at the first request (`UnofferedScopesWarning`)
    say it alike."""
    if brand_id is None:
        return None
    offered = _offered(brands, brand_id)
    unoffered = [scope for scope in scopes if scope not in offered]
    if not unoffered:
        return None
    return (
        f"Brand {brand_id!r} does not offer {', '.join(repr(scope) for scope in unoffered)} "
        f"(it offers: {', '.join(offered)})"
    )


class UnofferedScopesWarning:
    """The WARNING of a check (`what`, as the app wrote it) that asks for a delegated scope
    the Brand whose delegations the guard takes does not offer (`scopes_not_offered`): no
    person can grant it, so the check refuses every caller, and the log is the only place
    that can say why. Said once per Brand and list of scopes asked, as the list comes from
    the app's code while the path, which the message names, may come from the caller.

    The guard is given at each call, not here: the ASGI and WSGI `delegation_required` only
    read the caller, and learn which guard verified it from what that guard recorded beside
    it (`checker_of`); none (nothing verified it) says nothing here. `one_character_hint` is
    added when every scope not offered is one character (FastAPI's `scopes="orders:read"`,
    which it reads one character a scope), since those would look like nothing the app
    wrote."""

    def __init__(self, what: str, *, one_character_hint: str | None = None) -> None:
        self.what = what
        self.one_character_hint = one_character_hint
        self._said: dict[tuple[str | None, tuple[str, ...]], Once] = {}

    def __call__(self, guard: Guard | None, path: str, scopes: Iterable[str]) -> None:
        if guard is None or guard.provider is None or guard.delegation_brand is None:
            return
        asked = tuple(scopes)
        key = (guard.delegation_brand, asked)
        # Each list is judged once (a request costs a lookup); setdefault is atomic under the
        # GIL, so concurrent first requests share one Once.
        once = self._said.get(key)
        if once is None:
            once = self._said.setdefault(key, Once())
        if not once.first():
            return
        brands = guard.provider.brands.values()
        problem = scopes_not_offered(brands, guard.delegation_brand, asked)
        if problem is None:
            return
        offered = _offered(brands, guard.delegation_brand)
        hint = ""
        if (
            self.one_character_hint is not None
            and len(asked) > 1
            and all(len(scope) == 1 for scope in asked if scope not in offered)
        ):
            hint = f"; {self.one_character_hint}"
        logger.warning(
            "%s on %s refuses every caller: %s%s", self.what, loggable(path), problem, hint
        )


def record_checker(recorded: MutableMapping[str, object], guard: Guard) -> None:
    """Record beside the verified caller (`recorded`: the ASGI scope, the WSGI environ)
    the guard that verified it."""
    recorded[CHECKER_KEY] = guard


def checker_of(recorded: Mapping[str, object]) -> Guard | None:
    """The guard that verified the caller of this request (`record_checker`), or None."""
    return instance_or_none(recorded.get(CHECKER_KEY), Guard)


def takes_no_delegation(recorded: Mapping[str, object]) -> bool:
    """Whether the caller of this request was verified by a guard that takes no delegation
    (`record_checker`), so that no scope asked of it can ever be held."""
    checker = checker_of(recorded)
    return checker is not None and not checker.takes_delegation


class ReadersWarnings:
    """What a check that only reads the caller another check verified (the ASGI and WSGI
    `delegation_required`, Starlette's `requires`) says once when it must refuse every
    caller: nothing verified the request (`unverified`), the guard that did takes no
    delegation (`scopes_without_delegation(no_delegation)`), or its Brand does not offer a
    scope asked (`UnofferedScopesWarning(unoffered)`). One order of judging for all three."""

    def __init__(self, unverified: str, no_delegation: str, unoffered: str) -> None:
        self._unverified = OnceWarning(unverified)
        self._no_delegation = scopes_without_delegation(no_delegation)
        self._unoffered = UnofferedScopesWarning(unoffered)

    def __call__(
        self,
        recorded: Mapping[str, object],
        verified: bool,
        path: str,
        scopes: Sequence[str],
        *,
        delegated: bool = True,
    ) -> None:
        """Judge one request: `recorded` is where its checker was recorded (the ASGI scope,
        the WSGI environ), `verified` whether anything checked it, `scopes` the delegated
        scopes asked, `delegated` whether the check needs a delegation at all."""
        if not verified:
            self._unverified(path)
        elif delegated and takes_no_delegation(recorded):
            self._no_delegation(path)
        elif scopes:
            self._unoffered(checker_of(recorded), path, scopes)


def make_guard(
    verifier: IdentityVerifier,
    delegation_provider: Provider | None,
    delegation_brand: str | None,
    path_prefix: str | None = None,
    serves_provider: Provider | None = None,
) -> Guard:
    """The guard behind an adapter's middleware (`path_prefix`: the paths it protects, minus
    the routes of the Provider the app `serves_provider`) or decorators (None), from the
    arguments every adapter takes under the same names, checked here so that a wrong one is
    an error where the adapter is built, naming the argument, never a 500 on the first
    request that needs it."""
    require_verifier(verifier)
    for name, given in (
        ("delegation_provider", delegation_provider),
        ("serves_provider", serves_provider),
    ):
        if given is not None and not isinstance(given, Provider):
            raise ConfigError(f"{name} must be a Provider, not {type(given).__name__}")
    if (delegation_provider is None) != (delegation_brand is None):
        raise ConfigError("delegation_provider and delegation_brand go together: give both")
    if delegation_provider is not None and delegation_brand is not None:
        check_delegation_brand(delegation_provider.brands, delegation_brand)
    if None not in (delegation_provider, serves_provider) and (
        delegation_provider is not serves_provider
    ):
        # The guard knows one Provider: the one whose grants it checks is the one it serves.
        raise ConfigError("delegation_provider and serves_provider must be the same Provider")
    return Guard(
        verifier,
        provider=delegation_provider or serves_provider,
        delegation_brand=delegation_brand,
        protect_prefix=path_prefix,
        serves_provider=serves_provider is not None,
    )


class GuardedMiddleware(Generic[_App]):
    """What the ASGI and the WSGI `PersonalAgentMiddleware` are made of: the application
    they wrap (`app`) and the guard of the requests under `path_prefix` (a path starting with
    "/", "/" for all; None: none, use the decorators; anything else is a `ConfigError`).
    With `delegation_provider` and `delegation_brand`, an `X-A2A-User-Delegation` token for
    that Brand is verified too; one sent without them is refused. With `serves_provider`, the
    Provider the wrapped app serves (`a2a_routes`), its paths are left to it: they
    authenticate themselves, and its Agent Card and consent pages are public. Each middleware
    only adds its framework's `__call__` and says what `app` is (`application`)."""

    #: What `app` must be ("a WSGI application"), in the `ConfigError` that refuses another
    #: thing there (an import string, None) where the middleware is built.
    application: ClassVar[str] = "an application"

    def __init__(
        self,
        app: _App,
        verifier: IdentityVerifier,
        *,
        path_prefix: str | None = MOUNT,
        delegation_provider: Provider | None = None,
        delegation_brand: str | None = None,
        serves_provider: Provider | None = None,
    ) -> None:
        require_application(
            app, "PersonalAgentMiddleware(app, verifier)", self.application, required=True
        )
        self.app = app
        prefix = guarded_prefix(path_prefix, "path_prefix", empty_is_none=False)
        self.guard = make_guard(
            verifier, delegation_provider, delegation_brand, prefix, serves_provider
        )
        self._refused_public_route = OnceWarning(REFUSED_PUBLIC_ROUTE)

    def refused(self, method: str, path: str) -> None:
        """Called when the middleware refused `method` on `path`: one of a Provider's public
        routes refused (a Brand's Agent Card above all) is the usual mistake (the Provider
        inside the app, the middleware not told with `serves_provider`), said once in the
        log."""
        if self.guard.guards_a_providers_public_route(method, path):
            self._refused_public_route(path)
