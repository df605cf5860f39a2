"""Django REST framework: an authentication class and permission classes for personal agents.

    REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "pactmw.adapters.django.rest_framework.PersonalAgentAuthentication",
            # ... your other classes: credentials that are not personal agents pass to them
        ],
    }

    class OrderList(APIView):
        permission_classes = [HasDelegatedScope]
        required_scopes = ["orders:read"]       # as django-oauth-toolkit's TokenHasScope

After authentication `request.user` is a `PersonalAgentUser` and `request.auth` the verified
`PersonalAgent` (with `.delegation`), as djangorestframework-simplejwt sets the user and the
token. A refused personal agent is DRF's 401 with the PACT challenge in `WWW-Authenticate`
(`authenticate_header`), never a 403; a delegation without a scope the view requires is 403
with `error="insufficient_scope"`. The rules are the guard's (`pactmw.provider.guard`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, NamedTuple

from pactmw.adapters._arguments import scope_list_problem
from pactmw.adapters._common import (
    OnceWarning,
    UnofferedScopesWarning,
    refusal_detail,
    require_framework,
)
from pactmw.adapters._view_checks import delegation_brand_unset

require_framework("rest_framework", __name__, "Django REST framework", "drf")

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import AND, BasePermission, OperandHolder

from pactmw.adapters.django._config import SETTING, configured, settings_guard, takes_delegation
from pactmw.adapters.django._http import neutral_request
from pactmw.core.errors import AuthenticationFailed, InsufficientScope, RequestRefused
from pactmw.core.http import Response
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.guard import refusal_response, require_scopes
from pactmw.store.base import StoreUnavailable

_FAILURE = "_pactmw_refusal"


class PersonalAgentUser:
    """`request.user` for a personal agent: authenticated, never staff, keyed by `actor_id`
    (stable per agent and user), with the verified caller in `.personal_agent`.

    It is not one of the site's users and holds none of Django's permissions: what it may do
    is its delegation's scopes (`HasDelegatedScope`). It answers Django's permission checks
    as `AnonymousUser` does (djangorestframework-simplejwt's `TokenUser` likewise), so DRF's
    `DjangoModelPermissions` or a template's `perms` refuse it rather than fail.
    """

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, personal_agent: PersonalAgent) -> None:
        self.personal_agent = personal_agent
        self.pk = self.id = self.username = personal_agent.actor_id

    def get_username(self) -> str:
        return self.username

    def get_user_permissions(self, obj: object = None) -> set[str]:
        return set()

    def get_group_permissions(self, obj: object = None) -> set[str]:
        return set()

    def get_all_permissions(self, obj: object = None) -> set[str]:
        return set()

    def has_perm(self, perm: str, obj: object = None) -> bool:
        return False

    def has_perms(self, perm_list: Iterable[str], obj: object = None) -> bool:
        return all(self.has_perm(perm, obj) for perm in perm_list)  # no permission asked: True

    def has_module_perms(self, module: str) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PersonalAgentUser) and other.username == self.username

    def __hash__(self) -> int:
        return hash(self.username)

    def __str__(self) -> str:
        return self.username


def _store_unavailable(exc: StoreUnavailable) -> exceptions.APIException:
    """The 503 pactmw's paths answer for a store that cannot be used (a database not migrated
    yet, or down), logged as they log it, in DRF's words: its body, and `Retry-After` through
    the exception's `wait`, which DRF's handler sends."""
    answered = refusal_response(exc)  # logs why, as the Provider's paths do
    unavailable = exceptions.APIException(
        "Service temporarily unavailable, try again later.", code="service_unavailable"
    )
    unavailable.status_code = answered.status
    retry = next((value for name, value in answered.headers if name == "Retry-After"), None)
    unavailable.wait = int(retry) if retry is not None else None
    return unavailable


class PersonalAgentAuthentication(BaseAuthentication):  # type: ignore[misc]
    """Authenticate a request's personal-agent JWT (and delegation), as the middleware does.

    Returns None for a request without `Authorization` or with a credential that is not a
    PACT JWT of a registered agent, so the next authentication class can try it.
    """

    def authenticate(self, request: Any) -> tuple[PersonalAgentUser, PersonalAgent] | None:
        django_request = request._request  # DRF wraps Django's request
        caller = getattr(django_request, "personal_agent", None)
        if not isinstance(caller, PersonalAgent):
            try:
                guard = configured.guard()
            except RequestRefused as exc:
                # A `PACTMW` that does not build (logged once, pactmw.E001 at startup) leaves
                # requests without credentials to the site, as the middleware leaves its other
                # paths; a credential it cannot judge is the 503 of pactmw's paths, not a 500.
                if "HTTP_AUTHORIZATION" not in django_request.META:
                    return None
                unavailable = exceptions.APIException(
                    "pactmw is not configured", code="service_unavailable"
                )
                unavailable.status_code = 503  # DRF's handler answers it
                raise unavailable from exc
            try:
                # Optional: no credential, or another scheme's, is None (DRF tries the next).
                caller = guard.authenticate(neutral_request(django_request), optional=True)
            except StoreUnavailable as exc:  # the agents added at runtime live in the store
                raise _store_unavailable(exc) from exc
            except AuthenticationFailed as exc:
                setattr(django_request, _FAILURE, exc)
                # A delegation sent to a site that verifies none (401 `not_offered`) is
                # refused here, before any permission class runs.
                view = (request.parser_context or {}).get("view")
                _say_delegation_brand_unset(request, view)
                # Its caching headers even where another class, listed first, gives DRF's
                # challenge (or none: then DRF answers 403).
                _refusal_headers(refusal_response(exc), view)
                raise exceptions.AuthenticationFailed(refusal_detail(exc), code=exc.reason) from exc
            if caller is None:
                return None
        return PersonalAgentUser(caller), caller

    def authenticate_header(self, request: Any) -> str:
        """The challenge of DRF's 401: PACT's, with `error="invalid_token"` for delegations."""
        failure = getattr(request._request, _FAILURE, None)
        refusal = refusal_response(failure or AuthenticationFailed("missing_token"))
        # DRF asks for it only to answer 401: that answer gets the refusal's other headers.
        return _refusal_headers(refusal, (request.parser_context or {}).get("view"))


class IsPersonalAgent(BasePermission):  # type: ignore[misc]
    """The request was authenticated as a personal agent."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.auth, PersonalAgent)


class HasDelegatedScope(BasePermission):  # type: ignore[misc]
    """The personal agent carries a delegation with every scope in `view.required_scopes`:
    no delegation is 401 `invalid_token`, a missing scope 403 `insufficient_scope`. A view
    without `required_scopes` is refused (503; pactmw.E008 at startup): one that admits any
    delegation says so, `required_scopes = []`.

    A request that is not a personal agent's is refused as `IsPersonalAgent` refuses it:
    without credentials, DRF's 401 with the bare challenge (RFC 6750 §3.1: no error code
    when the request carried no credentials); another kind of user, DRF's 403."""

    def has_permission(self, request: Any, view: Any) -> bool:
        try:
            allowed = self._has_scopes(request, view)
        except exceptions.APIException:
            _say_delegation_brand_unset(request, view)
            raise
        if not allowed:
            _say_delegation_brand_unset(request, view)
        return allowed

    def _has_scopes(self, request: Any, view: Any) -> bool:
        problem = _required_scopes_problem(view)
        if problem is not None:  # the system check says it at startup (pactmw.E006, E008)
            # Not a 500, and never every delegation let in (nor none, each character of a
            # string taken for a scope): the caller learns that no scope it could hold would
            # do, the log once what to write.
            _say_once(view, f"{problem.message.replace('%', '%%')} (on %s)")(request.path)
            unconfigured = exceptions.APIException(
                "This endpoint's delegated scopes are not configured.", code="service_unavailable"
            )
            unconfigured.status_code = 503  # DRF's handler answers it
            raise unconfigured
        scopes = tuple(view.required_scopes)
        if not isinstance(request.auth, PersonalAgent):
            return False
        caller = request.auth
        try:
            require_scopes(caller, scopes)
        except InsufficientScope as exc:
            _say_unoffered(request, view, scopes)
            denied = exceptions.PermissionDenied(refusal_detail(exc), code="insufficient_scope")
            # DRF's handler sends the challenge; the view, the refusal's other headers.
            denied.auth_header = _refusal_headers(refusal_response(exc), view)
            raise denied from exc
        except AuthenticationFailed as exc:
            _say_unoffered(request, view, scopes)
            # DRF asks the authentication class for the 401's challenge: it reads this.
            setattr(request._request, _FAILURE, exc)
            # DRF's `detail` is for people, worded as the authentication class words its
            # refusals (the reason stays the code).
            raise exceptions.NotAuthenticated(refusal_detail(exc), code=exc.reason) from exc
        return True


def _delegated_scope_check(view: object) -> str | None:
    """`HasDelegatedScope (required_scopes [...])` when a DRF view (its class or an
    instance) needs it: one of its `permission_classes` is `HasDelegatedScope` (or a
    subclass), alone or `&`-ed with others; None otherwise (under `|` or `~` another class
    may let a caller through). The system check (pactmw.E005) and the log say it so."""
    permissions = getattr(view, "permission_classes", None) or ()
    if not any(_needs_delegated_scope(permission) for permission in permissions):
        return None
    scopes = getattr(view, "required_scopes", None)
    if scopes is None:  # pactmw.E008
        return "HasDelegatedScope (no required_scopes)"
    # Any other wrong value (pactmw.E006) is shown as written: a string, a number or a
    # generator is no list to show, and listing a generator would use it up.
    shown = scopes if _required_scopes_problem(view) is not None else list(scopes)
    return f"HasDelegatedScope (required_scopes {shown!r})"


class _ScopesProblem(NamedTuple):
    """What is wrong with a view's `required_scopes`: `message`, and the system check that
    reports it at startup (`check`, its id)."""

    check: str
    message: str


def _required_scopes_problem(view: object) -> _ScopesProblem | None:
    """What is wrong with a DRF view's `required_scopes` (its class or an instance) under
    `HasDelegatedScope`, or None: what the system check says at startup (pactmw.E006,
    pactmw.E008) and a request answers (503), so that both say the same.

    Without `required_scopes` (or with None), pactmw.E008: taken for "no scope", it admitted
    any delegation, where django-oauth-toolkit's `TokenHasScope` raises ImproperlyConfigured;
    a view that means any delegation says so with an empty list, `required_scopes = []` (as
    `@delegation_required()` with no scope, and `TokenHasScope`'s empty list).

    A string (`"orders:read"`, not `["orders:read"]`), pactmw.E006: each of its characters
    would be a scope to require, so every delegation would be refused as missing
    `o r d e r s ...`. Anything else but a collection of non-empty strings (a list, a tuple,
    a set, as `TokenHasScope` takes any), pactmw.E006 too (`scope_list_problem`): a number
    failed at the request, an empty name refused every delegation, a generator would be used
    up by the first request."""
    scopes = getattr(view, "required_scopes", None)
    name = _view_name(view)
    if scopes is None:
        return _ScopesProblem(
            "pactmw.E008",
            f"{name} has no required_scopes, so HasDelegatedScope cannot tell which delegated "
            f"scopes it needs: name them, required_scopes = ['orders:read'], or write "
            f"required_scopes = [] to admit any delegation",
        )
    if isinstance(scopes, str):
        return _ScopesProblem(
            "pactmw.E006",
            f"{name}.required_scopes is the string {scopes!r}, whose every character would be "
            f"a scope HasDelegatedScope requires: write a list, required_scopes = [{scopes!r}]",
        )
    wrong = scope_list_problem(scopes)
    if wrong is not None:
        return _ScopesProblem(
            "pactmw.E006",
            f"{name}.required_scopes must be a list of scope names, such as ['orders:read'], "
            f"{wrong}",
        )
    return None


def _view_name(view: object) -> str:
    return view.__name__ if isinstance(view, type) else type(view).__name__


def _needs_delegated_scope(permission: object) -> bool:
    if isinstance(permission, type):
        return issubclass(permission, HasDelegatedScope)
    if isinstance(permission, OperandHolder) and permission.operator_class is AND:
        return _needs_delegated_scope(permission.op1_class) or _needs_delegated_scope(
            permission.op2_class
        )
    return False


#: The lines said once a DRF view class (`_say_once`), by the class and the line.
_SAID: dict[tuple[type, str], OnceWarning] = {}


def _say_delegation_brand_unset(request: Any, view: object) -> None:
    """Say once at ERROR, as `delegation_required` says it, that `view` refuses every
    caller because `PACTMW` has no `delegation_brand`: where no system check ran (gunicorn,
    uvicorn), the log is the only place that can say why."""
    if view is None or takes_delegation():
        return
    check = _delegated_scope_check(view)
    if check is None:
        return
    _say_once(view, delegation_brand_unset(f"settings.{SETTING}", (), check).message)(request.path)


#: The warnings of a scope the Brand does not offer, once a DRF view class.
_UNOFFERED: dict[type, UnofferedScopesWarning] = {}


def _say_unoffered(request: Any, view: object, scopes: tuple[str, ...]) -> None:
    """Say once at WARNING, as `delegation_required` says it, that `view` refuses every
    caller because the `delegation_brand` does not offer one of its `required_scopes`
    (pactmw.W006 at startup; no check runs under gunicorn or uvicorn)."""
    check = _delegated_scope_check(view)
    if check is None:
        return
    unoffered = _UNOFFERED.setdefault(type(view), UnofferedScopesWarning(check))
    unoffered(settings_guard(), request.path, scopes)


def _say_once(view: object, message: str) -> OnceWarning:
    """The line, at ERROR once a view class, that `message` (a format string of the path)
    says: a permission class is made anew at each request, so it cannot keep it itself."""
    return _SAID.setdefault((type(view), message), OnceWarning(message, level=logging.ERROR))


#: The headers of a refusal (`refusal_response`) that DRF's answer has of its own: the
#: challenge, which DRF's handler sends from the exception, and the length of its body.
_SENT_BY_DRF = frozenset({"www-authenticate", "content-length"})


def _refusal_headers(refusal: Response, view: object) -> str:
    """The challenge of `refusal`, as `refusal_response` renders it for the decorators and
    the middleware, for DRF's handler to send; its other headers (`Cache-Control: no-store`)
    go on DRF's `view`, whose `headers` its `finalize_response` sets on whatever the view
    answers, an exception's response included (DRF's handler sends no other header of an
    exception). A view without them (none, say) gets the challenge alone."""
    headers = getattr(view, "headers", None)
    if isinstance(headers, dict):
        for name, value in refusal.headers:
            if name.lower() not in _SENT_BY_DRF:
                headers[name] = value
    return next(value for name, value in refusal.headers if name == "WWW-Authenticate")


__all__ = [
    "HasDelegatedScope",
    "IsPersonalAgent",
    "PersonalAgentAuthentication",
    "PersonalAgentUser",
]
