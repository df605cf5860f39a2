"""What tests/test_packaging.py runs inside a clean venv that installed the built wheel.

    python wheel_probe.py SPEC.json

SPEC names the extras installed so far and the documentation samples to run. The probe
checks that pactmw comes from the venv, that the adapter of every installed extra imports
and serves its sample's app, and that every other adapter refuses to import with
`MissingExtra` naming its extra. It uses the standard library and pactmw only (nothing of
the repository is importable there) and prints `ok` when everything held.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ADAPTERS", "CHECKS", "main"]

#: adapter module -> the extra that brings its framework.
ADAPTERS = {
    "pactmw.adapters.asgi": "asgi",
    "pactmw.adapters.fastapi": "fastapi",
    "pactmw.adapters.wsgi": "wsgi",
    "pactmw.adapters.flask": "flask",
    "pactmw.adapters.django": "django",
    "pactmw.adapters.django.rest_framework": "drf",
}

#: The refusal every identity-guarded sample gives a request without a token.
CHALLENGE = 'Bearer realm="a2a"'


def run_sample(code: str, name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"sample_{name}"}
    exec(compile(code, f"sample:{name}", "exec"), namespace)
    return namespace


def asgi_get(app: Any, path: str) -> tuple[int, dict[str, str]]:
    """One GET through an ASGI app, without a server: (status, headers)."""
    answer: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"host", b"provider.example")],
        "client": ("127.0.0.1", 1), "server": ("provider.example", 80),
    }  # fmt: skip
    asyncio.run(app(scope, receive, send))
    return answer["status"], answer["headers"]


def wsgi_get(app: Any, path: str) -> tuple[int, dict[str, str]]:
    """One GET through a WSGI app, without a server: (status, headers)."""
    from wsgiref.util import setup_testing_defaults

    environ: dict[str, Any] = {"PATH_INFO": path, "wsgi.input": io.BytesIO()}
    setup_testing_defaults(environ)
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answer["status"], answer["headers"] = int(status.split()[0]), dict(headers)
        return lambda data: None

    body = app(environ, start_response)
    b"".join(body)
    if hasattr(body, "close"):
        body.close()
    return answer["status"], {k.lower(): v for k, v in answer["headers"].items()}


def refuses_without_token(status: int, headers: dict[str, str]) -> None:
    assert (status, headers.get("www-authenticate")) == (401, CHALLENGE), (status, headers)


def check_core(samples: dict[str, str]) -> None:
    for name in ("direct", "pypi_direct"):  # the custom-server page's, then PyPI's
        who_is_calling = run_sample(samples[name], name)["who_is_calling"]
        assert who_is_calling(None) == "401 (missing_token)"
    from pactmw.client import A2AClient, AgentSigner  # the agent's side needs no extra

    assert A2AClient is not None
    assert AgentSigner is not None


def check_asgi(samples: dict[str, str]) -> None:
    refuses_without_token(*asgi_get(run_sample(samples["starlette"], "s")["app"], "/a2a/x"))
    provider = run_sample(samples["provider"], "provider")["app"]
    status, headers = asgi_get(provider, "/a2a/acme/.well-known/agent-card.json")
    assert (status, headers["content-type"]) == (200, "application/a2a+json"), status


def check_fastapi(samples: dict[str, str]) -> None:
    refuses_without_token(*asgi_get(run_sample(samples["fastapi"], "f")["app"], "/whoami"))


def check_wsgi(samples: dict[str, str]) -> None:
    app = run_sample(samples["wsgi"], "wsgi")["application"]
    refuses_without_token(*wsgi_get(app, "/a2a/anything"))


def check_flask(samples: dict[str, str]) -> None:
    refuses_without_token(*wsgi_get(run_sample(samples["flask"], "f")["app"], "/a2a/whoami"))
    # The page on testing an app: its test passes with the wheel and the flask extra alone.
    run_sample(samples["testing"], "testing")["test_whoami_admits_a_personal_agent"]()


def check_django(samples: dict[str, str]) -> None:
    """The Django page's settings and view, as written: the app's checks pass, and the view
    refuses a request without a token, inside the guarded prefix and outside it."""
    import django
    from django.conf import settings
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from django.urls import path

    sample = run_sample(samples["django"], "django")
    # The sample's `# ...` is the project's own apps; a new project has these two (DRF's
    # anonymous user needs them).
    project_apps = ["django.contrib.auth", "django.contrib.contenttypes"]
    settings.configure(
        INSTALLED_APPS=[*project_apps, *sample["INSTALLED_APPS"]],
        MIDDLEWARE=sample["MIDDLEWARE"], PACTMW=sample["PACTMW"], ROOT_URLCONF=__name__,
        SECRET_KEY="probe", ALLOWED_HOSTS=["127.0.0.1"], DATABASES={},
    )  # fmt: skip
    django.setup()
    report = io.StringIO()
    call_command("check", fail_level="WARNING", stdout=report)  # the app's checks load, pass
    assert "no issues" in report.getvalue(), report.getvalue()
    urlpatterns.extend([path("whoami", sample["whoami"]), path("a2a/whoami", sample["whoami"])])
    application = get_wsgi_application()
    for where in ("/whoami", "/a2a/whoami"):  # the decorator, then the middleware's prefix
        refuses_without_token(*wsgi_get(application, where))


def check_drf(samples: dict[str, str]) -> None:
    """The DRF sample's settings and view in the Django of `check_django` (drf brings
    Django): a request without a token is DRF's 401 with the PACT challenge (not its 403)."""
    from django.core.wsgi import get_wsgi_application
    from django.test import override_settings
    from django.urls import path

    # The sample is a settings module and a view in one block. Django reads the settings
    # before any view imports DRF (APIView takes its authentication classes from them when
    # it is imported), so its settings are in place before the block runs.
    with override_settings(**settings_in(samples["drf"])):
        sample = run_sample(samples["drf"], "drf")
        urlpatterns.append(path("orders", sample["OrderList"].as_view()))
        status, headers = wsgi_get(get_wsgi_application(), "/orders")
    # A request without credentials gets the bare challenge (RFC 6750 §3.1: no error code).
    assert (status, headers["www-authenticate"]) == (401, CHALLENGE)


def settings_in(code: str) -> dict[str, Any]:
    """The values a sample assigns to UPPER_CASE names (Django settings), run alone."""
    tree = ast.parse(code)
    tree.body = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign)
        and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)
    ]
    namespace: dict[str, Any] = {}
    exec(compile(tree, "sample settings", "exec"), namespace)
    return {name: value for name, value in namespace.items() if name.isupper()}


def check_pages(samples: dict[str, str]) -> None:
    """A custom server's consent pages render (Jinja2 and the built-in templates), and its
    guard for delegation tokens, which the custom-server page says needs this extra, runs."""
    from pactmw.provider import ConsentPages

    page = ConsentPages().error("Link expired", "Ask your assistant for a <new> link.")
    assert "Ask your assistant for a &lt;new&gt; link." in page, page  # autoescaped
    orders = run_sample(samples["custom_delegation"], "custom_delegation")["orders"]
    refused = orders("GET", "/orders", [])
    assert (refused.status, dict(refused.headers)["WWW-Authenticate"]) == (401, CHALLENGE)


def check_postgres(samples: dict[str, str]) -> None:
    importlib.import_module("pactmw.store.postgres")


def check_serve(samples: dict[str, str]) -> None:
    import subprocess

    pactmw = Path(sys.executable).with_name("pactmw")
    shown = subprocess.run([pactmw, "serve", "--help"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    # What the PyPI page suggests right after installing this extra.
    demo = subprocess.run([pactmw, "demo"], capture_output=True, text=True, timeout=180)
    assert demo.returncode == 0, demo.stdout + demo.stderr


#: extra -> what proves it works ("" is the wheel with no extra).
CHECKS: dict[str, Callable[[dict[str, str]], None]] = {
    "": check_core,
    "asgi": check_asgi,
    "fastapi": check_fastapi,
    "wsgi": check_wsgi,
    "flask": check_flask,
    "django": check_django,
    "drf": check_drf,
    "pages": check_pages,
    "postgres": check_postgres,
    "serve": check_serve,
}

urlpatterns: list[Any] = []  # ROOT_URLCONF of check_django and check_drf


def missing_extra(module: str) -> Any:
    """The `MissingExtra` importing `module` raises, or None when it imports."""
    from pactmw import MissingExtra

    try:
        importlib.import_module(module)
    except MissingExtra as refusal:
        return refusal
    return None


def consent_pages_refusal() -> Any:
    """The `MissingExtra` making the consent pages raises, or None when they are made."""
    from pactmw import MissingExtra
    from pactmw.provider import ConsentPages

    try:
        ConsentPages()
    except MissingExtra as refusal:
        return refusal
    return None


def delegation_sample_refusal(samples: dict[str, str]) -> Any:
    """The `MissingExtra` the custom-server page's delegation sample raises, or None."""
    from pactmw import MissingExtra

    try:
        run_sample(samples["custom_delegation"], "custom_delegation")
    except MissingExtra as refusal:
        return refusal
    return None


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    installed: set[str] = set(spec["installed"])
    samples: dict[str, str] = spec["samples"]

    import pactmw

    assert Path(pactmw.__file__).is_relative_to(sys.prefix), pactmw.__file__
    for module, extra in ADAPTERS.items():
        if extra in installed:
            importlib.import_module(module)
            continue
        if extra == "drf" and "django" not in installed:
            extra = "django"  # its package, pactmw.adapters.django, is checked first
        refusal = missing_extra(module)
        assert refusal is not None, f"{module} imported without the {extra} extra"
        assert refusal.extra == extra, (module, refusal.extra)
        assert f'pip install "pactmw[{extra}]"' in str(refusal), str(refusal)
    if not installed:  # every web extra brings Jinja2 too
        refusal = consent_pages_refusal()
        assert refusal is not None, "ConsentPages() worked without Jinja2"
        assert refusal.extra == "pages", str(refusal)
        # A Brand with delegation builds its consent pages: the page says to install `pages`.
        refusal = delegation_sample_refusal(samples)
        assert refusal is not None, "the delegation sample ran without Jinja2"
        assert refusal.extra == "pages", str(refusal)
    for extra in ("", *sorted(installed)):
        CHECKS[extra](samples)
    print("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
