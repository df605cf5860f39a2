"""Django REST framework on a site whose `PACTMW` does not build, served without the system
checks (uvicorn, as in production): pactmw's authentication class is in every API view's
chain, and a typo in its setting must not turn the whole API into 500s."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.adapters.commands import CHECKOUT_ENV
from tests.adapters.support import CHALLENGE
from tests.support.net import loopback_client
from tests.support.servers import django_server

pytestmark = pytest.mark.timeout(120)

BROKEN = {"audiance": "https://shop.example/a2a", "agents": [], "protect_prefix": "/api/"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    workdir = tmp_path_factory.mktemp("drf-bad-setting")
    server = django_server(
        BROKEN,
        asgi=True,  # runserver would refuse to start: its checks report E001
        settings="pactmw_testsite.contract_settings",
        workdir=workdir,
        name="site",
        extra_env=CHECKOUT_ENV,
    )
    with server as base, loopback_client(base_url=base) as opened:
        yield opened


def test_a_request_without_credentials_reaches_drf_as_anonymous(client: httpx.Client) -> None:
    """No credential: nothing for pactmw to check, so DRF answers as it would (here the
    view's permission refuses the anonymous request with the bare challenge)."""
    response = client.get("/drf/either")
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == CHALLENGE


def test_a_credential_pactmw_cannot_judge_is_a_503_never_a_500(client: httpx.Client) -> None:
    for headers in (
        {"Authorization": "Bearer key-123"},
        {"Authorization": "Bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln"},
    ):
        response = client.get("/drf/either", headers=headers)
        assert response.status_code == 503, response.text
        assert response.json() == {"detail": "pactmw is not configured"}
