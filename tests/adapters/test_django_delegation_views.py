"""Class-based and DRF views that need a delegation, on a Django site whose `PACTMW` has no
`delegation_brand`: every caller is refused, so `manage.py check` says so (pactmw.E005) and,
where no check runs (uvicorn), the first refusal says so once at ERROR."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pactmw.store import open_store
from tests.adapters.commands import CHECKOUT_ENV, django_check
from tests.adapters.contract_harness import Harness, Target, config, harness
from tests.adapters.support import INVALID_TOKEN
from tests.adapters.tokens import claims
from tests.support.net import loopback_client
from tests.support.parties import ISSUER
from tests.support.servers import django_server

pytestmark = pytest.mark.timeout(120)

#: The test site's switch that routes its views needing a delegation without
#: `delegation_brand` (tests/adapters/django_project/pactmw_testsite/contract_urls.py).
ROUTE_DELEGATION_VIEWS = {"PACTMW_TEST_DELEGATION_VIEWS": "1"}

#: What follows each view's check in the report (the wording of `delegation_required`'s).
REFUSES_EVERY_CALLER = (
    " refuses every caller: settings.PACTMW['delegation_brand'] is not set, so no delegation "
    "is verified; set it to the Brand (one with [brands.X.delegation]) whose grants the view "
    "checks"
)

#: Each view the test site routes behind a check of a delegation that is not a function's
#: `delegation_required` (those are tests/adapters/test_framework_idioms.py's), as reported.
CLASS_BASED_VIEWS = [
    "delegation_required('orders:read') on /api/scoped-method (ScopedMethod.get)",
    "delegation_required('orders:cancel') on /api/scoped-dispatch (ScopedDispatch.dispatch)",
    "HasDelegatedScope (required_scopes ['orders:read']) on /drf/orders (Orders)",
    "HasDelegatedScope (required_scopes ['orders:cancel']) on /drf/^tickets/$ (Tickets)",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with harness(tmp_path_factory.mktemp("delegation-views")) as started:
        yield started


@pytest.fixture(scope="module")
def settings(world: Harness) -> dict[str, Any]:
    return config(world.workdir, "delegation-views", world.agent, world.parafe)


def _without_delegation_brand(settings: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in settings.items() if key != "delegation_brand"}


def _site_without_checks(
    settings: dict[str, Any], tmp_path: Path, switch: dict[str, str]
) -> contextlib.AbstractContextManager[str]:
    """The test site under uvicorn, which runs no system check, with the views `switch` (its
    environment) routes; its log is `site.log` in `tmp_path`."""
    return django_server(
        settings,
        asgi=True,
        settings="pactmw_testsite.contract_settings",
        workdir=tmp_path,
        name="site",
        extra_env={**CHECKOUT_ENV, **switch},
    )


def test_manage_py_check_reports_class_based_and_drf_views(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    without = _without_delegation_brand(settings)
    done = django_check(without, tmp_path / "pactmw.json", **ROUTE_DELEGATION_VIEWS)
    assert done.returncode != 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    for view in CLASS_BASED_VIEWS:
        assert view + REFUSES_EVERY_CALLER in said, said
    assert said.count("pactmw.E005") == 2 + len(CLASS_BASED_VIEWS), said  # each once
    # With `delegation_brand` set, the same views pass.
    passed = django_check(settings, tmp_path / "pactmw.json", **ROUTE_DELEGATION_VIEWS)
    assert "pactmw.E005" not in passed.stderr, passed.stderr


@pytest.mark.parametrize(
    ("path", "view"),
    [
        pytest.param("/api/scoped-method", CLASS_BASED_VIEWS[0], id="method-decorator"),
        pytest.param("/api/scoped-dispatch", CLASS_BASED_VIEWS[1], id="dispatch"),
        pytest.param("/drf/orders", CLASS_BASED_VIEWS[2], id="drf-apiview"),
        pytest.param("/drf/tickets/", CLASS_BASED_VIEWS[3], id="drf-viewset"),
    ],
)
def test_a_refusing_view_says_why_once_where_no_check_runs(
    world: Harness, tmp_path: Path, settings: dict[str, Any], path: str, view: str
) -> None:
    # Under uvicorn no system check runs: the first refused request says why, once (a
    # view `method_decorator` decorates anew at each request too).
    without = _without_delegation_brand(settings)
    server = _site_without_checks(without, tmp_path, ROUTE_DELEGATION_VIEWS)
    identity = {"Authorization": f"Bearer {world.agent.sign(claims(ISSUER))}"}
    with server as base, loopback_client(base_url=base) as client:
        for _ in range(3):
            refused = client.get(path, headers=identity)
            assert refused.status_code == 401, refused.text
            assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    said = (tmp_path / "site.log").read_text()
    logged = view.split(" on ")[0] + " on " + path + REFUSES_EVERY_CALLER
    assert said.count(logged) == 1, said


#: DRF's `detail` of the 503 of a view whose `required_scopes` is wrong or missing (the log
#: says why, once).
SCOPES_NOT_CONFIGURED = "This endpoint's delegated scopes are not configured."

#: What `manage.py check` and the view say of `required_scopes = "orders:read"`.
STRING_SCOPES = (
    "StringScopes.required_scopes is the string 'orders:read', whose every character would "
    "be a scope HasDelegatedScope requires: write a list, required_scopes = ['orders:read']"
)


def test_manage_py_check_reports_required_scopes_written_as_a_string(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # Each character was a scope: every delegation was refused 403 `insufficient_scope:
    # o r d e r s : r e a d`, with or without `delegation_brand`.
    done = django_check(settings, tmp_path / "pactmw.json", PACTMW_TEST_STRING_SCOPES="1")
    assert done.returncode != 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert f"pactmw.E006) HasDelegatedScope on /drf/string-scopes: {STRING_SCOPES}" in said, said


def test_required_scopes_written_as_a_string_is_said_where_no_check_runs(
    world: Harness, tmp_path: Path, settings: dict[str, Any]
) -> None:
    server = _site_without_checks(settings, tmp_path, {"PACTMW_TEST_STRING_SCOPES": "1"})
    identity = {"Authorization": f"Bearer {world.agent.sign(claims(ISSUER))}"}
    with server as base, loopback_client(base_url=base) as client:
        for _ in range(3):
            # It was a 500 (ImproperlyConfigured): a misconfiguration is never a 500, but the
            # 503 of a view without required_scopes (pactmw.E008), the log saying why once.
            answer = client.get("/drf/string-scopes", headers=identity)
            assert answer.status_code == 503, answer.text
            assert answer.json() == {"detail": SCOPES_NOT_CONFIGURED}
    assert (tmp_path / "site.log").read_text().count(STRING_SCOPES) == 1


#: What `manage.py check` and each view say of `required_scopes` that is no list of scope
#: names (django-oauth-toolkit's `TokenHasScope` takes any collection of them: a set will do).
BAD_SCOPES = {
    "/drf/int-scopes": "IntScopes.required_scopes must be a list of scope names, such as "
    "['orders:read'], not int 3",
    "/drf/blank-scope": "BlankScope.required_scopes must be a list of scope names, such as "
    "['orders:read'], not one holding an empty string",
    "/drf/number-scope": "NumberScope.required_scopes must be a list of scope names, such as "
    "['orders:read'], not one holding int 7",
    "/drf/generator-scopes": "GeneratorScopes.required_scopes must be a list of scope names, "
    "such as ['orders:read'], not generator, which the first request would use up",
}

#: The test site's switch that routes those views and one whose `required_scopes` is a set.
ROUTE_BAD_SCOPES = {"PACTMW_TEST_BAD_SCOPES": "1"}


def test_manage_py_check_reports_required_scopes_that_are_no_list_of_scope_names(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # An int or a generator failed the check itself (a TypeError where it showed the list);
    # an empty name or a number refused every delegation, 403 or 500, at each request.
    done = django_check(settings, tmp_path / "pactmw.json", **ROUTE_BAD_SCOPES)
    assert done.returncode != 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    for path, problem in BAD_SCOPES.items():
        assert f"pactmw.E006) HasDelegatedScope on {path}: {problem}." in said, said
    assert said.count("pactmw.E006") == len(BAD_SCOPES), said
    assert "SetScopes" not in said, said


def test_required_scopes_that_are_no_list_of_scope_names_are_a_503_where_no_check_runs(
    world: Harness, tmp_path: Path, settings: dict[str, Any]
) -> None:
    server = _site_without_checks(settings, tmp_path, ROUTE_BAD_SCOPES)
    store = open_store(str(settings["store"]))
    with server as base, loopback_client(base_url=base) as client, contextlib.closing(store):
        site = Target("site", client, (), store, world.signing, world.agent, world.parafe, settings)
        delegation, account = site.delegation("orders:read")
        headers = site.headers(site.token(), delegation)
        for path in BAD_SCOPES:
            for _ in range(2):
                refused = client.get(path, headers=headers)
                assert refused.status_code == 503, (path, refused.text)
                assert refused.json() == {"detail": SCOPES_NOT_CONFIGURED}, path
        # A set of names is as good as a list.
        admitted = client.get("/drf/set-scopes", headers=headers)
        assert admitted.status_code == 200, admitted.text
        assert admitted.json()["account"] == account
        other, _ = site.delegation("orders:cancel")
        wrong = client.get("/drf/set-scopes", headers=site.headers(site.token(), other))
        assert wrong.status_code == 403, wrong.text
    said = (tmp_path / "site.log").read_text()
    for problem in BAD_SCOPES.values():
        assert said.count(problem) == 1, said


#: What `manage.py check` and the view say of a `HasDelegatedScope` view without
#: `required_scopes`.
MISSING_SCOPES = (
    "NoScopes has no required_scopes, so HasDelegatedScope cannot tell which delegated "
    "scopes it needs: name them, required_scopes = ['orders:read'], or write "
    "required_scopes = [] to admit any delegation"
)

#: The switch of the test site that routes those views (`_missing_scopes` in its URLconf).
ROUTE_MISSING_SCOPES = {"PACTMW_TEST_MISSING_SCOPES": "1"}


def test_manage_py_check_reports_a_view_without_required_scopes(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # It admitted any delegation, where django-oauth-toolkit's TokenHasScope raises
    # ImproperlyConfigured. An empty list, written out, admits any delegation and passes.
    done = django_check(settings, tmp_path / "pactmw.json", **ROUTE_MISSING_SCOPES)
    assert done.returncode != 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert f"pactmw.E008) HasDelegatedScope on /drf/no-scopes: {MISSING_SCOPES}" in said, said
    assert said.count("pactmw.E008") == 1, said
    assert "AnyDelegation" not in said, said


def test_a_view_without_required_scopes_refuses_every_caller_where_no_check_runs(
    world: Harness, tmp_path: Path, settings: dict[str, Any]
) -> None:
    server = _site_without_checks(settings, tmp_path, ROUTE_MISSING_SCOPES)
    store = open_store(str(settings["store"]))
    with server as base, loopback_client(base_url=base) as client, contextlib.closing(store):
        site = Target("site", client, (), store, world.signing, world.agent, world.parafe, settings)
        delegation, account = site.delegation("orders:read")
        headers = site.headers(site.token(), delegation)
        for _ in range(3):
            refused = client.get("/drf/no-scopes", headers=headers)
            assert refused.status_code == 503, refused.text
            assert refused.json() == {"detail": SCOPES_NOT_CONFIGURED}
        # `required_scopes = []`: any delegation, yet a delegation.
        admitted = client.get("/drf/any-delegation", headers=headers)
        assert admitted.status_code == 200, admitted.text
        assert admitted.json()["account"] == account
        without = client.get("/drf/any-delegation", headers=site.headers(site.token()))
        assert without.status_code == 401, without.text
        assert without.headers["www-authenticate"] == INVALID_TOKEN
    assert (tmp_path / "site.log").read_text().count(MISSING_SCOPES) == 1
