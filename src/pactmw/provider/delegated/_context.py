"""What every part of the authorization server shares: where it lives, its store, keys, clock."""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from pactmw.protocols.delegation import SigningKeys
from pactmw.provider.brand import Brand
from pactmw.provider.card import interface_url
from pactmw.provider.delegated._audit import Audit
from pactmw.store.base import Store


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


__all__ = [
    "ServerContext",
]
