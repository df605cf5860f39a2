"""A Parafé endpoint whose configuration gives it no Parafé runtime, on every adapter over
real servers (`contract_harness`, its Brand without Parafé): where no startup check stopped
it (a Flask view added after `init_app`, Django under a server that runs no check, Starlette
without an agent), each request is a 503 with a problem body, never a 500 or a traceback,
and the log says why once per endpoint, at ERROR."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.adapters import wsgi
from pactmw.config import ConfigError
from tests.adapters.contract_apps import ACTION
from tests.adapters.contract_harness import SERVERS, Harness, Target, harness
from tests.parafe_integration.support import a2a_message

pytestmark = pytest.mark.timeout(120)

#: What the Flask and Django endpoints say where no Brand configures Parafé (`{}`: the path).
NO_PARAFE = (
    "parafe_action('create_order') on {} refuses every request: no Brand configures Parafé "
    "([brands.X.parafe]), so no consent can be checked"
)
#: What the Starlette and FastAPI endpoints say given no agent, with none in `app.state`.
NO_AGENT = (
    "parafe_action('create_order') on {} refuses every request: it was given no agent and "
    "app.state.pactmw_parafe is no ParafeAgent; pass the Brand's ParafeAgent "
    "(provider.parafe_agent(brand_id)) as agent=..., or set app.state.pactmw_parafe to it"
)
#: The answer's body: the RFC 6749-shaped error every 503 of pactmw with a body has.
UNAVAILABLE = {
    "error": "temporarily_unavailable",
    "error_description": "This endpoint cannot check its action's consent: the server's "
    "Parafe configuration is missing",
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    # The Django site routes its Parafé views under settings without Parafé only when asked.
    django_env = {"PACTMW_TEST_PARAFE_VIEWS": "1"}
    workdir = tmp_path_factory.mktemp("parafe-unconfigured")
    with harness(workdir, with_parafe=False, django_env=django_env) as started:
        yield started


def _said(servers: Harness, target: Target, caplog: pytest.LogCaptureFixture) -> list[str]:
    """The ERROR lines `pactmw.adapters` said: in this process (the in-thread servers), or
    in the Django server's log, a line each (its format is the bare message)."""
    if target.name.startswith("django"):
        log = Path(servers.workdir / f"{target.name}.log").read_text()
        return log.splitlines()
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "pactmw.adapters" and record.levelno == logging.ERROR
    ]


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_parafe_endpoint_without_its_runtime_is_a_503_said_once(
    name: str, servers: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # Reported: Flask's and Django's `parafe_action` raised RuntimeError at each request to a
    # view whose Brand has no Parafé (a 500, nothing said at startup), and Starlette's did
    # given no agent and no `app.state.pactmw_parafe`.
    if name == "wsgi":
        # WSGI's `parafe_action` takes its agent, checked where the app is decorated: no
        # request ever finds it without one.
        with pytest.raises(ConfigError):
            wsgi.parafe_action(ACTION, None)  # type: ignore[arg-type]
        return
    caplog.set_level(logging.ERROR, logger="pactmw.adapters")
    target = servers.get(name)
    expected = NO_AGENT if name in ("starlette", "fastapi") else NO_PARAFE
    for variant in target.variants:
        for _ in range(2):
            message = a2a_message(f"lamp-{variant}")
            answer = target.client.post(f"/parafe-{variant}", json={"message": message})
            assert answer.status_code == 503, (variant, answer.text[:300])
            assert answer.json() == UNAVAILABLE
            assert answer.headers["cache-control"] == "no-store"
    said = _said(servers, target, caplog)
    for variant in target.variants:
        line = expected.format(f"/parafe-{variant}")
        assert said.count(line) == 1, (line, said)
    assert not [line for line in said if "Traceback" in line], said
