"""The personal agent's signing key: PACT §3.2 JWTs, and the JWKS that Providers fetch.

`AgentSigner.sign(sub, aud)` makes the bearer token every request carries. `for_user(...)`
binds a user and an audience into `AgentCredentials`, a callable the clients call for a fresh
token on every request (and every retry). The public keys go on the web at the `jwksUri`
registered with each Provider: `write_jwks` for a static host, `serve_jwks` for development.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from attrs import field, frozen

from pactmw.core.errors import MalformedInput
from pactmw.core.files import write_file_atomically
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import (
    PrivateJWK,
    generate_private_jwk,
    import_private_jwk,
    load_private_key_pem,
    private_jwk_from_key,
)

#: PACT §3.2: personal-agent JWTs are ES256 or RS256.
AGENT_ALGORITHMS = frozenset({"ES256", "RS256"})
#: PACT §3.2: `exp` at most 300 s after `iat`; the reference signer uses 120 s.
MAX_TTL = 300
DEFAULT_TTL = 120
DEFAULT_JWKS_PATH = "/.well-known/jwks.json"


def _is_key_set(jwk: Mapping[str, Any] | str | bytes) -> bool:
    """Whether `jwk` is a JWKS document (`{"keys": [...]}`) rather than one key."""
    if isinstance(jwk, (str, bytes)):
        try:
            jwk = json.loads(jwk)
        except ValueError:
            return False
    return isinstance(jwk, Mapping) and "keys" in jwk and "kty" not in jwk


@frozen
class AgentSigner:
    """Signs personal-agent JWTs as `issuer` with one ES256 or RS256 key that has a `kid`.

    `clock` is wall-clock epoch seconds (injectable for tests).
    """

    issuer: str
    key: PrivateJWK = field(repr=False)
    clock: Callable[[], float] = field(default=time.time, repr=False)

    def __attrs_post_init__(self) -> None:
        if not self.issuer:
            raise ValueError("issuer must be the personal agent's registered issuer URL")
        if self.key.alg not in AGENT_ALGORITHMS:
            raise ValueError(f"personal-agent keys must be ES256 or RS256, not {self.key.alg}")
        if not self.key.kid:
            raise ValueError("the signing key needs a kid")

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def from_jwk(
        cls,
        jwk: PrivateJWK | Mapping[str, Any] | str | bytes,
        *,
        issuer: str,
        kid: str | None = None,
    ) -> AgentSigner:
        """From a private JWK (a `PrivateJWK` as `generate_private_jwk` returns, a dict or
        JSON). Without a `kid` (in the JWK or given), the kid is the key's RFC 7638
        thumbprint."""
        if isinstance(jwk, PrivateJWK):
            key = jwk
        else:
            try:
                key = import_private_jwk(jwk)
            except MalformedInput as exc:
                if _is_key_set(jwk):  # keygen's other file: "no kty" would not say so
                    raise ValueError(
                        "a JWKS (the public keys to publish), not a private JWK"
                    ) from exc
                raise ValueError(f"not a usable private JWK: {exc}") from exc
        if kid is not None and kid != key.kid:
            key = _with_kid(key, kid)
        return cls(issuer=issuer, key=key)

    @classmethod
    def from_pem(cls, pem: bytes | str, *, issuer: str, kid: str | None = None) -> AgentSigner:
        """From an unencrypted PEM private key (P-256 or RSA >= 2048 bits); `kid` defaults to
        the RFC 7638 thumbprint."""
        data = pem.encode("ascii") if isinstance(pem, str) else pem
        try:
            key = load_private_key_pem(data, kid=kid)
        except MalformedInput as exc:
            raise ValueError(str(exc)) from exc
        return cls(issuer=issuer, key=key)

    @classmethod
    def from_file(cls, path: str | Path, *, issuer: str, kid: str | None = None) -> AgentSigner:
        """From a JWK (`{...}`) or PEM file; a `ValueError` for a bad key names the file (and
        never quotes what is in it)."""
        data = Path(path).read_bytes()
        load = cls.from_jwk if data.lstrip().startswith(b"{") else cls.from_pem
        try:
            return load(data, issuer=issuer, kid=kid)
        except ValueError as exc:  # an agent platform may load several: say which one
            raise ValueError(f"{path}: {exc}") from exc

    @classmethod
    def generate(cls, *, issuer: str, alg: str = "ES256", kid: str | None = None) -> AgentSigner:
        """A fresh key (keep `key.to_dict()` somewhere safe to sign again after a restart)."""
        if alg not in AGENT_ALGORITHMS:
            raise ValueError("alg must be ES256 or RS256")
        return cls(issuer=issuer, key=generate_private_jwk(alg, kid=kid))

    # -- signing ---------------------------------------------------------------------------------

    @property
    def kid(self) -> str:
        kid = self.key.kid
        assert kid is not None  # checked at construction
        return kid

    def sign(self, sub: str, aud: str, ttl: int = DEFAULT_TTL) -> str:
        """A PACT §3.2 JWT: header `{alg, kid, typ: "JWT"}`, claims `iss, sub, aud, iat, exp,
        jti` (a UUID). `ttl` is 1..300 seconds (`ValueError` otherwise)."""
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 < ttl <= MAX_TTL:
            raise ValueError(f"ttl must be an integer from 1 to {MAX_TTL} seconds")
        if not sub or not aud:
            raise ValueError("sub and aud must be non-empty")
        now = int(self.clock())
        claims = {
            "iss": self.issuer,
            "sub": sub,
            "aud": aud,
            "iat": now,
            "exp": now + ttl,
            "jti": str(uuid.uuid4()),
        }
        return sign_compact(claims, self.key, typ="JWT")

    def for_user(self, sub: str, audience: str, ttl: int = DEFAULT_TTL) -> AgentCredentials:
        """Credentials for one user (`sub`) at one Provider (`audience`)."""
        return AgentCredentials(signer=self, sub=sub, audience=audience, ttl=ttl)

    # -- publishing ------------------------------------------------------------------------------

    def public_jwks(self) -> dict[str, Any]:
        """The JWKS document to publish at the registered `jwksUri` (`alg`, `kid`, `use`)."""
        return {"keys": [{**self.key.public.to_dict(), "use": "sig"}]}

    def write_jwks(self, path: str | Path, *, parents: bool = False) -> Path:
        """Write `public_jwks()` to `path` atomically (for a static web host); see
        `write_jwks`."""
        return write_jwks(self.public_jwks(), path, parents=parents)

    def serve_jwks(
        self, host: str = "127.0.0.1", port: int = 0, *, path: str = DEFAULT_JWKS_PATH
    ) -> JwksHost:
        """Serve `public_jwks()` over plain HTTP from a thread (development and tests)."""
        return serve_jwks(self.public_jwks(), host, port, path=path)


def _with_kid(key: PrivateJWK, kid: str) -> PrivateJWK:
    return private_jwk_from_key(key.key, kid=kid)


@frozen
class AgentCredentials:
    """A signer bound to one user and one Provider audience; call it for a fresh JWT.

    The clients call it once per request, retries included, so tokens never go stale.
    """

    signer: AgentSigner
    sub: str
    audience: str
    ttl: int = DEFAULT_TTL

    @property
    def issuer(self) -> str:
        """The personal agent's issuer: the OAuth `client_id` of the Delegated profile."""
        return self.signer.issuer

    def __call__(self) -> str:
        return self.signer.sign(self.sub, self.audience, self.ttl)


def write_jwks(document: Mapping[str, Any], path: str | Path, *, parents: bool = False) -> Path:
    """Write a JWKS document atomically (a temporary file beside it, then a rename), readable
    by everyone (mode 0644: the web server publishes it).

    A missing folder is created only with `parents=True` (as `pactmw keygen --parents`);
    otherwise `FileNotFoundError`. Every `OSError` names `path` as given, not the temporary
    file."""
    text = json.dumps(document, separators=(",", ":"))
    return write_file_atomically(path, text, 0o644, parents=parents)


class _JwksHandler(http.server.BaseHTTPRequestHandler):
    server: _JwksHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == self.server.jwks_path:
            body = self.server.body
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "public, max-age=300")
        else:
            body = b"not found"
            self.send_response(404)
            self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _JwksHTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    jwks_path: str
    body: bytes


class JwksHost:
    """A JWKS served over HTTP by a thread: `url` is the JWKS URL; `close()` stops it.

    For development and tests: plain HTTP, which Providers accept only on loopback.
    """

    def __init__(
        self,
        document: Mapping[str, Any],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        path: str = DEFAULT_JWKS_PATH,
    ) -> None:
        self._server = _JwksHTTPServer((host, port), _JwksHandler)
        self._server.jwks_path = path if path.startswith("/") else "/" + path
        self.update(document)
        bound_host, bound_port = self._server.server_address[:2]
        host_text = bound_host.decode() if isinstance(bound_host, bytes) else str(bound_host)
        shown = f"[{host_text}]" if ":" in host_text else host_text
        self.base_url = f"http://{shown}:{bound_port}"
        self.url = self.base_url + self._server.jwks_path
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"pactmw-jwks:{bound_port}",
            daemon=True,
        )
        self._thread.start()

    def update(self, document: Mapping[str, Any]) -> None:
        """Serve another document from now on (key rotation)."""
        self._server.body = json.dumps(document, separators=(",", ":")).encode()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> JwksHost:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def serve_jwks(
    document: Mapping[str, Any] | Sequence[AgentSigner],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    path: str = DEFAULT_JWKS_PATH,
) -> JwksHost:
    """Serve a JWKS document (or the public keys of several signers, for rotation)."""
    if not isinstance(document, Mapping):
        document = {"keys": [key for signer in document for key in signer.public_jwks()["keys"]]}
    return JwksHost(document, host, port, path=path)


__all__ = [
    "AGENT_ALGORITHMS",
    "DEFAULT_JWKS_PATH",
    "DEFAULT_TTL",
    "MAX_TTL",
    "AgentCredentials",
    "AgentSigner",
    "JwksHost",
    "serve_jwks",
    "write_jwks",
]
