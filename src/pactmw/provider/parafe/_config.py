"""`ParafeConfig`: what `[brands.X.parafe]` says (agent id, broker, receipt key, scopes, ...)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from attrs import field, frozen

from pactmw.core.errors import MalformedInput
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import PrivateJWK
from pactmw.protocols.parafe import (
    AP2_CHECKOUT_MANDATE_KEY,
    AP2_CHECKOUT_RECEIPT_KEY,
    AP2_PAYMENT_MANDATE_KEY,
    AP2_PAYMENT_RECEIPT_KEY,
    DEFAULT_BROKER_URL,
    BrokerRetry,
    CardExtension,
    HandshakeChallenge,
    HandshakeComplete,
    ScopeRequirement,
    agent_did,
    ap2_card_extension,
    card_extension,
)
from pactmw.protocols.parafe._broker import trusted_broker_url

if TYPE_CHECKING:
    from pactmw.provider.parafe._agent import ParafeAgent

#: The card entry's description by default (the seed's example text).
DEFAULT_DESCRIPTION = "Parafé brokered trust: mutual authentication and scoped consent"

RefusalMode = Literal["message", "task"]
#: The AP2 artifacts a `message:send` may carry in data parts when the agent declares AP2.
AP2_DATA_KEYS = frozenset(
    {
        AP2_CHECKOUT_MANDATE_KEY,
        AP2_PAYMENT_MANDATE_KEY,
        AP2_CHECKOUT_RECEIPT_KEY,
        AP2_PAYMENT_RECEIPT_KEY,
    }
)
#: Completes a handshake with the broker, overriding the built-in completion
#: (`ParafeAgent.complete_handshake`).
HandshakeCompleter = Callable[[HandshakeChallenge, "ParafeAgent"], HandshakeComplete]


def _requirements(
    value: Mapping[str, ScopeRequirement | Mapping[str, Any]],
) -> Mapping[str, ScopeRequirement]:
    out: dict[str, ScopeRequirement] = {}
    for name, entry in value.items():
        try:
            out[str(name)] = (
                entry if isinstance(entry, ScopeRequirement) else ScopeRequirement.from_dict(entry)
            )
        except MalformedInput as exc:
            raise ValueError(f"scope_requirements.{name}: {exc}") from exc
    return MappingProxyType(out)


@frozen
class ParafeConfig:
    """One agent's Parafé settings (a Brand's `[brands.X.parafe]`, or built in Python).

    `agent_id` is this agent's Parafé id (`prf_agent_...`): tokens must name it. `broker_url`
    is the one broker trusted (https; http to loopback only with
    `allow_http_broker_on_loopback`, for tests). `signing_key` is the agent's registered
    Ed25519 or P-256 key: it signs action receipts (none without it) and request proofs to the
    broker; `agent_did` defaults to `did:web:api.parafe.ai:agents:<agent_id>`. `required`
    goes on the card: True turns away requests that do not activate Parafé. `online` asks the
    broker (`POST /consent/verify`) for every scope, `online_scopes` for those only.
    `refusal` renders refusals as an agent message or as a task. `file_receipts` files every
    receipt with the broker in the background (needs `credential`, the agent's broker
    credential). Handshake challenges are completed with the broker by
    `ParafeAgent.complete_handshake` (needs `signing_key` and `credential`); `handshake`
    overrides it (see `HandshakeCompleter`). `broker_retry` says when a handshake completion
    or a filing is tried again. `ap2` lists the AP2 extension on the card beside Parafé's
    (the agent takes AP2 mandates and answers them with AP2 receipts: `ParafeTurn.ap2`).
    Raises `ValueError` for values other agents or the broker would refuse.
    """

    agent_id: str
    scope_requirements: Mapping[str, ScopeRequirement] = field(
        factory=dict, converter=_requirements
    )
    broker_url: str = DEFAULT_BROKER_URL
    signing_key: PrivateJWK | None = field(default=None, repr=False)
    agent_did: str | None = None
    required: bool = False
    minimum_identity_assurance: str = "self_registered"
    online: bool = False
    online_scopes: frozenset[str] = frozenset()
    require_proof: bool = True
    allow_http_broker_on_loopback: bool = False
    refusal: RefusalMode = "message"
    file_receipts: bool = False
    credential: str | None = field(default=None, repr=False)
    handshake: HandshakeCompleter | None = field(default=None, repr=False, eq=False)
    description: str | None = DEFAULT_DESCRIPTION
    broker_timeout: float = 5.0
    broker_retry: BrokerRetry = field(factory=BrokerRetry)
    ap2: bool = False

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.agent_id, str) or not self.agent_id:
            raise ValueError("agent_id must be the agent's Parafé id (prf_agent_...)")
        if self.signing_key is not None and self.signing_key.alg not in ("ES256", "EdDSA"):
            raise ValueError("signing_key must be the agent's Ed25519 or P-256 key")
        if self.agent_did is not None and not self.agent_did.startswith("did:"):
            raise ValueError("agent_did must be a DID")
        if self.refusal not in ("message", "task"):
            raise ValueError("refusal must be 'message' or 'task'")
        unknown = sorted(self.online_scopes - set(self.scope_requirements))
        if unknown:
            raise ValueError(f"online names scopes not in scope_requirements: {unknown}")
        if self.file_receipts and (self.signing_key is None or not self.credential):
            raise ValueError("file_receipts needs signing_key and the broker credential")
        if not self.broker_timeout > 0:
            raise ValueError("broker_timeout must be positive")
        # The table's own name for the loopback switch, not the fetch policy's.
        trusted_broker_url(self.broker_url, self.fetch_policy(), "allow_http_broker_on_loopback")
        self.card_extension()  # refuses what other agents' parsers would

    @property
    def did(self) -> str:
        """The agent's DID (the `iss` of its receipts)."""
        return self.agent_did or agent_did(self.agent_id)

    def fetch_policy(self) -> FetchPolicy:
        return FetchPolicy(
            timeout=self.broker_timeout, allow_http_on_loopback=self.allow_http_broker_on_loopback
        )

    def card_extension(self) -> CardExtension:
        return card_extension(
            agent_id=self.agent_id,
            scope_requirements=self.scope_requirements,
            broker_url=self.broker_url,
            minimum_identity_assurance=self.minimum_identity_assurance,
            required=self.required,
            description=self.description,
        )

    def card_entry(self) -> dict[str, Any]:
        """The Parafé entry of the agent card's `capabilities.extensions`."""
        return self.card_extension().to_dict()

    @property
    def data_keys(self) -> frozenset[str]:
        """The data-part keys of the extensions this agent declares, which its
        `message:send` accepts beside the text: AP2's artifacts when `ap2` is set."""
        return AP2_DATA_KEYS if self.ap2 else frozenset()

    def card_entries(self) -> list[dict[str, Any]]:
        """Every entry this agent adds to `capabilities.extensions`: Parafé's, then AP2's
        when `ap2` is set."""
        return [self.card_entry(), *([ap2_card_extension()] if self.ap2 else [])]

    def online_for(self, scope: str) -> bool:
        return self.online or scope in self.online_scopes


__all__ = [
    "AP2_DATA_KEYS",
    "DEFAULT_DESCRIPTION",
    "HandshakeCompleter",
    "ParafeConfig",
    "RefusalMode",
]
