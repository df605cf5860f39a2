"""Flask adapter: the `Pactmw` extension, a `current_personal_agent()` accessor, a decorator.

    app.config["PACTMW"] = {"audience": "...", "agents": [...]}
    pactmw = Pactmw(app)          # or Pactmw() then pactmw.init_app(app) in a factory

Requests under `protect_prefix` (default `/a2a/`) must carry a valid personal-agent JWT;
`current_personal_agent()` returns the verified caller (or None) inside a request.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from flask import Flask, current_app, g, request
from werkzeug.wrappers import Response as WerkzeugResponse

from pactmw.adapters.wsgi import to_werkzeug
from pactmw.config import Settings, in_protected_path
from pactmw.core.errors import AuthenticationFailed
from pactmw.core.http import challenge
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent

EXTENSION_KEY = "pactmw"
_G_KEY = "_pactmw_personal_agent"
#: Keys of the PACTMW dict that belong to other parts of pactmw (the Provider).
EXTRA_KEYS: frozenset[str] = frozenset()


class _State:
    def __init__(self, settings: Settings, verifier: IdentityVerifier) -> None:
        self.settings = settings
        self.verifier = verifier


class Pactmw:
    """The Flask extension. `verifier` may be given to share one across apps or in tests."""

    def __init__(self, app: Flask | None = None, *, verifier: IdentityVerifier | None = None):
        self._verifier = verifier
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        settings = Settings.from_mapping(app.config.get("PACTMW", {}), extra_keys=EXTRA_KEYS)
        verifier = self._verifier or settings.build_verifier()
        app.extensions[EXTENSION_KEY] = _State(settings, verifier)
        app.before_request(_guard_prefix)


def _state() -> _State:
    state = current_app.extensions.get(EXTENSION_KEY)
    if not isinstance(state, _State):
        raise RuntimeError("pactmw is not initialised on this app: call Pactmw(app)")
    return state


def _verify() -> PersonalAgent:
    found = g.get(_G_KEY)
    if isinstance(found, PersonalAgent):
        return found
    authorization = request.headers.getlist("Authorization")
    personal_agent = _state().verifier.verify(authorization[0] if len(authorization) == 1 else None)
    setattr(g, _G_KEY, personal_agent)
    return personal_agent


def _guard_prefix() -> WerkzeugResponse | None:
    if not in_protected_path(request.path, _state().settings.protect_prefix):
        return None
    try:
        _verify()
    except AuthenticationFailed as exc:
        return to_werkzeug(challenge(exc))
    return None


def current_personal_agent() -> PersonalAgent | None:
    """The verified caller of the current request, or None."""
    found = g.get(_G_KEY)
    return found if isinstance(found, PersonalAgent) else None


def personal_agent_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a Flask view so it needs a verified personal agent (401 challenge otherwise)."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            _verify()
        except AuthenticationFailed as exc:
            return to_werkzeug(challenge(exc))
        return current_app.ensure_sync(view)(*args, **kwargs)

    return wrapper


def get_verifier() -> IdentityVerifier:
    """The verifier of the current app (for custom views)."""
    return _state().verifier
