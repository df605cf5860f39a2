"""Parafé consent for a Brand's bot and for an app's own endpoints.

The protocol is `pactmw.protocols.parafe` (checks, receipts, message data); this package wires
it to the Provider and the adapters (parafe-verifier.md §4, §7, §8, §11):

- `ParafeConfig`: what `[brands.X.parafe]` says (agent id, broker, receipt key, scopes, ...);
- `ParafeAgent`: the runtime of one configured agent: broker keys, the verifier with its
  replay memory in the Store, the receipt signer, closed sessions, receipt filing;
- `ParafeTurn`: `turn.parafe` in a bot (and `request.parafe` behind `@parafe_action`):
  `require(action)` verifies the message's consent for one action and records its receipt;
- `ParafeRefused`: the refusal `require` raises, which the Provider renders as the reply.

Consent tokens, proofs and the broker credential are never logged and never handed to the
bot: it sees a `ParafeConsent` (claims, session, permissions, modality, proof_verified).

The modules, one concern each: `_config` (`ParafeConfig`), `_consent` (what `require` gives
or raises), `_turn` (`ParafeTurn`) with `_check` (its consent checks), `_receipts` (its
receipts) and `_reply` (the reply's Parafé data), `_agent` (`ParafeAgent`) with `_sessions`
(closed sessions), `_broker` (HTTP to the broker as the agent, with retries), `_handshake`
and `_filer` (`ReceiptFiler`, and the acknowledgments it keeps), and `_endpoint` (what the
adapters' `@parafe_action` shares).
"""

from __future__ import annotations

from pactmw.provider.parafe._agent import ParafeAgent
from pactmw.provider.parafe._config import (
    DEFAULT_DESCRIPTION,
    HandshakeCompleter,
    ParafeConfig,
    RefusalMode,
)
from pactmw.provider.parafe._consent import ParafeConsent, ParafeRefused
from pactmw.provider.parafe._endpoint import (
    REQUEST_KEY,
    add_receipts_to_json,
    endpoint_message,
    reply_extensions,
    select_agent,
)
from pactmw.provider.parafe._filer import (
    AcknowledgmentLog,
    Filing,
    MemoryAcknowledgments,
    ReceiptFiler,
)
from pactmw.provider.parafe._handshake import HANDSHAKE_COMPLETE_PATH
from pactmw.provider.parafe._reply import handshake_data, refusal_task
from pactmw.provider.parafe._sessions import CLOSED_SESSION_MEMORY
from pactmw.provider.parafe._turn import ParafeTurn

__all__ = [
    "CLOSED_SESSION_MEMORY",
    "DEFAULT_DESCRIPTION",
    "HANDSHAKE_COMPLETE_PATH",
    "REQUEST_KEY",
    "AcknowledgmentLog",
    "Filing",
    "HandshakeCompleter",
    "MemoryAcknowledgments",
    "ParafeAgent",
    "ParafeConfig",
    "ParafeConsent",
    "ParafeRefused",
    "ParafeTurn",
    "ReceiptFiler",
    "RefusalMode",
    "add_receipts_to_json",
    "endpoint_message",
    "handshake_data",
    "refusal_task",
    "reply_extensions",
    "select_agent",
]
