"""The public surface is what we mean it to be, and framework imports stay in their adapters."""

from __future__ import annotations

import subprocess
import sys

import pactmw
import pactmw.provider

EXPECTED = {
    "AgentRegistry",
    "AuthenticationFailed",
    "CachePolicy",
    "ConfigError",
    "FetchError",
    "FetchPolicy",
    "IdentityVerifier",
    "InsufficientScope",
    "JoseError",
    "JwksCache",
    "KeySet",
    "KeyUnavailable",
    "MalformedInput",
    "MissingExtra",
    "PactmwError",
    "ParafeError",
    "ParafeVerifier",
    "PersonalAgent",
    "PrivateJWK",
    "PublicJWK",
    "ReceiptSigner",
    "ReceiptVerifier",
    "RegisteredAgent",
    "Settings",
    "__version__",
    "generate_private_jwk",
    "parse_jwks",
}


def test_top_level_exports() -> None:
    assert set(pactmw.__all__) == EXPECTED
    for name in pactmw.__all__:
        assert getattr(pactmw, name) is not None


def test_provider_exports_resolve() -> None:
    for name in pactmw.provider.__all__:
        assert getattr(pactmw.provider, name) is not None


def test_errors_share_one_base() -> None:
    for name in (
        "AuthenticationFailed",
        "ConfigError",
        "FetchError",
        "InsufficientScope",
        "JoseError",
        "KeyUnavailable",
        "MissingExtra",
    ):
        assert issubclass(getattr(pactmw, name), pactmw.PactmwError)


def test_only_the_django_flask_and_fastapi_adapters_import_those_frameworks() -> None:
    # Walked by hand: pkgutil.walk_packages imports every package it recurses into. The
    # Django store (`store = "django"`) runs on Django's connection: it is the one store
    # module that imports Django, and only `open_store("django")` imports it.
    code = (
        "import sys, pkgutil, importlib, pactmw\n"
        "skip = {'pactmw.adapters.flask', 'pactmw.adapters.fastapi', 'pactmw.adapters.django',\n"
        "        'pactmw.store.django'}\n"
        "def walk(path, prefix):\n"
        "    for m in pkgutil.iter_modules(path, prefix):\n"
        "        if m.name in skip or m.name.startswith('pactmw.adapters._flask'):\n"
        "            continue\n"
        "        module = importlib.import_module(m.name)\n"
        "        if m.ispkg:\n"
        "            walk(module.__path__, m.name + '.')\n"
        "walk(pactmw.__path__, 'pactmw.')\n"
        "frameworks = ('django', 'flask', 'fastapi')\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in frameworks)\n"
        "print(bad)\n"
        "raise SystemExit(1 if bad else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
