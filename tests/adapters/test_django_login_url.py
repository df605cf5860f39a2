"""On Django, a Brand that leaves out `delegation.login_url` sends a person to sign in at
Django's own `settings.LOGIN_URL`, as django-oauth-toolkit's authorization view does
(`redirect_to_login`): a path, an absolute URL or a URL name, resolved with `resolve_url`. A
`LOGIN_URL` that does not resolve, or a path no URL pattern serves, is said by `manage.py
check`, naming `settings.LOGIN_URL` and why it is used; under a server that runs no check,
at startup in the log, and pactmw's paths answer 503, never a 500."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from pactmw.config import ConfigError
from tests.adapters.commands import CHECKOUT_ENV, django_check
from tests.adapters.tokens import AgentKey, jwks
from tests.support.cli import PYTHON_M, environment, run
from tests.support.net import loopback_client
from tests.support.parties import AUDIENCE
from tests.support.servers import django_server

pytestmark = pytest.mark.timeout(120)

#: The test site's settings: the contract site with `LOGIN_URL` from the environment. Its
#: URLconf serves its login page at /login, named "login".
SETTINGS = "pactmw_testsite.login_settings"
CONSENT = "/a2a/acme/oauth/consent?user_code=BCDF-GHJK"
BASE_URL = "https://shop.example"


def _settings(**delegation: Any) -> dict[str, Any]:
    """`PACTMW` with one Brand, whose delegation has no `login_url` unless `delegation` gives
    one."""
    key = AgentKey.generate("ES256", "k1")
    return {
        "base_url": BASE_URL,
        "audience": AUDIENCE,
        "agents": [{"issuer": "https://pa.example", "jwks": jwks(key)}],
        "store": "memory://",
        "brands": {
            "acme": {
                "name": "Acme",
                "handler": "examples.bots:order_bot",
                "delegation": {"scopes": {"orders:read": "See your orders"}, **delegation},
            }
        },
    }


def _check(tmp_path: Path, django_login_url: str, **delegation: Any) -> tuple[int, str]:
    """`manage.py check` with `LOGIN_URL = django_login_url`; its exit code and output."""
    done: subprocess.CompletedProcess[str] = django_check(
        _settings(**delegation),
        tmp_path / "pactmw.json",
        DJANGO_SETTINGS_MODULE=SETTINGS,
        PACTMW_TEST_LOGIN_URL=django_login_url,
    )
    return done.returncode, " ".join((done.stdout + done.stderr).split())


@pytest.mark.parametrize("asgi", [False, True], ids=["runserver", "uvicorn"])
def test_a_brand_without_login_url_sends_a_person_to_djangos_login_url(
    tmp_path: Path, asgi: bool
) -> None:
    # LOGIN_URL is a URL name: resolved, as Django's own `redirect_to_login` resolves it.
    # uvicorn runs no system check: the name is resolved when the middleware builds pactmw.
    env = {**CHECKOUT_ENV, "PACTMW_TEST_LOGIN_URL": "login"}
    with (
        django_server(
            _settings(), asgi=asgi, settings=SETTINGS, workdir=tmp_path, name="site", extra_env=env
        ) as base,
        loopback_client(base_url=base) as client,
    ):
        signed_out = client.get(CONSENT)
    assert signed_out.status_code in (302, 303), signed_out.text[:300]
    login = urlsplit(signed_out.headers["location"])
    assert login.path == "/login", signed_out.headers["location"]
    # Back to the consent page afterwards, at the site's public URL (`base_url`), as today.
    back = BASE_URL + CONSENT
    assert parse_qs(login.query) == {"next": [back]}, signed_out.headers["location"]


def test_an_explicit_login_url_still_wins(tmp_path: Path) -> None:
    env = {**CHECKOUT_ENV, "PACTMW_TEST_LOGIN_URL": "login"}
    settings = _settings(login_url="/public")
    with (
        django_server(
            settings, asgi=True, settings=SETTINGS, workdir=tmp_path, name="site", extra_env=env
        ) as base,
        loopback_client(base_url=base) as client,
    ):
        signed_out = client.get(CONSENT)
    assert signed_out.status_code in (302, 303), signed_out.text[:300]
    assert signed_out.headers["location"].startswith("/public?next="), signed_out.headers


def test_a_login_url_name_that_does_not_resolve_is_an_error(tmp_path: Path) -> None:
    returncode, said = _check(tmp_path, "logn")
    assert returncode != 0, said  # an error: pactmw cannot send anyone to sign in
    assert "pactmw.E009" in said, said
    assert "settings.LOGIN_URL is 'logn'" in said, said
    assert "brands.acme.delegation.login_url is not set" in said, said
    assert "pactmw.E001" not in said, said  # said once, as LOGIN_URL's


@pytest.mark.parametrize("login_url", ["login.html", "./login"], ids=["no-path", "relative"])
def test_a_login_url_that_is_no_path_is_an_error(tmp_path: Path, login_url: str) -> None:
    # `resolve_url` hands back what is no URL name as it is: no page to redirect to.
    returncode, said = _check(tmp_path, login_url)
    assert returncode != 0, said
    assert "pactmw.E009" in said, said
    assert f"settings.LOGIN_URL is {login_url!r}" in said, said


def test_a_lazy_login_url_that_does_not_reverse_is_an_error(tmp_path: Path) -> None:
    # `LOGIN_URL = reverse_lazy("logn")`, as many settings write it: said as pactmw.E009 with
    # Django's own reason, never a traceback out of `manage.py check`.
    done = django_check(
        _settings(),
        tmp_path / "pactmw.json",
        DJANGO_SETTINGS_MODULE=SETTINGS,
        PACTMW_TEST_LOGIN_URL="logn",
        PACTMW_TEST_LOGIN_URL_LAZY="1",
    )
    said = " ".join((done.stdout + done.stderr).split())
    assert "Traceback" not in said, said
    assert done.returncode == 1, said  # the check's error, not a crash
    assert "pactmw.E009" in said, said
    assert "settings.LOGIN_URL is reverse_lazy('logn')" in said, said
    assert "Reverse for 'logn' not found" in said, said
    assert "brands.acme.delegation.login_url is not set" in said, said


def test_a_lazy_login_url_that_reverses_passes(tmp_path: Path) -> None:
    done = django_check(
        _settings(),
        tmp_path / "pactmw.json",
        DJANGO_SETTINGS_MODULE=SETTINGS,
        PACTMW_TEST_LOGIN_URL="login",
        PACTMW_TEST_LOGIN_URL_LAZY="1",
    )
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, said
    assert "pactmw.W004" not in said, said
    assert "pactmw.E0" not in said, said


def test_a_login_url_path_no_pattern_serves_is_warned(tmp_path: Path) -> None:
    # Django's default LOGIN_URL, on a site without django.contrib.auth's URLs.
    returncode, said = _check(tmp_path, "/accounts/login/")
    assert returncode == 0, said  # a warning: the site still starts
    assert "pactmw.W004" in said, said
    assert "settings.LOGIN_URL is '/accounts/login/'" in said, said
    assert "brands.acme.delegation.login_url is not set" in said, said
    assert "no URL pattern of the ROOT_URLCONF serves /accounts/login/" in said, said


@pytest.mark.parametrize(
    "login_url", ["login", "/login", "https://login.shop.example/"], ids=["name", "path", "url"]
)
def test_a_login_url_that_resolves_passes(tmp_path: Path, login_url: str) -> None:
    returncode, said = _check(tmp_path, login_url)
    assert returncode == 0, said
    assert "pactmw.W004" not in said, said
    assert "pactmw.E0" not in said, said


def test_an_explicit_login_url_is_checked_not_djangos(tmp_path: Path) -> None:
    returncode, said = _check(tmp_path, "logn", login_url="/nowhere")
    assert returncode == 0, said
    assert "LOGIN_URL" not in said, said
    assert "brands.acme.delegation.login_url is '/nowhere'" in said, said


def test_under_uvicorn_a_bad_login_url_is_logged_at_startup(tmp_path: Path) -> None:
    # No check runs: the middleware says it as the server starts; pactmw's paths answer 503.
    env = {**CHECKOUT_ENV, "PACTMW_TEST_LOGIN_URL": "logn"}
    with (
        django_server(
            _settings(), asgi=True, settings=SETTINGS, workdir=tmp_path, name="site", extra_env=env
        ) as base,
        loopback_client(base_url=base) as client,
    ):
        consent = client.get(CONSENT)
        card = client.get("/a2a/acme/.well-known/agent-card.json")
    assert consent.status_code == 503, consent.text[:300]
    assert card.status_code == 503, card.text[:300]
    log = " ".join((tmp_path / "site.log").read_text().split())
    assert "settings.LOGIN_URL is 'logn'" in log, log
    assert "brands.acme.delegation.login_url is not set" in log, log
    assert "Traceback" not in log, log


# -- elsewhere there is no LOGIN_URL: the Brand's login_url is still required ---------------

REQUIRED = "brands.acme.delegation.login_url is required"


def test_flask_still_requires_login_url() -> None:
    from flask import Flask

    from pactmw.adapters.flask import Pactmw

    app = Flask(__name__)
    app.config["PACTMW"] = _settings()
    with pytest.raises(ConfigError) as raised:
        Pactmw(app)
    assert str(raised.value).startswith(REQUIRED), raised.value


def test_serve_still_requires_login_url(tmp_path: Path) -> None:
    config = tmp_path / "pactmw.toml"
    config.write_text(
        "\n".join(
            [
                'base_url = "https://shop.example"',
                'audience = "https://shop.example/a2a"',
                'store = "memory://"',
                "[[agents]]",
                'issuer = "https://pa.example"',
                'jwks_uri = "https://pa.example/jwks.json"',
                "[brands.acme]",
                'handler = "examples.bots:order_bot"',
                "[brands.acme.delegation.scopes]",
                '"orders:read" = "See your orders"',
            ]
        )
    )
    done = run([*PYTHON_M, "serve", "--config", str(config), "--port", "0"], env=environment())
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert REQUIRED in done.stderr, done.stderr


# -- a Poppy Brand's sign-in link is checked where LOGIN_URL leads ---------------------------

#: A LOGIN_URL on a host a Poppy Brand's settings do not allow for its sign-in link.
ELSEWHERE = "https://login.other.example/"


def _poppy_settings(**delegation: Any) -> dict[str, Any]:
    """A Poppy Brand whose people sign in at its own login first (`login = "brand"`), where a
    personal agent's device sign-in link points."""
    brand_login = {
        "login": "brand",
        "brand_issuer": "https://login.other.example",
        "brand_jwks_uri": "https://login.other.example/jwks.json",
    }
    settings = _settings(**brand_login, **delegation)
    settings["brands"]["acme"]["poppy"] = {"domain": "shop.example", "agents": "any"}
    return settings


def test_a_poppy_sign_in_link_elsewhere_names_login_url(tmp_path: Path) -> None:
    # The link goes where LOGIN_URL leads: the message names the setting the operator wrote,
    # not `brands.acme.delegation.login_url`, which is not set.
    done = django_check(
        _poppy_settings(),
        tmp_path / "pactmw.json",
        DJANGO_SETTINGS_MODULE=SETTINGS,
        PACTMW_TEST_LOGIN_URL=ELSEWHERE,
    )
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0, said
    assert "pactmw.E009" in said, said
    assert "settings.LOGIN_URL must be on shop.example" in said, said
    assert "brands.acme.delegation.login_url is not set" in said, said
    assert "brands.acme.delegation.login_url must be" not in said, said
    assert "Traceback" not in said, said


def test_under_uvicorn_a_poppy_sign_in_link_elsewhere_names_login_url(tmp_path: Path) -> None:
    env = {**CHECKOUT_ENV, "PACTMW_TEST_LOGIN_URL": ELSEWHERE}
    with (
        django_server(
            _poppy_settings(),
            asgi=True,
            settings=SETTINGS,
            workdir=tmp_path,
            name="site",
            extra_env=env,
        ) as base,
        loopback_client(base_url=base) as client,
    ):
        card = client.get("/a2a/acme/.well-known/agent-card.json")
    assert card.status_code == 503, card.text[:300]
    log = " ".join((tmp_path / "site.log").read_text().split())
    assert "settings.LOGIN_URL must be on shop.example" in log, log
    assert "brands.acme.delegation.login_url must be" not in log, log
    assert "Traceback" not in log, log


def test_an_explicit_poppy_login_url_elsewhere_still_names_it(tmp_path: Path) -> None:
    done = django_check(
        _poppy_settings(login_url=ELSEWHERE),
        tmp_path / "pactmw.json",
        DJANGO_SETTINGS_MODULE=SETTINGS,
        PACTMW_TEST_LOGIN_URL="login",
    )
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0, said
    assert "brands.acme.delegation.login_url must be on shop.example" in said, said
    assert "LOGIN_URL must" not in said, said
