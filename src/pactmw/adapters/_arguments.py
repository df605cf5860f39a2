"""The checks of the arguments an adapter's functions, classes and decorators take, each a
`ConfigError` naming the call as the app wrote it, raised where the app, route or decorator
is built rather than as a 500 on the first request: framework-neutral."""

from __future__ import annotations

import reprlib
from collections.abc import Collection, Iterable, Iterator

from pactmw.config import ConfigError
from pactmw.core.encoding import is_scope_token
from pactmw.provider.app import Provider
from pactmw.provider.parafe import ParafeAgent

__all__ = [
    "require_application",
    "require_brand_id",
    "require_current_user",
    "require_parafe_agent",
    "require_provider",
    "require_provider_app",
    "require_refusal_status",
    "require_scope_names",
    "require_strings",
    "require_verifier_not_optional",
    "require_view",
    "scope_list_problem",
]


def require_provider(given: object, call: str) -> None:
    """A `ConfigError` naming `call` (as the app writes it) when `given` is no Provider (its
    settings, or arguments swapped), raised where the app, route or decorator is built rather
    than as an AttributeError on the first request."""
    if not isinstance(given, Provider):
        raise ConfigError(f"{call}: provider must be a Provider, not {type(given).__name__}")


#: The values an error shows as they were given: plain data, short once cut by `reprlib`. Of
#: anything else (a view, a Provider) only the type is said: its repr says nothing useful.
_PLAIN = (type(None), bool, int, float, str, bytes, list, tuple, set, frozenset, dict)


def _shown(value: object) -> str:
    """`value` as an error about a name (an action, a scope, a Brand's id) shows it."""
    if isinstance(value, str) and not value:
        return "an empty string"
    if value is None:
        return "None"
    if isinstance(value, _PLAIN):
        return f"{type(value).__name__} {reprlib.repr(value)}"
    return type(value).__name__


def _is_name(value: object) -> bool:
    """Whether `value` can name an action or a scope: a non-empty string (an empty one names
    nothing, so no consent and no grant could ever hold it)."""
    return isinstance(value, str) and value != ""


def require_refusal_status(
    given: object, call: str, argument: str = "status_code", *, lowest: int = 400
) -> None:
    """A `ConfigError` naming `call` and its `argument` when `given`, the status of a
    refusal, is no int from `lowest` to 599: unchecked, a string ("404") was a 500 at the
    first request refused, and `requires`' 200 an answer no client reads as a refusal.
    `parafe_action` passes `lowest=200`: its refusal is an A2A reply whose message carries
    the Parafé error, which an agent reads under 200 too."""
    if isinstance(given, bool) or not isinstance(given, int) or not lowest <= given <= 599:
        what = "an HTTP error status" if lowest >= 400 else "an HTTP status"
        raise ConfigError(
            f"{call}: {argument} must be {what}, an int from {lowest} to 599; got {_shown(given)}"
        )


def require_application(given: object, call: str, what: str, *, required: bool = False) -> None:
    """A `ConfigError` naming `call` when `given`, the app a Provider app passes other paths
    to (`what`: "an ASGI application"), is given and is none: an import string or settings
    there failed at the first request the Provider does not serve. With `required` (the app
    a middleware wraps), None is refused too: it failed every request the middleware let
    through."""
    if (given is not None or required) and not callable(given):
        raise ConfigError(f"{call}: app must be {what}, not {type(given).__name__}")


def require_current_user(given: object, call: str) -> None:
    """A `ConfigError` naming `call` when `current_user` is given and is no function:
    `current_user=signed_in()` (called, not passed) gives a user, which fails on every
    same-app consent page."""
    if given is not None and not callable(given):
        raise ConfigError(
            f"{call}: current_user must be a function that says who is signed in, "
            f"not {type(given).__name__}"
        )


def require_provider_app(
    provider: object, app: object, current_user: object, application: str
) -> None:
    """The checks of `A2AProviderApp(provider, app=..., current_user=...)`, ASGI's and
    WSGI's alike (`application`: what `app` must be, "an ASGI application")."""
    written = "A2AProviderApp(provider, app=...)"
    require_provider(provider, written)
    require_application(app, written, application)
    require_current_user(current_user, written)


def require_strings(
    given: Iterable[object], call: str, what: str, example: str, *, scopes: bool = False
) -> None:
    """A `ConfigError` when one of `given` (the arguments of the decorator `call`: its
    scopes, its action, its Brand's id) is no non-empty string. Something other than plain
    data (a view, a Provider) means the decorator was written without its parentheses
    (`@call`, not `@call(...)`) or with another adapter's arguments: it would take the view
    for its argument and fail on every request (a 500). Plain data that is no name (a list
    for `*scopes`, bytes, None, "") would fail at the request or never be held. Either is
    said where the view is decorated. `what` says what `call` takes; `example`, one written
    right. With `scopes`, each must also be a scope token (`is_scope_token`): one with a
    space ("orders:read orders:write", two scopes in one) is held by no delegation."""
    for value in given:
        if _is_name(value) and (not scopes or is_scope_token(value)):
            continue
        if isinstance(value, str) and value:
            raise ConfigError(
                f"{call} takes {what}, each one scope token (no space, quote or backslash; "
                f"one argument each): @{call}({example!r}), not {value!r}"
            )
        if isinstance(value, _PLAIN):
            raise ConfigError(f"{call} takes {what}: @{call}({example!r}), not {_shown(value)}")
        raise ConfigError(
            f"{call} takes {what}: @{call}({example!r}), not @{call}; got {_shown(value)}"
        )


def require_view(given: object, call: str) -> None:
    """A `ConfigError` naming `call` when its positional argument, the view it decorates
    (Flask's and Django's `personal_agent_required`), is given and is no callable:
    `@personal_agent_required(True)`, meant as `optional=True`, took True for the view, and
    the decorator it returned then ran as the view (an error, or another view's answer)."""
    if given is not None and not callable(given):
        raise ConfigError(
            f"{call} takes the view it decorates, not {_shown(given)}: optional= is "
            f"keyword-only, @{call}(optional=True)"
        )


def require_verifier_not_optional(given: object, call: str, written: str) -> None:
    """A `ConfigError` naming `call` when its verifier, its first argument, is a bool:
    `optional` given by position (`written`, the call written right, says where it goes).
    Anything else that is no verifier is `make_guard`'s to say."""
    if isinstance(given, bool):
        raise ConfigError(
            f"{call}: verifier must be an IdentityVerifier, not {_shown(given)}: optional= is "
            f"keyword-only, {written}"
        )


def require_scope_names(scopes: Iterable[object], call: str) -> None:
    """A `ConfigError` naming `call` (as its signature reads, `poppy_session_required(provider,
    brand_id, *scopes)`) when one of `scopes`, after its other arguments, is no scope token
    (`is_scope_token`): a list for `*scopes`, bytes or None failed at the request, and a scope
    no Session can approve ("", two scopes in one string) refused every caller."""
    for scope in scopes:
        if not is_scope_token(scope):
            raise ConfigError(
                f"{call}: a scope is one scope token (a non-empty string without space, quote "
                f"or backslash), one argument each; not {_shown(scope)}"
            )


def scope_list_problem(given: object) -> str | None:
    """What is wrong with `given`, written as the scopes to require (a DRF view's
    `required_scopes`): "not int 3", "not one holding an empty string"; None when it is a
    collection (a list, a tuple, a set: django-oauth-toolkit's `TokenHasScope` takes any) of
    non-empty strings. A scope no delegation can hold (an empty string), or no scope's name
    (a number), refused every delegation or failed at the request; an iterator (a generator)
    would be used up by the first request, after which no scope would be required. A string
    is the caller's to say (each of its characters would be a scope)."""
    if isinstance(given, (str, bytes, bytearray)) or not isinstance(given, Collection):
        if isinstance(given, Iterator):
            return f"not {_shown(given)}, which the first request would use up"
        return f"not {_shown(given)}"
    for scope in given:
        if not is_scope_token(scope):  # "orders:read orders:write": two in one, never held
            return f"not one holding {_shown(scope)}"
    return None


def require_brand_id(given: object, call: str, argument: str = "brand_id") -> None:
    """A `ConfigError` naming `call` and its `argument` when `given` is no string: a Brand's
    id, never the Brand (or a list of ids), which failed where the Brand is looked up (an
    unhashable TypeError) or only at the request. An unknown id is the Brand check's to say
    (`check_session_brand`, where the Provider is known)."""
    if not isinstance(given, str):
        raise ConfigError(
            f"{call}: {argument} must be a Brand's id (a string), not {_shown(given)}"
        )


def require_parafe_agent(given: object, call: str) -> None:
    """A `ConfigError` naming `call` when `given` is no `ParafeAgent` (the Provider, its
    settings): the consent check would fail with an AttributeError at each request."""
    if not isinstance(given, ParafeAgent):
        raise ConfigError(
            f"{call}: agent must be a ParafeAgent (provider.parafe_agent(brand_id)), "
            f"not {type(given).__name__}"
        )
