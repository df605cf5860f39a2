"""The Poppy company side of the Provider (docs/poppy.md): a Brand's `PoppyConfig`, and the
`PoppyServer` that publishes its discovery documents and runs its device authorization,
token and revocation endpoints over the store, and Operations v1 (`OperationsConfig`,
`Proposal`, `Performed`, `OperationFailed`, `OutcomeUnknown`). Wire formats are
`pactmw.protocols.poppy`'s."""

from __future__ import annotations

from pactmw.provider.poppy._companies import DeviceSignIn, issuer_url, poppy_companies
from pactmw.provider.poppy._config import PoppyConfig
from pactmw.provider.poppy._operation_values import (
    DEFAULT_PROPOSAL_SECONDS,
    JsonAnswer,
    OperationFailed,
    OperationRun,
    OperationsConfig,
    OutcomeUnknown,
    Performed,
    Proposal,
)
from pactmw.provider.poppy._operations import PoppyOperations
from pactmw.provider.poppy._server import METADATA_PREFIX, PoppyRoute, PoppyServer
from pactmw.provider.poppy._session_check import (
    PoppyCaller,
    check_session_brand,
    session_brand_problem,
)

__all__ = [
    "DEFAULT_PROPOSAL_SECONDS",
    "METADATA_PREFIX",
    "DeviceSignIn",
    "JsonAnswer",
    "OperationFailed",
    "OperationRun",
    "OperationsConfig",
    "OutcomeUnknown",
    "Performed",
    "PoppyCaller",
    "PoppyConfig",
    "PoppyOperations",
    "PoppyRoute",
    "PoppyServer",
    "Proposal",
    "check_session_brand",
    "issuer_url",
    "poppy_companies",
    "session_brand_problem",
]
