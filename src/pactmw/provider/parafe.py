"""Parafé consent for a Brand's bot and for an app's own endpoints.

The protocol is `pactmw.protocols.parafe` (checks, receipts, message data); this module wires
it to the Provider and the adapters (parafe-verifier.md §4, §7, §8, §11):

- `ParafeConfig`: what `[brands.X.parafe]` says (agent id, broker, receipt key, scopes, ...);
- `ParafeAgent`: the runtime of one configured agent: broker keys, the verifier with its
  replay memory in the Store, the receipt signer, closed sessions, receipt filing;
- `ParafeTurn`: `turn.parafe` in a bot (and `request.parafe` behind `@parafe_action`):
  `require(action)` verifies the message's consent for one action and records its receipt;
- `ParafeRefused`: the refusal `require` raises, which the Provider renders as the reply.

Consent tokens, proofs and the broker credential are never logged and never handed to the
bot: it sees a `ParafeConsent` (claims, session, permissions, modality, proof_verified).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urlsplit

from attrs import evolve, field, frozen
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from pactmw.core.encoding import is_ascii_digits, json_dumps, json_loads
from pactmw.core.errors import FetchError, MalformedInput, PactmwError
from pactmw.core.fetch import FetchPolicy, http_request
from pactmw.core.http import Response
from pactmw.core.jose import sign_bytes, sign_compact
from pactmw.core.jwk import PrivateJWK
from pactmw.protocols.parafe import (
    DEFAULT_BROKER_URL,
    EXTENSION_URI,
    INVALID_CONSENT_TOKEN,
    MAX_ACTION_RECEIPTS,
    BrokerKeys,
    CardExtension,
    Consent,
    ConsentClaims,
    HandshakeChallenge,
    HandshakeComplete,
    KeySource,
    MemoryReplayMemory,
    OnlineVerification,
    ParafeData,
    ParafeError,
    ParafeVerifier,
    ReceiptSigner,
    ReceiptVerifier,
    ReplayMemory,
    ScopeRequirement,
    SessionClosed,
    SessionReceipt,
    StoreReplayMemory,
    VerifiedConsent,
    agent_did,
    card_extension,
    error_reply_data,
    read_consent,
    read_parafe,
    with_action_receipts,
    with_parafe,
)

if TYPE_CHECKING:
    from pactmw.store.base import Store

logger = logging.getLogger("pactmw.provider.parafe")

#: Where adapters put the `ParafeTurn` of a request (`scope`/`environ` key).
REQUEST_KEY = "pactmw.parafe"
#: A session closed by a verified `session_closed` is remembered this long: its tokens are
#: refused even offline (they last 5 minutes; a day is plenty, and bounded).
CLOSED_SESSION_MEMORY = 24 * 3600.0
_CLOSED_NAMESPACE = "parafe.closed_session"
_POP_TYP = "parafe-pop+jwt"
_MAX_ENDPOINT_BODY = 1024 * 1024
_UNSET: Any = object()
#: The card entry's description by default (the seed's example text).
DEFAULT_DESCRIPTION = "Parafé brokered trust: mutual authentication and scoped consent"

RefusalMode = Literal["message", "task"]
#: Completes a handshake with the broker, overriding the built-in completion
#: (`ParafeAgent.complete_handshake`).
HandshakeCompleter = Callable[[HandshakeChallenge, "ParafeAgent"], HandshakeComplete]
#: The broker's handshake completion (the reference SDK's `completeHandshake`).
HANDSHAKE_COMPLETE_PATH = "/handshake/complete"
_MAX_BROKER_TEXT = 500


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
    overrides it (see `HandshakeCompleter`).
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
        BrokerKeys(self.broker_url, fetch_policy=self.fetch_policy())  # checks the URL
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
        """The entry of the agent card's `capabilities.extensions`."""
        return self.card_extension().to_dict()

    def online_for(self, scope: str) -> bool:
        return self.online or scope in self.online_scopes


@frozen
class ParafeConsent:
    """What the bot sees of a verified consent (never the token or the proof).

    `claims` are the broker-signed token claims (`claims.claims` the whole payload, parties and
    `mandate_refs` included). `online_verified` is True when the broker confirmed it too.
    """

    action: str
    session_id: str
    scope: str
    permissions: tuple[Any, ...]
    exclusions: tuple[Any, ...]
    modality: str | None
    initiator: str | None
    proof_verified: bool
    online_verified: bool
    consent_ref: str
    claims: ConsentClaims = field(repr=False)


class ParafeRefused(PactmwError):
    """`turn.parafe.require(action)` refused: the reply becomes the refusal.

    `error` is the `ParafeError` (`code`, `message`, `task_state`), `receipt` the signed
    refusal receipt (None when the message carried no consent to bind it to).
    """

    def __init__(self, error: ParafeError, action: str, receipt: str | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.action = action
        self.receipt = receipt

    @property
    def code(self) -> str:
        return self.error.code

    @property
    def message(self) -> str:
        return self.error.message

    @property
    def task_state(self) -> str:
        return self.error.task_state

    def __repr__(self) -> str:
        return f"ParafeRefused({self.error.code!r}, action={self.action!r})"


class _Entry:
    """One receipt of a turn: signed at once (refusals) or when the reply is built."""

    __slots__ = (
        "action",
        "business_ref",
        "description",
        "details",
        "error",
        "mandate_ref",
        "request_ref",
        "session_id",
        "signed",
        "token",
    )

    def __init__(self, action: str, session_id: str, token: str) -> None:
        self.action = action
        self.session_id = session_id
        self.token = token
        self.business_ref: str | None = None
        self.details: Any = _UNSET
        self.mandate_ref: str | None = None
        self.request_ref: str | None = None
        self.error: str | None = None
        self.description: str | None = None
        self.signed: str | None = None

    def __repr__(self) -> str:
        return f"_Entry({self.action!r}, error={self.error!r})"


def _online_checked(verified: VerifiedConsent, online: OnlineVerification) -> VerifiedConsent:
    # A 2xx answer may still say `valid: false` (parafe-verifier.md §8): refuse it.
    if not online.valid:
        raise ParafeError(
            INVALID_CONSENT_TOKEN,
            "Parafe consent token is invalid: the broker does not consider it valid.",
        )
    return evolve(verified, online=online)


def _session_closed_error() -> ParafeError:
    return ParafeError(
        INVALID_CONSENT_TOKEN,
        "Parafe consent token was refused: the session is closed; start a new handshake.",
    )


class ParafeTurn:
    """`turn.parafe`: Parafé for one incoming message.

    `require(action)` (`arequire` in async code) verifies the message's consent for `action`
    (token, then proof, once per message; the next actions only against the verified token),
    and records a success receipt, signed when the reply is built; `complete(action, ...)`
    sets its business reference or marks it failed. A refusal is signed at once and raised as
    `ParafeRefused`. `enabled` is False when the Brand has no Parafé configuration.
    """

    def __init__(self, agent: ParafeAgent | None, message: Any = None, *, activated: bool = False):
        self._agent = agent
        self._message = message
        #: The request activated the extension (header or `message.extensions`).
        self.activated = activated
        #: The `handshake_complete` this turn answered a challenge with, if any.
        self.handshake: HandshakeComplete | None = None
        #: The verified session receipt of a `session_closed` message, if any.
        self.session_closed: SessionReceipt | None = None
        self._entries: list[_Entry] = []
        self._verified: VerifiedConsent | None = None
        self._session_open = True
        self._online_done = False
        self._consent: ParafeConsent | None = None

    @property
    def enabled(self) -> bool:
        return self._agent is not None

    @property
    def consent(self) -> ParafeConsent | None:
        """The consent last verified in this turn, or None."""
        return self._consent

    def data(self) -> ParafeData | None:
        """The message's Parafé data (None when absent or malformed)."""
        try:
            return read_parafe(self._message)
        except ParafeError:
            return None

    @property
    def receipts(self) -> tuple[str, ...]:
        """The receipts signed so far (pending success receipts are signed by the reply)."""
        return tuple(entry.signed for entry in self._entries if entry.signed is not None)

    # -- require ---------------------------------------------------------------------------

    def _ready(self, action: str) -> ParafeAgent:
        if self._agent is None:
            raise RuntimeError("this Brand has no Parafé configuration ([brands.X.parafe])")
        if not isinstance(action, str) or not action:
            raise ValueError("action must be a non-empty string")
        if len(self._entries) >= MAX_ACTION_RECEIPTS:
            raise ValueError(f"at most {MAX_ACTION_RECEIPTS} Parafé actions fit in one turn")
        return self._agent

    def require(
        self,
        action: str,
        *,
        business_ref: str | None = None,
        details: Any = _UNSET,
        mandate_ref: str | None = None,
        request_ref: str | None = None,
    ) -> ParafeConsent:
        """Verify the consent for `action`; raises `ParafeRefused`. Blocking (fetches broker
        keys or DID documents when not cached); in async bots use `arequire`.

        `business_ref` (e.g. an order id), `details` (hashed, any JSON value) and
        `mandate_ref` go on the success receipt; set them later with `complete`.
        """
        agent = self._ready(action)
        try:
            verified = self._verify(agent, action)
        except ParafeError as exc:
            raise self._refuse(agent, exc, action) from None
        return self._accept(verified, action, business_ref, details, mandate_ref, request_ref)

    async def arequire(
        self,
        action: str,
        *,
        business_ref: str | None = None,
        details: Any = _UNSET,
        mandate_ref: str | None = None,
        request_ref: str | None = None,
    ) -> ParafeConsent:
        """Async `require`."""
        agent = self._ready(action)
        try:
            verified = await self._averify(agent, action)
        except ParafeError as exc:
            raise self._refuse(agent, exc, action) from None
        return self._accept(verified, action, business_ref, details, mandate_ref, request_ref)

    def _proof_for_online(self) -> str | None:
        # The proof goes to the broker with the message's first online check only: it is
        # single-use, and the broker may remember it too.
        if self._online_done:
            return None
        self._online_done = True
        try:
            return read_consent(self._message).proof
        except ParafeError:
            return None

    # Token and proof are checked once per message: the proof is spent as soon as they pass,
    # so that result is kept even when the broker or a closed session then refuses the
    # action; later actions are checked against the verified token alone.

    def _verify(self, agent: ParafeAgent, action: str) -> VerifiedConsent:
        first = self._verified
        if first is None:
            verified = self._verified = agent.verifier.verify(self._message, action=action)
            self._session_open = not agent.session_is_closed(verified.session_id)
        else:
            claims = agent.verifier.verify_token(
                first.consent_token, session_id=first.session_id, action=action
            )
            verified = evolve(first, claims=claims, action=action)
        if not self._session_open:
            raise _session_closed_error()
        if not agent.config.online_for(verified.claims.scope):
            return verified
        online = agent.verifier.verify_online(
            verified.consent_token,
            action=action,
            session_id=verified.session_id,
            proof=self._proof_for_online(),
        )
        return _online_checked(verified, online)

    async def _averify(self, agent: ParafeAgent, action: str) -> VerifiedConsent:
        first = self._verified
        if first is None:
            verified = await agent.verifier.averify(self._message, action=action)
            self._verified = verified
            closed = await asyncio.to_thread(agent.session_is_closed, verified.session_id)
            self._session_open = not closed
        else:
            claims = await agent.verifier.averify_token(
                first.consent_token, session_id=first.session_id, action=action
            )
            verified = evolve(first, claims=claims, action=action)
        if not self._session_open:
            raise _session_closed_error()
        if not agent.config.online_for(verified.claims.scope):
            return verified
        online = await agent.verifier.averify_online(
            verified.consent_token,
            action=action,
            session_id=verified.session_id,
            proof=self._proof_for_online(),
        )
        return _online_checked(verified, online)

    def _message_consent(self) -> Consent | None:
        try:
            return read_consent(self._message)
        except ParafeError:
            return None

    def _refuse(self, agent: ParafeAgent, error: ParafeError, action: str) -> ParafeRefused:
        consent = error.consent or self._message_consent()
        if error.consent is None:
            error.consent = consent  # what the refusal is bound to (and filed under)
        receipt: str | None = None
        if agent.signer is not None and consent is not None:
            receipt = agent.signer.refuse(error, action, consent)
            entry = _Entry(action, consent.session_id, consent.token)
            entry.signed = receipt
            self._entries.append(entry)
        # Codes only: the message may quote claims, and tokens never reach a log.
        logger.info("Parafé refused %s: %s", action, error.code)
        return ParafeRefused(error, action, receipt)

    def _accept(
        self,
        verified: VerifiedConsent,
        action: str,
        business_ref: str | None,
        details: Any,
        mandate_ref: str | None,
        request_ref: str | None,
    ) -> ParafeConsent:
        entry = _Entry(action, verified.session_id, verified.consent_token)
        entry.business_ref = business_ref
        entry.details = details
        entry.mandate_ref = mandate_ref
        entry.request_ref = request_ref
        self._entries.append(entry)
        claims = verified.claims
        self._consent = ParafeConsent(
            action=action,
            session_id=verified.session_id,
            scope=claims.scope,
            permissions=claims.permissions,
            exclusions=claims.exclusions,
            modality=claims.authorization_modality,
            initiator=claims.initiator,
            proof_verified=verified.proof_verified,
            online_verified=verified.online is not None and verified.online.valid,
            consent_ref=verified.consent_ref,
            claims=claims,
        )
        return self._consent

    def complete(
        self,
        action: str,
        *,
        business_ref: str | None = _UNSET,
        details: Any = _UNSET,
        mandate_ref: str | None = _UNSET,
        failed: str | None = None,
    ) -> None:
        """Update the receipt of the last `require(action)` of this turn: its business
        reference, details or mandate, or `failed="why"` when the permitted action failed
        (the receipt then says `error: failed`). Raises `LookupError` without one."""
        for entry in reversed(self._entries):
            if entry.action == action and entry.signed is None:
                break
        else:
            raise LookupError(f"no unsigned receipt for {action!r}: call require() first")
        if business_ref is not _UNSET:
            entry.business_ref = business_ref
        if details is not _UNSET:
            entry.details = details
        if mandate_ref is not _UNSET:
            entry.mandate_ref = mandate_ref
        if failed is not None:
            entry.error = "failed"
            entry.description = failed[:500]

    # -- the reply -------------------------------------------------------------------------

    def sign_receipts(self) -> tuple[str, ...]:
        """Sign the pending receipts (once) and return every receipt of the turn, in order."""
        signer = self._agent.signer if self._agent is not None else None
        if signer is not None:
            for entry in self._entries:
                if entry.signed is None:
                    options: dict[str, Any] = {}
                    if entry.details is not _UNSET:
                        options["details"] = entry.details
                    entry.signed = signer.sign(
                        session_id=entry.session_id,
                        consent_token=entry.token,
                        action=entry.action,
                        result="error" if entry.error else "success",
                        error=entry.error,
                        error_description=entry.description,
                        request_ref=entry.request_ref,
                        business_ref=entry.business_ref,
                        mandate_ref=entry.mandate_ref,
                        **options,
                    )
        return self.receipts

    def filings(self) -> list[tuple[str, str]]:
        """(session id, receipt) of every signed receipt, for filing with the broker."""
        return [(e.session_id, e.signed) for e in self._entries if e.signed is not None]

    def decorate(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """The reply message with this turn's Parafé data: the `handshake_complete` member
        (when a challenge was answered) and the receipts."""
        out = dict(message)
        if self.handshake is not None:
            out = with_parafe(out, {"handshake_complete": handshake_data(self.handshake)})
        receipts = self.sign_receipts()
        if receipts:
            out = with_action_receipts(out, receipts)
        return out

    def refusal(self, refused: ParafeRefused, context_id: str | None) -> tuple[str, dict[str, Any]]:
        """The text and agent message of a refusal: the `error` member and the receipts (or,
        in a turn that answered a handshake, the `handshake_complete` member instead, since
        Parafé data holds one member)."""
        text = f"Parafé consent refused for {refused.action}: {refused.error.message}"
        message: dict[str, Any] = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_AGENT",
            "parts": [{"text": text}],
        }
        if context_id is not None:
            message["contextId"] = context_id
        receipts = self.sign_receipts()
        if self.handshake is not None:
            return text, self.decorate(message)
        return text, with_parafe(message, error_reply_data(refused.error, receipts))


def handshake_data(complete: HandshakeComplete) -> dict[str, Any]:
    """The `handshake_complete` member as JSON (optional members only when set)."""
    data: dict[str, Any] = {"handshake_id": complete.handshake_id, "status": complete.status}
    for name in ("session_id", "consent_token", "error_code", "error_message"):
        value = getattr(complete, name)
        if value is not None:
            data[name] = value
    return data


def refusal_task(message: Mapping[str, Any], refused: ParafeRefused) -> dict[str, Any]:
    """A refusal as an A2A task: `TASK_STATE_AUTH_REQUIRED` when a new handshake could help
    (missing, expired or insufficient consent), `TASK_STATE_REJECTED` otherwise; the Parafé
    data rides on `status.message`."""
    task: dict[str, Any] = {
        "id": f"t-{uuid.uuid4()}",
        "status": {"state": refused.task_state, "message": dict(message)},
    }
    if "contextId" in message:
        task["contextId"] = message["contextId"]
    return {"task": task}


# -- the agent -------------------------------------------------------------------------------


class ParafeAgent:
    """The runtime of one Parafé agent: create one per Brand (the Provider does) and share it.

    `store` keeps proof jtis (replay memory shared by every worker on that store) and closed
    sessions; without one they are per process. `keys` overrides the broker key source (for
    `StaticBrokerKeys`); `clock` is wall-clock epoch seconds. Thread-safe.
    """

    def __init__(
        self,
        config: ParafeConfig,
        *,
        store: Store | None = None,
        keys: KeySource | None = None,
        replay: ReplayMemory | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.keys: KeySource = keys or BrokerKeys(
            config.broker_url, fetch_policy=config.fetch_policy()
        )
        if replay is None:
            replay = StoreReplayMemory(store) if store is not None else MemoryReplayMemory()
        self.replay = replay
        self._store = store
        self._clock = clock
        self._closed: dict[str, float] = {}
        self._lock = threading.Lock()
        self.verifier = ParafeVerifier(
            agent_id=config.agent_id,
            keys=self.keys,
            scope_requirements=config.scope_requirements or None,
            require_proof=config.require_proof,
            replay=replay,
            clock=clock,
        )
        self.receipt_verifier = ReceiptVerifier(self.keys, clock=clock)
        self.signer = (
            ReceiptSigner(config.signing_key, config.did, clock=clock)
            if config.signing_key is not None
            else None
        )
        self.filer: ReceiptFiler | None = None
        if config.file_receipts:
            assert config.signing_key is not None
            assert config.credential is not None
            self.filer = ReceiptFiler(
                broker_url=self.keys.broker_url,
                credential=config.credential,
                key=config.signing_key,
                policy=config.fetch_policy(),
                clock=clock,
            )

    def turn(self, message: Any, *, activated: bool = False) -> ParafeTurn:
        """A `ParafeTurn` for one incoming A2A message (a JSON object)."""
        return ParafeTurn(self, message, activated=activated)

    # -- closed sessions (session_closed) ----------------------------------------------------

    def session_is_closed(self, session_id: str) -> bool:
        """Whether a verified `session_closed` named this session (blocking with a store)."""
        now = self._clock()
        if self._store is not None:
            # An unexpired record is a closed session; asking records nothing.
            return self._store.is_marked(namespace=_CLOSED_NAMESPACE, value=session_id, now=now)
        with self._lock:
            until = self._closed.get(session_id)
            return until is not None and now < until

    def _mark_closed(self, session_id: str) -> None:
        now = self._clock()
        until = now + CLOSED_SESSION_MEMORY
        if self._store is not None:
            self._store.use_once(
                namespace=_CLOSED_NAMESPACE, value=session_id, now=now, expires_at=until
            )
            return
        with self._lock:
            self._closed = {k: v for k, v in self._closed.items() if v > now}
            self._closed[session_id] = until

    def close_session(self, member: SessionClosed) -> SessionReceipt | None:
        """Handle a `session_closed` member: verify the broker's session receipt; when it
        checks out and names the session, its tokens are refused from now on. Blocking."""
        try:
            receipt = self.receipt_verifier.verify_session_receipt(member.receipt)
        except ParafeError as exc:
            logger.info("Parafé session_closed with an invalid session receipt: %s", exc.code)
            return None
        if receipt.session_id != member.session_id:
            logger.info("Parafé session_closed: the receipt names another session")
            return None
        self._mark_closed(member.session_id)
        return receipt

    # -- handshakes --------------------------------------------------------------------------

    def answer_handshake(self, challenge: HandshakeChallenge) -> HandshakeComplete:
        """Answer a `handshake_challenge` with the `handshake_complete` to send back.

        Only challenges naming our own broker and (when the card declares scopes) a declared
        scope are completed, by the configured `handshake` completer or else by
        `complete_handshake`; the consent token it brings back must verify for this agent and
        the session it names, and be the challenge's (initiator, scope). Never raises:
        failures are `status: error` or `rejected` with a message. Blocking.
        """
        config = self.config

        def answer(status: str, text: str) -> HandshakeComplete:
            return HandshakeComplete(
                handshake_id=challenge.handshake_id, status=status, error_message=text
            )

        if challenge.broker_url.rstrip("/") != self.keys.broker_url:
            return answer("rejected", "This agent completes handshakes only with its own broker.")
        if config.scope_requirements and challenge.requested_scope not in config.scope_requirements:
            return answer("rejected", "This agent declares no such scope.")
        if config.handshake is None and (config.signing_key is None or not config.credential):
            return answer(
                "error",
                "This agent cannot complete Parafé handshakes (it has no broker credential).",
            )
        try:
            if config.handshake is not None:
                complete = config.handshake(challenge, self)
            else:
                complete = self.complete_handshake(challenge)
        except Exception as exc:
            logger.warning("Parafé handshake completion failed: %s", type(exc).__name__)
            return answer("error", "The handshake could not be completed with the broker.")
        if not isinstance(complete, HandshakeComplete) or (
            complete.handshake_id != challenge.handshake_id
        ):
            logger.error("the Parafé handshake completer returned something else")
            return answer("error", "The handshake could not be completed with the broker.")
        if complete.status == "authenticated":
            token = complete.consent_token
            try:
                if token is None:
                    raise ParafeError(INVALID_CONSENT_TOKEN, "no consent token")
                claims = self.verifier.verify_token(token, session_id=complete.session_id)
                if claims.initiator_agent_id != challenge.initiator_agent_id or (
                    claims.scope != challenge.requested_scope
                ):
                    raise ParafeError(INVALID_CONSENT_TOKEN, "another handshake's token")
            except ParafeError as exc:
                logger.warning("the broker's consent token does not verify: %s", exc.code)
                return answer("error", "The broker's consent token does not verify.")
            if complete.session_id is None:
                complete = evolve(complete, session_id=claims.session_id)
        return complete

    def complete_handshake(self, challenge: HandshakeChallenge) -> HandshakeComplete:
        """The built-in handshake completion, as the target agent (the reference SDK's
        `completeHandshake`): `POST {broker}/handshake/complete` with JSON `{handshake_id,
        target_credential, challenge_response}`, where `challenge_response` is the base64
        signature, with the agent's registered key, of the challenge's raw bytes (hex-decoded;
        Ed25519, or ES256 as raw r||s). The broker answers `{handshake_id, session:
        {session_id}, consent_token: {token, session_id, ...}}`. A 4xx is a refusal:
        `rejected` with the broker's `error` as `error_code` (`unknown_error` when absent) and
        its `message`/`reason`/`error` as `error_message`; an unreachable broker, a 5xx or an
        unreadable answer is `error`. One attempt, bounded by the fetch policy's timeout.
        The token is checked by `answer_handshake`. Raises only on a configuration error.
        Blocking."""
        key = self.config.signing_key
        credential = self.config.credential
        if key is None or not credential:
            raise RuntimeError("completing a handshake needs the signing_key and the credential")
        handshake_id = challenge.handshake_id

        def failed(status: str, code: str, text: str) -> HandshakeComplete:
            return HandshakeComplete(
                handshake_id=handshake_id, status=status, error_code=code, error_message=text
            )

        body = {
            "handshake_id": handshake_id,
            "target_credential": credential,
            "challenge_response": _sign_challenge(key, challenge.challenge),
        }
        url = self.keys.broker_url + HANDSHAKE_COMPLETE_PATH
        try:
            status, raw = _post_json(url, json_dumps(body), {}, self.config.fetch_policy())
        except FetchError as exc:
            logger.warning("Parafé handshake: broker unreachable (%s)", type(exc).__name__)
            return failed("error", "network_error", "The Parafé broker could not be reached.")
        try:
            answer = json_loads(raw) if raw else None
        except MalformedInput:
            answer = None
        if 400 <= status < 500:
            code, text = _broker_error(answer)
            logger.info("Parafé handshake refused by the broker: %s %s", status, code)
            return failed("rejected", code, text)
        if status >= 500 or not 200 <= status < 300:
            code, _ = _broker_error(answer)
            logger.warning("Parafé handshake: the broker answered %s %s", status, code)
            return failed("error", code, "The Parafé broker could not complete the handshake.")
        if not isinstance(answer, Mapping):
            answer = {}
        session = answer.get("session")
        token = answer.get("consent_token")
        session_id = session.get("session_id") if isinstance(session, Mapping) else None
        token_text = token.get("token") if isinstance(token, Mapping) else None
        if (
            not isinstance(session_id, str)
            or not isinstance(token_text, str)
            or not isinstance(token, Mapping)
            or token.get("session_id", session_id) != session_id
            or answer.get("handshake_id", handshake_id) != handshake_id
        ):
            logger.warning("Parafé handshake: the broker's answer is not a completed handshake")
            return failed("error", "invalid_response", "The Parafé broker's answer is unusable.")
        return HandshakeComplete(
            handshake_id=handshake_id,
            status="authenticated",
            session_id=session_id,
            consent_token=token_text,
        )

    # -- the broker, authenticated ---------------------------------------------------------

    def request_pop(self, method: str, url: str, **bound: Any) -> str:
        """A request proof of possession for a broker call (`Parafe-PoP`): typ
        `parafe-pop+jwt`, claims `htm`, `htu` (the URL without query), the call's own `bound`
        claims (e.g. `session_id`), `jti`, `iat`; signed with the agent's key, no `kid`."""
        key = self.config.signing_key
        if key is None:
            raise RuntimeError("a request proof needs the agent's signing_key")
        parts = urlsplit(url)
        claims: dict[str, Any] = {
            "htm": method.upper(),
            "htu": f"{parts.scheme}://{parts.netloc}{parts.path}",
            **bound,
            "jti": str(uuid.uuid4()),
            "iat": int(self._clock()),
        }
        return sign_compact(claims, evolve(key, public=evolve(key.public, kid=None)), typ=_POP_TYP)

    def broker_post(self, path: str, body: Mapping[str, Any], **bound: Any) -> tuple[int, Any]:
        """POST JSON to the broker as this agent (`Authorization: Bearer <credential>` and a
        `Parafe-PoP` binding `bound`); the status and the parsed JSON answer (None if not
        JSON). Raises `FetchError` when the broker cannot be reached. Blocking."""
        credential = self.config.credential
        if not credential:
            raise RuntimeError("calls to the broker as this agent need its credential")
        url = self.keys.broker_url + path
        headers = {
            "Authorization": f"Bearer {credential}",
            "Parafe-PoP": self.request_pop("POST", url, **bound),
        }
        status, raw = _post_json(url, json_dumps(dict(body)), headers, self.config.fetch_policy())
        try:
            return status, json_loads(raw) if raw else None
        except MalformedInput:
            return status, None

    def file(self, filings: Iterable[tuple[str, str]]) -> None:
        """Queue receipts for filing with the broker (no-op unless `file_receipts`); never
        blocks."""
        if self.filer is not None:
            self.filer.submit(filings)

    def close(self) -> None:
        if self.filer is not None:
            self.filer.close()

    # -- app endpoints (`@parafe_action`) --------------------------------------------------

    def refusal_response(self, refused: ParafeRefused, status: int = 403) -> Response:
        """A refusal on an app's own endpoint: an A2A-shaped JSON reply (`{"message": ...}`,
        role agent) with the Parafé error data and the refusal receipt."""
        receipts = [refused.receipt] if refused.receipt else []
        message = with_parafe(
            {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_AGENT",
                "parts": [
                    {"text": f"Parafé consent refused for {refused.action}: {refused.message}"}
                ],
            },
            error_reply_data(refused.error, receipts),
        )
        body = json_dumps({"message": message})
        self.file(
            [(refused.error.consent.session_id, r) for r in receipts]
            if refused.error.consent is not None
            else []
        )
        return Response(
            status=status,
            headers=(
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                ("A2A-Extensions", EXTENSION_URI),
                ("Cache-Control", "no-store"),
            ),
            body=body,
        )

    def finish(self, turn: ParafeTurn, body: bytes, content_type: str | None) -> bytes | None:
        """After an endpoint ran: sign its receipts, queue them for filing, and return the
        JSON body with them added (an A2A `{"message": ...}` or a bare message), or None when
        the body is not such JSON (the receipts are then in `turn.receipts` only)."""
        receipts = turn.sign_receipts()
        self.file(turn.filings())
        if not receipts or not content_type or "json" not in content_type.lower():
            return None
        return add_receipts_to_json(body, receipts)


def select_agent(agents: Mapping[str, ParafeAgent], brand: str | None) -> ParafeAgent:
    """The Parafé agent of `brand`, or of the one Brand with Parafé when `brand` is None (for
    `@parafe_action` in the Flask and Django adapters). Raises `RuntimeError` otherwise."""
    if brand is not None:
        if brand not in agents:
            raise RuntimeError(f"Brand {brand!r} has no [brands.{brand}.parafe] configuration")
        return agents[brand]
    if len(agents) != 1:
        raise RuntimeError(
            "@parafe_action needs the Brand: pass brand=..., or set PACTMW['parafe_brand']"
            if agents
            else "no Brand configures Parafé ([brands.X.parafe])"
        )
    return next(iter(agents.values()))


def endpoint_message(body: bytes | None) -> Any:
    """The A2A message an endpoint's JSON body carries: `{"message": {...}}` (a
    `message:send` request) or the message itself; None when the body is not JSON."""
    if not body:
        return None
    try:
        parsed = json_loads(body)
    except MalformedInput:
        return None
    if isinstance(parsed, Mapping) and isinstance(parsed.get("message"), Mapping):
        return parsed["message"]
    return parsed


def body_too_large(declared: str | None, limit: int = _MAX_ENDPOINT_BODY) -> bool:
    """Whether a declared Content-Length exceeds what an endpoint guard reads."""
    return declared is not None and is_ascii_digits(declared) and int(declared) > limit


def add_receipts_to_json(body: bytes, receipts: Iterable[str]) -> bytes | None:
    """`body` (JSON: `{"message": ...}` or a message with `messageId`) with `receipts` in the
    message's Parafé data; None when it is neither."""
    try:
        parsed = json_loads(body)
    except MalformedInput:
        return None
    if not isinstance(parsed, dict):
        return None
    listed = list(receipts)
    try:
        if isinstance(parsed.get("message"), dict):
            return json_dumps(
                {**parsed, "message": with_action_receipts(parsed["message"], listed)}
            )
        if "messageId" in parsed and "role" in parsed:
            return json_dumps(with_action_receipts(parsed, listed))
    except ValueError:
        return None
    return None


# -- filing receipts with the broker (§7.4) -----------------------------------------------------


def _post_json(
    url: str, body: bytes, headers: Mapping[str, str], policy: FetchPolicy
) -> tuple[int, bytes]:
    """One bounded POST to the broker with the agent's headers (`core.fetch.http_request`)."""
    answer = http_request("POST", url, policy, body=body, headers=headers)
    return answer.status, answer.body


class ReceiptFiler:
    """Files action receipts with the broker from one background thread, never delaying a
    reply: `POST {broker}/sessions/{id}/action-receipts` with the agent's credential and a
    request PoP binding the session. 201 and 409 `duplicate_receipt` are success; network
    errors, 429 and 5xx are retried `attempts` times with exponential backoff; anything else
    (a closed session, a refused credential) is given up at once and logged (codes only).
    """

    def __init__(
        self,
        *,
        broker_url: str,
        credential: str,
        key: PrivateJWK,
        policy: FetchPolicy,
        attempts: int = 4,
        backoff: float = 0.5,
        max_queue: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._broker_url = broker_url.rstrip("/")
        self._credential = credential
        self._key = evolve(key, public=evolve(key.public, kid=None))
        self._policy = policy
        self.attempts = attempts
        self.backoff = backoff
        self._max_queue = max_queue
        self._clock = clock
        self._queue: deque[tuple[str, str]] = deque()
        self._busy = 0
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        #: Outcomes so far: filed, duplicate, rejected, failed, dropped.
        self.outcomes: Counter[str] = Counter()

    def submit(self, filings: Iterable[tuple[str, str]]) -> None:
        with self._condition:
            if self._closed:
                return
            for item in filings:
                if len(self._queue) >= self._max_queue:
                    self.outcomes["dropped"] += 1
                    logger.warning("Parafé receipt filing queue is full: a receipt was dropped")
                    continue
                self._queue.append(item)
            if self._queue and self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="pactmw-parafe-filing", daemon=True
                )
                self._thread.start()
            self._condition.notify_all()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued receipt was handled; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._condition.wait(left)
        return True

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def _work(self) -> None:
        while True:
            with self._condition:
                while not self._queue and not self._closed:
                    self._condition.wait()
                if not self._queue:
                    return
                session_id, receipt = self._queue.popleft()
                self._busy += 1
            try:
                self.outcomes[self._file(session_id, receipt)] += 1
            except Exception:  # never let the worker die
                logger.exception("Parafé receipt filing failed unexpectedly")
                self.outcomes["failed"] += 1
            finally:
                with self._condition:
                    self._busy -= 1
                    self._condition.notify_all()

    def _file(self, session_id: str, receipt: str) -> str:
        url = f"{self._broker_url}/sessions/{quote(session_id, safe='')}/action-receipts"
        body = json_dumps({"receipt": receipt})
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            parts = urlsplit(url)
            pop = sign_compact(
                {
                    "htm": "POST",
                    "htu": f"{parts.scheme}://{parts.netloc}{parts.path}",
                    "session_id": session_id,
                    "jti": str(uuid.uuid4()),
                    "iat": int(self._clock()),
                },
                self._key,
                typ=_POP_TYP,
            )
            headers = {"Authorization": f"Bearer {self._credential}", "Parafe-PoP": pop}
            try:
                status, raw = _post_json(url, body, headers, self._policy)
            except FetchError as exc:
                logger.info("Parafé receipt filing: broker unreachable (%s)", type(exc).__name__)
                continue
            if status in (200, 201):
                return "filed"
            code = _error_code(raw)
            if status == 409 and code == "duplicate_receipt":
                return "duplicate"
            if status == 429 or status >= 500:
                continue
            logger.warning("Parafé receipt filing refused: %s %s", status, code or "no code")
            return "rejected"
        logger.warning("Parafé receipt filing gave up after %s attempts", self.attempts)
        return "failed"


def _sign_challenge(key: PrivateJWK, challenge: str) -> str:
    """`challenge_response`: base64 of the agent key's signature over the challenge's bytes."""
    data = bytes.fromhex(challenge)
    if not isinstance(key.key, ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
        raise RuntimeError("a Parafé agent key is Ed25519 or P-256")
    # ES256 as raw r||s, like every JWS this package signs (`core.jose.sign_bytes`).
    return base64.b64encode(sign_bytes(key, data)).decode("ascii")


def _broker_error(answer: Any) -> tuple[str, str]:
    """A broker error answer as (code, message), the reference SDK's `mapBrokerError`: the code
    is `error` (`unknown_error` when absent), the message `message`, `reason` or `error`."""
    body = answer if isinstance(answer, Mapping) else {}

    def text(name: str) -> str | None:
        value = body.get(name)
        return value[:_MAX_BROKER_TEXT] if isinstance(value, str) and value else None

    code = text("error") or "unknown_error"
    return code, text("message") or text("reason") or text("error") or "Unknown error"


def _error_code(raw: bytes) -> str | None:
    try:
        parsed = json_loads(raw) if raw else None
    except MalformedInput:
        return None
    code = parsed.get("error") if isinstance(parsed, Mapping) else None
    return code if isinstance(code, str) else None


__all__ = [
    "HANDSHAKE_COMPLETE_PATH",
    "REQUEST_KEY",
    "HandshakeCompleter",
    "ParafeAgent",
    "ParafeConfig",
    "ParafeConsent",
    "ParafeRefused",
    "ParafeTurn",
    "ReceiptFiler",
    "add_receipts_to_json",
    "endpoint_message",
    "handshake_data",
    "refusal_task",
    "select_agent",
]
