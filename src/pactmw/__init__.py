"""pactmw: let a web app answer personal agents (PACT 1.0 over A2A, Parafé consent).

The public API. Framework glue lives in `pactmw.adapters.{asgi,fastapi,wsgi,flask,django}`,
each needing the extra of the same name (`pip install "pactmw[django]"`).
"""

import importlib
import typing

if typing.TYPE_CHECKING:
    from pactmw.config import ConfigError, Settings
    from pactmw.core.errors import (
        AuthenticationFailed,
        FetchError,
        InsufficientScope,
        JoseError,
        KeyUnavailable,
        MalformedInput,
        MissingExtra,
        PactmwError,
    )
    from pactmw.core.fetch import FetchPolicy
    from pactmw.core.jwk import KeySet, PrivateJWK, PublicJWK, generate_private_jwk, parse_jwks
    from pactmw.core.keys import CachePolicy, JwksCache
    from pactmw.protocols.identity import (
        AgentRegistry,
        IdentityVerifier,
        PersonalAgent,
        RegisteredAgent,
    )
    from pactmw.protocols.parafe import (
        ParafeError,
        ParafeVerifier,
        ReceiptSigner,
        ReceiptVerifier,
    )

    __version__: str

__all__ = [
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
]

#: The module each export comes from. Each is imported on first use (a module `__getattr__`),
#: not by `import pactmw`: the `pactmw` command must reach `main`, where Ctrl-C is exit
#: status 130 and not a traceback, before the ~0.4 s these imports take.
_SOURCES = {
    "ConfigError": "pactmw.config",
    "Settings": "pactmw.config",
    "AuthenticationFailed": "pactmw.core.errors",
    "FetchError": "pactmw.core.errors",
    "InsufficientScope": "pactmw.core.errors",
    "JoseError": "pactmw.core.errors",
    "KeyUnavailable": "pactmw.core.errors",
    "MalformedInput": "pactmw.core.errors",
    "MissingExtra": "pactmw.core.errors",
    "PactmwError": "pactmw.core.errors",
    "FetchPolicy": "pactmw.core.fetch",
    "KeySet": "pactmw.core.jwk",
    "PrivateJWK": "pactmw.core.jwk",
    "PublicJWK": "pactmw.core.jwk",
    "generate_private_jwk": "pactmw.core.jwk",
    "parse_jwks": "pactmw.core.jwk",
    "CachePolicy": "pactmw.core.keys",
    "JwksCache": "pactmw.core.keys",
    "AgentRegistry": "pactmw.protocols.identity",
    "IdentityVerifier": "pactmw.protocols.identity",
    "PersonalAgent": "pactmw.protocols.identity",
    "RegisteredAgent": "pactmw.protocols.identity",
    "ParafeError": "pactmw.protocols.parafe",
    "ParafeVerifier": "pactmw.protocols.parafe",
    "ReceiptSigner": "pactmw.protocols.parafe",
    "ReceiptVerifier": "pactmw.protocols.parafe",
}


def __getattr__(name: str) -> object:
    if name == "__version__":
        value: object = _version()
    elif name in _SOURCES:
        value = getattr(importlib.import_module(_SOURCES[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # looked up once: the next use finds it as a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _version() -> str:
    import importlib.metadata

    try:
        # The installed distribution's version: pyproject.toml is its one source.
        return importlib.metadata.version("pactmw")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"
