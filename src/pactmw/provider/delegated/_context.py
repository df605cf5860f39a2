"""What every part of the authorization server shares: where it lives, its store, keys, clock."""

from __future__ import annotations

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
    """`scheme://host[:port]` of a URL: what a page shows of an agent, and what a browser
    sends as `Origin`."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


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
        browser sends one, is the server's own."""
        origin = request.header("origin")
        return origin is None or origin == origin_of(self.base_url)


__all__ = [
    "ServerContext",
    "origin_of",
]
