"""A real HTTP(S) server on 127.0.0.1 for tests that fetch key material.

`JwksServer` serves a JWKS document (and any other JSON documents you register) from a free
port, counts requests per path, and can be switched at runtime into failure modes: HTTP 500,
a slow answer, a body that trickles in byte by byte, garbage, an oversized body, a redirect, or
no listener at all. It is meant to be shared by every test that needs a key server (core,
protocols and adapter tests), so it depends only on the standard library and `cryptography`.

Typical use::

    from tests.support.jwks_server import JwksServer, Mode

    with JwksServer(keys=public_key_set([signing_key]).to_dict()) as server:
        cache = JwksCache(FetchPolicy(allow_http_on_loopback=True))
        cache.get_keys(server.url, kid, "ES256")
        assert server.hits[server.jwks_path] == 1
        server.mode = Mode.FAIL           # every path now answers 500
        server.mode = Mode.DOWN           # the port stops listening (connection refused)
        server.mode = Mode.OK             # listening again, on the same port

`mode`, `delay`, `send_content_length`, `extra_headers` and the documents may be changed at any
time from the test thread; the handler threads read them per request. `tls=True` serves https
with a throwaway self-signed certificate for 127.0.0.1/localhost; point `SSL_CERT_FILE` at
`ca_file` (e.g. `monkeypatch.setenv("SSL_CERT_FILE", server.ca_file)`) so that
`ssl.create_default_context()` trusts it. `server_context=` serves https with a context of
the test's own instead (a `trustme` CA's certificate for names such as `agent.example`, reached
through `FetchPolicy.connect_to`).
"""

from __future__ import annotations

import enum
import http.server
import json
import shutil
import ssl
import tempfile
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.support.keys import private_pem, self_signed_certificate

__all__ = ["DEFAULT_JWKS_PATH", "JwksServer", "Mode"]

DEFAULT_JWKS_PATH = "/.well-known/jwks.json"


class Mode(str, enum.Enum):
    """How the server answers every request (all paths alike)."""

    OK = "ok"  #: 200 with the registered document, 404 for unknown paths
    FAIL = "fail"  #: 500 with a short text body
    SLOW = "slow"  #: wait `delay` seconds, then answer as OK
    DRIP = "drip"  #: status and headers at once, then the body one byte every `delay` seconds
    DRIP_HEADERS = "drip_headers"  #: the status line, then header bytes one every `delay` s
    GARBAGE = "garbage"  #: 200 with a body that is not JSON
    OVERSIZED = "oversized"  #: 200 with `oversized_bytes` of JSON-looking padding
    REDIRECT = "redirect"  #: 302 to `redirect_location`
    DOWN = "down"  #: nothing listens on the port: connections are refused


class _Handler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so a body without Content-Length ends at close.
    protocol_version = "HTTP/1.0"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.owner._serve(self)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    owner: JwksServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that give up early (timeouts, size limits) are the point of these tests.
        pass


class JwksServer:
    """A real HTTP(S) server on 127.0.0.1 serving a swappable JWKS; see the module docstring.

    Attributes a test may set at any time:

    * `mode` (`Mode`): how every request is answered. Setting `Mode.DOWN` closes the
      listening socket; setting any other mode afterwards listens again on the same port.
    * `delay` (seconds): the wait of `Mode.SLOW` and the per-byte pace of the `DRIP` modes.
    * `send_content_length`: when False, bodies are sent without `Content-Length` and end when
      the connection closes.
    * `oversized_bytes`: the body size of `Mode.OVERSIZED`.
    * `redirect_location`: where `Mode.REDIRECT` points (default: `/moved/jwks.json` on this
      server, which serves the JWKS too, so a followed redirect would show up in `hits`).
    * `extra_headers`: headers added to every 200 answer (e.g. `Cache-Control`).
    """

    def __init__(
        self,
        keys: Mapping[str, Any] | Any | None = None,
        *,
        tls: bool = False,
        jwks_path: str = DEFAULT_JWKS_PATH,
        server_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = "127.0.0.1"
        self.jwks_path = jwks_path
        # A given `server_context` (e.g. a trustme CA's leaf for made-up names) serves https.
        self.tls = tls or server_context is not None
        self.delay = 1.0
        self.send_content_length = True
        self.oversized_bytes = 1024 * 1024
        self.extra_headers: dict[str, str] = {}
        self._lock = threading.Lock()
        self._hits: Counter[str] = Counter()
        self._documents: dict[str, tuple[bytes, str]] = {}
        self._stopping = threading.Event()
        self._mode = Mode.OK
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._tmpdir: str | None = None
        self._ssl_context: ssl.SSLContext | None = server_context
        if tls and server_context is None:
            self._tmpdir = tempfile.mkdtemp(prefix="jwks-server-")
            self._ssl_context = self._make_certificate(Path(self._tmpdir))
        self.set_keys(keys if keys is not None else {"keys": []})
        self.port = 0
        self._start_listening()
        self.redirect_location = self.url_for("/moved/jwks.json")

    # -- addresses ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT` (or https with `tls=True`), without a trailing slash."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The JWKS URL."""
        return self.url_for(self.jwks_path)

    def url_for(self, path: str) -> str:
        """The absolute URL of `path` on this server."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    @property
    def ca_file(self) -> str:
        """The PEM certificate a client must trust to reach a `tls=True` server."""
        if self._tmpdir is None:
            raise RuntimeError("ca_file exists only for JwksServer(tls=True)")
        return str(Path(self._tmpdir) / "cert.pem")

    # -- what is served ----------------------------------------------------------------------

    def set_keys(self, keys: Mapping[str, Any] | Any) -> None:
        """Serve `keys` at `jwks_path`: a JWKS dict (`{"keys": [...]}`) or a `KeySet`."""
        document = keys.to_dict() if hasattr(keys, "to_dict") else keys
        self.set_json(self.jwks_path, document)
        self.set_json("/moved/jwks.json", document)

    def set_json(self, path: str, document: Any) -> None:
        """Serve `document` (any JSON value) as `application/json` at `path`."""
        self.set_body(path, json.dumps(document).encode(), "application/json")

    def set_body(self, path: str, body: bytes, content_type: str = "application/json") -> None:
        """Serve raw `body` bytes at `path` (OK mode)."""
        with self._lock:
            self._documents[path] = (body, content_type)

    # -- request accounting ------------------------------------------------------------------

    @property
    def hits(self) -> Counter[str]:
        """A snapshot of the number of requests received per path (query strings dropped)."""
        with self._lock:
            return Counter(self._hits)

    @property
    def total_hits(self) -> int:
        """The number of requests received on every path."""
        with self._lock:
            return sum(self._hits.values())

    def reset_hits(self) -> None:
        with self._lock:
            self._hits.clear()

    def reset(self) -> None:
        """Back to the defaults (OK mode, listening, no extra headers, hits cleared).

        The documents are kept: call `set_keys` / `set_json` to change them.
        """
        self.mode = Mode.OK
        self.delay = 1.0
        self.send_content_length = True
        self.oversized_bytes = 1024 * 1024
        self.extra_headers = {}
        self.redirect_location = self.url_for("/moved/jwks.json")
        self.reset_hits()

    # -- mode --------------------------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self._mode

    @mode.setter
    def mode(self, mode: Mode | str) -> None:
        mode = Mode(mode)
        if mode is Mode.DOWN and self._httpd is not None:
            self._stop_listening()
        elif mode is not Mode.DOWN and self._httpd is None:
            self._start_listening()
        self._mode = mode

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening, wake any sleeping handler and remove the certificate files."""
        self._stopping.set()
        if self._httpd is not None:
            self._stop_listening()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self) -> JwksServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _start_listening(self) -> None:
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.owner = self
        if self._ssl_context is not None:
            httpd.socket = self._ssl_context.wrap_socket(httpd.socket, server_side=True)
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"JwksServer:{self.port}",
            daemon=True,
        )
        self._thread.start()

    def _stop_listening(self) -> None:
        assert self._httpd is not None
        assert self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def _make_certificate(self, directory: Path) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self_signed_certificate(
            key, "127.0.0.1", ip_addresses=["127.0.0.1"], dns_names=["localhost"], ca=True
        )
        cert_path, key_path = directory / "cert.pem", directory / "key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(private_pem(key))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)
        return context

    # -- the handler body (runs in a server thread) ------------------------------------------

    def _serve(self, handler: _Handler) -> None:
        path = urlsplit(handler.path).path
        with self._lock:
            self._hits[path] += 1
            document = self._documents.get(path)
        mode = self._mode
        if mode is Mode.SLOW:
            if self._stopping.wait(self.delay):
                return
            mode = Mode.OK
        if mode is Mode.FAIL:
            self._send(handler, 500, b"internal error", "text/plain")
        elif mode is Mode.REDIRECT:
            handler.send_response(302)
            handler.send_header("Location", self.redirect_location)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        elif mode is Mode.GARBAGE:
            self._send(handler, 200, b"<html>this is not a JWKS</html>", "application/json")
        elif mode is Mode.OVERSIZED:
            body = b'{"keys":[],"padding":"' + b"x" * self.oversized_bytes + b'"}'
            self._send(handler, 200, body, "application/json")
        elif mode is Mode.DRIP_HEADERS:
            self._drip_headers(handler, document)
        elif document is None:
            self._send(handler, 404, b"not found", "text/plain")
        elif mode is Mode.DRIP:
            self._drip_body(handler, *document)
        else:
            self._send(handler, 200, *document)

    def _send(self, handler: _Handler, status: int, body: bytes, content_type: str) -> None:
        self._start(handler, status, body, content_type)
        handler.wfile.write(body)

    def _start(self, handler: _Handler, status: int, body: bytes, content_type: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        if status == 200:
            for name, value in self.extra_headers.items():
                handler.send_header(name, value)
        if self.send_content_length:
            handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.flush()

    def _drip_body(self, handler: _Handler, body: bytes, content_type: str) -> None:
        self._start(handler, 200, body, content_type)
        for index in range(len(body)):
            if self._stopping.wait(self.delay):
                return
            handler.wfile.write(body[index : index + 1])
            handler.wfile.flush()

    def _drip_headers(self, handler: _Handler, document: tuple[bytes, str] | None) -> None:
        body = document[0] if document is not None else b"{}"
        head = f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        handler.wfile.write(b"HTTP/1.0 200 OK\r\n")
        handler.wfile.flush()
        for index in range(len(head)):
            if self._stopping.wait(self.delay):
                return
            handler.wfile.write(head[index : index + 1].encode())
            handler.wfile.flush()
        handler.wfile.write(body)
