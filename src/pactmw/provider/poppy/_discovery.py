"""`poppy.json` by `Host` (§3.1): the document of the Brand that publishes on the request's
host, served, never redirected to (PAP-3.1-02)."""

from __future__ import annotations

from collections.abc import Mapping

from pactmw.core.http import Response
from pactmw.protocols.poppy import PoppyError
from pactmw.provider.poppy._brands import PoppyBrand


def host_name(host: str | None) -> str:
    """The host name of a `Host` header: lower-cased, port and a final dot removed; "" for
    an IPv6 literal (never a Poppy domain) or nothing."""
    name = (host or "").strip().lower()
    if name.startswith("["):
        return ""
    return name.rsplit(":", 1)[0].rstrip(".") if ":" in name else name.rstrip(".")


class Discovery:
    """Finds the `poppy.json` a `Host` is served (port ignored, case-insensitive)."""

    def __init__(self, brands: Mapping[str, PoppyBrand]) -> None:
        self._brands = brands
        # `poppy_companies` refused a domain claimed twice, so each has one Brand.
        self._by_domain = {
            domain: brand for brand in brands.values() for domain in brand.company.poppy_domains
        }

    def discovery(self, host: str | None) -> Response:
        """The document for `host`; 404 when no Brand publishes on that host."""
        name = host_name(host)
        brand = self._by_domain.get(name)
        if brand is None:
            raise PoppyError(404, "not_found", "no Company on this host")
        return brand.documents[name]

    def brand_discovery(self, brand_id: str, host: str | None) -> Response:
        """One Brand's document for `host`, which must be one of its domains (a document
        naming another host fails the agent's check, PAP-3.1-02)."""
        name = host_name(host)
        document = self._brands[brand_id].documents.get(name)
        if document is None:
            raise PoppyError(404, "not_found", "this Brand publishes no poppy.json here")
        return document


__all__ = [
    "Discovery",
    "host_name",
]
