from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.urls import URLPattern, URLResolver, include, path
from rest_framework.routers import DefaultRouter

from pactmw.adapters.django import a2a_urlpatterns, poppy_discovery_view

from . import contract_views as views
from . import drf_views


def _pactmw() -> dict[str, Any]:
    config: Any = getattr(settings, "PACTMW", None)
    return config if isinstance(config, dict) else {}


def _poppy_apis() -> list[URLPattern]:
    """The Brand shop's APIs behind `poppy_session_required("shop")` and its own-site
    discovery view, routed when shop has Poppy (most of the suite's settings have no such
    Brand, and `manage.py check` rightly reports a routed one, pactmw.E004), or when
    `PACTMW_TEST_POPPY_APIS` is set: the tests of that check, and of the views under a
    server that runs no check."""
    brands: Any = _pactmw().get("brands")
    shop = brands.get("shop") if isinstance(brands, dict) else None
    if not os.environ.get("PACTMW_TEST_POPPY_APIS") and not (
        isinstance(shop, dict) and "poppy" in shop
    ):
        return []
    return [
        path("api/poppy-orders", views.poppy_orders),
        path("api/poppy-orders-async", views.poppy_orders_async),
        path("brand-site/poppy.json", poppy_discovery_view("shop")),
    ]


def _scoped() -> list[URLPattern | URLResolver]:
    """The views behind `delegation_required` (a function's, a class-based view's method's
    or `dispatch`'s) or DRF's `HasDelegatedScope`, routed when `PACTMW` names its
    `delegation_brand` (without one `manage.py check` rightly reports them, pactmw.E005), or
    when `PACTMW_TEST_DELEGATION_VIEWS` is set: the tests of that check, and of the views
    under a server that runs no check."""
    if not os.environ.get("PACTMW_TEST_DELEGATION_VIEWS") and not _pactmw().get("delegation_brand"):
        return []
    return [
        path("api/scoped-sync", views.scoped_sync),
        path("api/scoped-async", views.scoped_async),
        path("api/scoped-method", views.ScopedMethod.as_view()),
        path("api/scoped-dispatch", views.ScopedDispatch.as_view()),
        path("drf/orders", drf_views.Orders.as_view()),
        # A ViewSet as DRF's docs route one: the router routes it twice (`tickets/` and
        # with a format suffix), and the check names it once.
        path("drf/", include(_router().urls)),
    ]


def _parafe() -> list[URLPattern]:
    """The views behind `parafe_action`, routed when a Brand configures Parafé (without one
    `manage.py check` rightly warns of them, pactmw.W007), or when `PACTMW_TEST_PARAFE_VIEWS`
    is set: the tests of that check, and of the views under a server that runs no check.
    `PACTMW_TEST_PARAFE_SHOP` also routes those naming the Brand "shop", which the suite's
    settings do not have (pactmw.E007)."""
    brands: Any = _pactmw().get("brands")
    with_parafe = isinstance(brands, dict) and any(
        isinstance(table, dict) and "parafe" in table for table in brands.values()
    )
    if not os.environ.get("PACTMW_TEST_PARAFE_VIEWS") and not with_parafe:
        return []
    routes = [
        path("parafe-sync", views.parafe_sync),
        path("parafe-async", views.parafe_async),
    ]
    if os.environ.get("PACTMW_TEST_PARAFE_SHOP"):
        routes += [
            path("parafe-shop", views.parafe_shop),
            path("parafe-method", views.ParafeMethod.as_view()),
        ]
    return routes


def _router() -> DefaultRouter:
    router = DefaultRouter()
    router.register("tickets", drf_views.Tickets, basename="tickets")
    return router


def _string_scopes() -> list[URLPattern]:
    """A DRF view whose `required_scopes` is a string, routed when `PACTMW_TEST_STRING_SCOPES`
    is set (`manage.py check` rightly reports it, pactmw.E006)."""
    if not os.environ.get("PACTMW_TEST_STRING_SCOPES"):
        return []
    return [path("drf/string-scopes", drf_views.StringScopes.as_view())]


def _bad_scopes() -> list[URLPattern]:
    """DRF views whose `required_scopes` is no list of scope names, and one whose is a set,
    routed when `PACTMW_TEST_BAD_SCOPES` is set (`manage.py check` rightly reports all but
    the set, pactmw.E006)."""
    if not os.environ.get("PACTMW_TEST_BAD_SCOPES"):
        return []
    return [
        path("drf/int-scopes", drf_views.IntScopes.as_view()),
        path("drf/blank-scope", drf_views.BlankScope.as_view()),
        path("drf/number-scope", drf_views.NumberScope.as_view()),
        path("drf/generator-scopes", drf_views.GeneratorScopes.as_view()),
        path("drf/set-scopes", drf_views.SetScopes.as_view()),
    ]


def _unoffered_scopes() -> list[URLPattern]:
    """Views asking for a scope the Brand `acme` does not offer, routed when
    `PACTMW_TEST_UNOFFERED_SCOPES` is set (`manage.py check` rightly warns of them,
    pactmw.W006)."""
    if not os.environ.get("PACTMW_TEST_UNOFFERED_SCOPES"):
        return []
    return [
        path("api/unoffered", views.unoffered_sync),
        path("api/unoffered-method", views.UnofferedMethod.as_view()),
        path("drf/unoffered", drf_views.UnofferedOrders.as_view()),
    ]


def _missing_scopes() -> list[URLPattern]:
    """A DRF view without `required_scopes` and one with an empty list, routed when
    `PACTMW_TEST_MISSING_SCOPES` is set (`manage.py check` rightly reports the first,
    pactmw.E008)."""
    if not os.environ.get("PACTMW_TEST_MISSING_SCOPES"):
        return []
    return [
        path("drf/no-scopes", drf_views.NoScopes.as_view()),
        path("drf/any-delegation", drf_views.AnyDelegation.as_view()),
    ]


urlpatterns = [
    path("api/echo", views.echo),
    path("public", views.public),
    # The site's login page (a stand-in): the Brands' `delegation.login_url` is "/login", or
    # Django's `LOGIN_URL` "login" (its name) where a Brand leaves it out; a login URL nothing
    # serves is warned by `manage.py check` (pactmw.W004).
    path("login", views.public, name="login"),
    path("apiary", views.public),
    path("decorated-sync", views.decorated_sync),
    path("decorated-async", views.decorated_async),
    path("optional", views.optional),
    *_scoped(),
    *_parafe(),
    path("drf/me", drf_views.Me.as_view()),
    path("drf/either", drf_views.Either.as_view()),
    path("drf/model-permissions", drf_views.ModelPermissions.as_view()),
    *_poppy_apis(),
    *_string_scopes(),
    *_bad_scopes(),
    *_missing_scopes(),
    *_unoffered_scopes(),
    # The site's own views under the Provider's mount, listed before its patterns.
    path("a2a/internal/orders", views.public),
    path("a2a/acme/mine", views.public),
    *a2a_urlpatterns(),
    # The site's own OAuth server's metadata (django-oauth-toolkit's, say), under the prefix
    # of Poppy's issuer metadata: pactmw routes that prefix only for a Poppy Brand.
    path(".well-known/oauth-authorization-server/o", views.public),
    path(".well-known/apple-app-site-association", views.public),
]
