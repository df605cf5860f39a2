"""The Poppy company side of the Provider (docs/poppy.md): a Brand's `PoppyConfig`, and the
`PoppyServer` that publishes its discovery documents and runs its device authorization,
token and revocation endpoints over the store. Wire formats are `pactmw.protocols.poppy`'s."""

from __future__ import annotations

from pactmw.provider.poppy._companies import DeviceSignIn, issuer_url, poppy_companies
from pactmw.provider.poppy._config import PoppyConfig
from pactmw.provider.poppy._server import METADATA_PREFIX, PoppyRoute, PoppyServer
from pactmw.provider.poppy._session_check import PoppyCaller

__all__ = [
    "METADATA_PREFIX",
    "DeviceSignIn",
    "PoppyCaller",
    "PoppyConfig",
    "PoppyRoute",
    "PoppyServer",
    "issuer_url",
    "poppy_companies",
]
