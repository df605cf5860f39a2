"""pactmw: let a web app answer personal agents (PACT 1.0 over A2A, Parafé consent).

The public API. Framework glue lives in `pactmw.adapters.{asgi,fastapi,wsgi,flask,django}`,
each needing the extra of the same name (`pip install "pactmw[django]"`).
"""

import importlib.metadata

from pactmw.config import ConfigError, Settings
from pactmw.core.errors import (
    AuthenticationFailed,
    FetchError,
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

try:
    # The installed distribution's version: pyproject.toml is its one source.
    __version__ = importlib.metadata.version("pactmw")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AgentRegistry",
    "AuthenticationFailed",
    "CachePolicy",
    "ConfigError",
    "FetchError",
    "FetchPolicy",
    "IdentityVerifier",
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
