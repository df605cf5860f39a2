"""A throwaway certificate authority (trustme) for https servers on 127.0.0.1 under made-up
names, and the `FetchPolicy` that reaches them without weakening verification.

Poppy clients insist on HTTPS with real names (`agent.example`), so tests serve those names
from 127.0.0.1 with a leaf of this CA, and pactmw's fetcher trusts the CA (`tls_context`) and
dials 127.0.0.1 for the names (`connect_to`), with loopback allowed by `allowed_networks`.
"""

from __future__ import annotations

import ipaddress
import ssl

import trustme

from pactmw.core.fetch import FetchPolicy

__all__ = ["LOOPBACK_NETWORK", "TestCA"]

LOOPBACK_NETWORK = ipaddress.ip_network("127.0.0.0/8")


class TestCA:
    """A CA, its server contexts for names, and client-side trust."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.ca = trustme.CA()

    def server_context(self, *names: str) -> ssl.SSLContext:
        """A TLS server context with a leaf certificate for `names`."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ca.issue_cert(*names).configure_cert(context)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts this CA only (hostname checks on)."""
        context = ssl.create_default_context()
        context.load_verify_locations(cadata=self.ca.cert_pem.bytes().decode("ascii"))
        return context

    def policy(self, port: int, *names: str, **options: object) -> FetchPolicy:
        """A policy trusting this CA and connecting each of `names` to 127.0.0.1:`port`."""
        return FetchPolicy(
            tls_context=self.client_context(),
            connect_to={name: ("127.0.0.1", port) for name in names},
            allowed_networks=(LOOPBACK_NETWORK,),
            **options,  # type: ignore[arg-type]
        )
