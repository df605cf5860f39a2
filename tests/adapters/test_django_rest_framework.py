"""Django REST framework with pactmw's authentication and permission classes, on a real
Django server (runserver and uvicorn), next to another authentication class of the app."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from pactmw.adapters.django.rest_framework import PersonalAgentUser
from pactmw.protocols.identity import PersonalAgent
from tests.adapters.contract_harness import Harness, Target, harness
from tests.adapters.support import CHALLENGE, INVALID_TOKEN

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with harness(tmp_path_factory.mktemp("drf")) as started:
        yield started


@pytest.fixture(params=["django-wsgi", "django-asgi"])
def target(request: pytest.FixtureRequest, servers: Harness) -> Target:
    return servers.get(request.param)


def test_a_personal_agent_is_request_user_and_request_auth(target: Target) -> None:
    response = target.client.get("/drf/me", headers=target.headers(target.token()))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["user"] == body["actor_id"]
    assert body["account"] is None


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"iat": 1_000_000_000, "exp": 1_000_000_100}, id="expired"),
        pytest.param({"aud": "https://someone-else.example/a2a"}, id="bad-audience"),
    ],
)
def test_a_refused_personal_agent_is_a_401_with_the_pact_challenge(
    target: Target, overrides: dict[str, object]
) -> None:
    response = target.client.get("/drf/me", headers=target.headers(target.token(**overrides)))
    assert response.status_code == 401  # DRF answers 403 when no class gives a challenge
    assert response.headers["www-authenticate"] == CHALLENGE
    assert response.json()["detail"]


def test_no_credential_is_a_401_with_the_challenge(target: Target) -> None:
    response = target.client.get("/drf/me")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGE


def test_other_credentials_reach_the_apps_own_authentication(target: Target) -> None:
    api_key = target.client.get("/drf/either", headers={"Authorization": "Bearer key-123"})
    assert api_key.json() == {"auth": "api key"}
    agent = target.client.get("/drf/either", headers=target.headers(target.token()))
    assert agent.json() == {"auth": "personal agent"}
    assert (
        target.client.get("/drf/either", headers={"Authorization": "Basic eDp5"}).status_code == 401
    )
    # A delegation is bound to a personal agent's identity: never ignored beside an API key.
    with_delegation = {"Authorization": "Bearer key-123", "X-A2A-User-Delegation": "a.b.c"}
    refused = target.client.get("/drf/either", headers=with_delegation)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == CHALLENGE


def test_has_delegated_scope_reads_the_views_required_scopes(target: Target) -> None:
    good, account = target.delegation("orders:read")
    ok = target.client.get("/drf/orders", headers=target.headers(target.token(), good))
    assert ok.status_code == 200, ok.text
    assert ok.json()["account"] == account
    none = target.client.get("/drf/orders", headers=target.headers(target.token()))
    assert none.status_code == 401
    assert none.headers["www-authenticate"] == INVALID_TOKEN
    assert none.json() == {"detail": NEEDS_A_DELEGATION}
    # No credentials at all: the bare challenge, no error code (RFC 6750 §3.1).
    anonymous = target.client.get("/drf/orders")
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == 'Bearer realm="a2a"'
    other, _ = target.delegation("orders:cancel")
    wrong = target.client.get("/drf/orders", headers=target.headers(target.token(), other))
    assert wrong.status_code == 403
    assert wrong.headers["www-authenticate"] == (
        'Bearer realm="a2a", error="insufficient_scope", scope="orders:read"'
    )


#: DRF's `detail` of each refusal: a sentence, its reason code kept in parentheses.
NEEDS_A_DELEGATION = "This endpoint needs a delegation token (X-A2A-User-Delegation)."


def _refusals(target: Target) -> dict[str, tuple[dict[str, str], str]]:
    """Each refusal a DRF view and a decorated Django view both give: the request's headers
    and DRF's `detail` for it."""
    other, _ = target.delegation("orders:cancel")
    return {
        "no credential": ({}, "Authentication credentials were not provided."),
        "expired identity": (
            target.headers(target.token(iat=1_000_000_000, exp=1_000_000_100)),
            "The personal agent's token was refused (expired).",
        ),
        "bad delegation": (
            target.headers(target.token(), "Bearer not-a-delegation"),
            "The delegation token was refused (malformed_token).",
        ),
        "no delegation": (target.headers(target.token()), NEEDS_A_DELEGATION),
        "missing scope": (
            target.headers(target.token(), other),
            "The delegation lacks a scope this endpoint needs: orders:read.",
        ),
    }


def test_drf_refuses_as_the_decorator_does_with_a_readable_detail(target: Target) -> None:
    # DRF's 401 `detail` of a refused token was its bare reason code ("expired"), its 403's
    # "insufficient_scope: orders:read", beside "this endpoint needs a delegation token".
    # And DRF's refusals had no `Cache-Control: no-store`, which every refusal of the
    # decorators and the middleware carries (a refusal is about this request's credentials).
    for case, (headers, detail) in _refusals(target).items():
        decorated = target.client.get("/api/scoped-sync", headers=headers)
        drf = target.client.get("/drf/orders", headers=headers)
        _assert_refused_alike(drf, decorated, case)
        assert drf.json() == {"detail": detail}, case
    # `PersonalAgentAuthentication` and `IsPersonalAgent` refuse as personal_agent_required.
    for case in ("no credential", "expired identity", "bad delegation"):
        headers, _ = _refusals(target)[case]
        decorated = target.client.get("/decorated-sync", headers=headers)
        drf = target.client.get("/drf/me", headers=headers)
        _assert_refused_alike(drf, decorated, case)


def _assert_refused_alike(drf: httpx.Response, decorated: httpx.Response, case: str) -> None:
    assert drf.status_code == decorated.status_code, case
    assert drf.headers["www-authenticate"] == decorated.headers["www-authenticate"], case
    assert decorated.headers["cache-control"] == "no-store", case
    assert drf.headers.get("cache-control") == decorated.headers["cache-control"], case


def test_a_bad_delegation_is_invalid_token(target: Target) -> None:
    headers = target.headers(target.token(), "Bearer not-a-delegation")
    response = target.client.get("/drf/me", headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == INVALID_TOKEN


def test_a_personal_agent_holds_no_django_permission(target: Target) -> None:
    """Under DRF's `DjangoModelPermissions` (a site's default permission class, say) a
    personal agent reads what needs no permission and is refused, not failed, the rest (it
    answered 500: its user had no `has_perms`)."""
    headers = target.headers(target.token())
    read = target.client.get("/drf/model-permissions", headers=headers)
    assert read.status_code == 200, read.text
    write = target.client.post("/drf/model-permissions", headers=headers, json={})
    assert write.status_code == 403, write.text
    assert write.json() == {"detail": "You do not have permission to perform this action."}


def test_the_personal_agent_user_answers_djangos_permission_checks_as_anonymous_does() -> None:
    caller = PersonalAgent("https://pa.example", "u1", "PA", {}, "https://shop.example/a2a")
    user = PersonalAgentUser(caller)
    assert not user.has_perm("pactmw.add_grant")
    assert not user.has_perms(["pactmw.view_grant"])
    assert user.has_perms([])  # as AnonymousUser: nothing asked, nothing missing
    assert not user.has_module_perms("pactmw")
    assert user.get_all_permissions() == user.get_group_permissions() == set()
    assert user.get_user_permissions() == set()
    assert user == PersonalAgentUser(caller)  # one agent user, one user (by actor_id)
    assert hash(user) == hash(PersonalAgentUser(caller))
    other = PersonalAgent("https://pa.example", "u2", "PA", {}, "https://shop.example/a2a")
    assert user != PersonalAgentUser(other)
