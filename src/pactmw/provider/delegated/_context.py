"""What every part of the authorization server shares: where it lives, its store, keys, clock."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from urllib.parse import urlsplit

from attrs import frozen

from pactmw.core.http import Request
from pactmw.protocols.delegation import SigningKeys
from pactmw.provider.brand import Brand
from pactmw.provider.card import interface_url
from pactmw.provider.delegated._audit import Audit
from pactmw.store.base import Store


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a URL as it is written: what a page shows of an agent
    (`serialized_origin` is what a browser sends as `Origin`)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


_DEFAULT_PORTS = {"http": 80, "https": 443}


def serialized_origin(url: str) -> str:
    """The origin of an http(s) `url` as a browser sends it in `Origin` (RFC 6454 §6.1):
    scheme and host in lower case, the host in IDNA, no default port. So a `base_url`
    written "https://Shop.Example:443" still matches the browser's "https://shop.example"."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if not host.isascii():
        # A host IDNA cannot encode stays as it is: no browser sends it, nothing matches it.
        with contextlib.suppress(UnicodeError):
            host = host.encode("idna").decode("ascii")
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    shown = "" if port is None or port == _DEFAULT_PORTS.get(scheme) else f":{port}"
    return f"{scheme}://{host}{shown}"


@frozen
class ServerContext:
    """The one shared, immutable context of the authorization server's collaborators."""

    base_url: str  # without a trailing slash
    store: Store
    keys: SigningKeys
    clock: Callable[[], float]
    audit: Audit

    def interface(self, brand: Brand) -> str:
        return interface_url(self.base_url, brand.id)

    def url(self, brand: Brand, path: str) -> str:
        """An absolute URL under the Brand's authorization server (`{interface}/oauth/...`)."""
        return f"{self.interface(brand)}/oauth/{path}"

    def same_origin(self, request: Request) -> bool:
        """Whether a page's form post did not come from another site: its `Origin`, when the
        browser sends one, is the server's own. A repeated `Origin` is no browser's (it sends
        one): refused, never read as missing (as `Request.header` reads a repeated header),
        which would let it pass; WSGI servers join the lines into one value, refused too."""
        origins = [value for name, value in request.headers if name == "origin"]
        return not origins or origins == [serialized_origin(self.base_url)]


__all__ = [
    "ServerContext",
    "origin_of",
    "serialized_origin",
]
