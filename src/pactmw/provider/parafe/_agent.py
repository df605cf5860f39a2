"""`ParafeAgent`: the runtime of one configured agent, wiring its collaborators together."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pactmw.core.encoding import loggable
from pactmw.core.http import Response
from pactmw.protocols.parafe import (
    BrokerKeys,
    FiledReceipt,
    HandshakeChallenge,
    HandshakeComplete,
    KeySource,
    MemoryReplayMemory,
    ParafeError,
    ParafeVerifier,
    ReceiptSigner,
    ReceiptVerifier,
    ReplayMemory,
    SessionClosed,
    SessionReceipt,
    StoreReplayMemory,
)
from pactmw.provider.parafe import _endpoint, _handshake
from pactmw.provider.parafe._broker import BrokerClient
from pactmw.provider.parafe._config import ParafeConfig
from pactmw.provider.parafe._consent import ParafeRefused
from pactmw.provider.parafe._filer import AcknowledgmentLog, Filing, ReceiptFiler
from pactmw.provider.parafe._sessions import ClosedSessions
from pactmw.provider.parafe._turn import ParafeTurn

if TYPE_CHECKING:
    from pactmw.store.base import Store

logger = logging.getLogger("pactmw.provider.parafe")


class ParafeAgent:
    """The runtime of one Parafé agent: create one per Brand (the Provider does) and share it.

    `store` keeps proof jtis (replay memory shared by every worker on that store) and closed
    sessions; without one they are per process. `keys` overrides the broker key source (for
    `StaticBrokerKeys`); `acknowledgment_log` is where the broker's acknowledgments of filed
    receipts are kept (default: this process's memory); `clock` is wall-clock epoch seconds.
    Thread-safe.
    """

    def __init__(
        self,
        config: ParafeConfig,
        *,
        store: Store | None = None,
        keys: KeySource | None = None,
        replay: ReplayMemory | None = None,
        acknowledgment_log: AcknowledgmentLog | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.keys: KeySource = keys or BrokerKeys(
            config.broker_url, fetch_policy=config.fetch_policy()
        )
        if replay is None:
            replay = StoreReplayMemory(store) if store is not None else MemoryReplayMemory()
        self.replay = replay
        self._sessions = ClosedSessions(store, clock)
        self._broker = BrokerClient(
            self.keys.broker_url,
            credential=config.credential,
            key=config.signing_key,
            policy=config.fetch_policy(),
            clock=clock,
            retry=config.broker_retry,
        )
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
                retry=config.broker_retry,
                verifier=self.receipt_verifier,
                acknowledgment_log=acknowledgment_log,
                clock=clock,
            )

    def turn(self, message: Any, *, activated: bool = False) -> ParafeTurn:
        """A `ParafeTurn` for one incoming A2A message (a JSON object)."""
        return ParafeTurn(self, message, activated=activated)

    def endpoint_turn(self, body: bytes) -> ParafeTurn:
        """A `ParafeTurn` for the request body of an endpoint (`@parafe_action`): the A2A
        message it holds (`endpoint_message`); one that holds none (empty, not JSON, not an
        object) is refused saying so, with the reference's MISSING_PARAFE_EXTENSION."""
        message = _endpoint.endpoint_message(body)
        return ParafeTurn(self, message, no_message=_endpoint.body_problem(body))

    # -- closed sessions (session_closed) ----------------------------------------------------

    def session_is_closed(self, session_id: str) -> bool:
        """Whether a verified `session_closed` named this session (blocking with a store)."""
        return self._sessions.is_closed(session_id)

    def close_session(self, member: SessionClosed) -> SessionReceipt | None:
        """Handle a `session_closed` member: verify the broker's session receipt; when it
        checks out and names the session, its tokens are refused from now on. Blocking."""
        try:
            receipt = self.receipt_verifier.verify_session_receipt(member.receipt)
        except ParafeError as exc:
            logger.info(
                "Parafé session_closed with an invalid session receipt: %s", loggable(exc.code)
            )
            return None
        if receipt.session_id != member.session_id:
            logger.info("Parafé session_closed: the receipt names another session")
            return None
        self._sessions.close(member.session_id)
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
        return _handshake.answer_handshake(self, challenge)

    def complete_handshake(self, challenge: HandshakeChallenge) -> HandshakeComplete:
        """The built-in handshake completion, as the target agent (the reference SDK's
        `completeHandshake`): `POST {broker}/handshake/complete` with JSON `{handshake_id,
        target_credential, challenge_response}`, where `challenge_response` is the base64
        signature, with the agent's registered key, of the challenge's raw bytes (hex-decoded;
        Ed25519, or ES256 as raw r||s). The broker answers `{handshake_id, session:
        {session_id}, consent_token: {token, session_id, ...}}`. A 4xx is a refusal:
        `rejected` with the broker's `error` as `error_code` (`unknown_error` when absent) and
        its `message`/`reason`/`error` as `error_message`; an unreachable broker, a 5xx or an
        unreadable answer is `error`. A network failure, a 429 or a 5xx is tried again as
        `config.broker_retry` says (at most 3 more times by default, after 0.2, 0.4 and
        0.8 s or the `Retry-After`), each attempt bounded by the fetch policy's timeout.
        The token is checked by `answer_handshake`. Raises only on a configuration error.
        Blocking."""
        return _handshake.complete_handshake(self._broker, challenge)

    # -- the broker, authenticated ---------------------------------------------------------

    def request_pop(self, method: str, url: str, **bound: Any) -> str:
        """A request proof of possession for a broker call (`Parafe-PoP`): typ
        `parafe-pop+jwt`, claims `htm`, `htu` (the URL without query), the call's own `bound`
        claims (e.g. `session_id`), `jti`, `iat`; signed with the agent's key, no `kid`."""
        return self._broker.pop(method, url, **bound)

    def broker_post(self, path: str, body: Mapping[str, Any], **bound: Any) -> tuple[int, Any]:
        """POST JSON to the broker as this agent (`Authorization: Bearer <credential>` and a
        `Parafe-PoP` binding `bound`); the status and the parsed JSON answer (None if not
        JSON). Raises `FetchError` when the broker cannot be reached. Blocking."""
        if not self.config.credential:
            raise RuntimeError("calls to the broker as this agent need its credential")
        answer = self._broker.post_as_agent(path, body, **bound)
        return answer.status, answer.body

    def file(self, filings: Iterable[Filing]) -> None:
        """Queue receipts for filing with the broker (no-op unless `file_receipts`); never
        blocks."""
        if self.filer is not None:
            self.filer.submit(filings)

    def acknowledgment(self, receipt: str) -> FiledReceipt | None:
        """The broker's verified acknowledgment of a receipt this agent filed (None until
        it is filed, or without `file_receipts`)."""
        return self.filer.acknowledgment_log.get(receipt) if self.filer is not None else None

    def acknowledgments(self, session_id: str) -> list[FiledReceipt]:
        """Every acknowledged filing of a session, in index order: with the session receipt,
        `check_session_index(receipt, acknowledgments=[f.ack for f in ...])` checks them."""
        return self.filer.acknowledgment_log.for_session(session_id) if self.filer else []

    def close(self) -> None:
        if self.filer is not None:
            self.filer.close()

    # -- app endpoints (`@parafe_action`) --------------------------------------------------

    def refusal_response(self, refused: ParafeRefused, status: int = 403) -> Response:
        """A refusal on an app's own endpoint: an A2A-shaped JSON reply (`{"message": ...}`,
        role agent) with the Parafé error data and the refusal receipt."""
        return _endpoint.refusal_response(self, refused, status)

    def finish(
        self,
        turn: ParafeTurn,
        body: bytes,
        content_type: str | None,
        status: int | None = None,
    ) -> bytes | None:
        """After an endpoint ran: sign its receipts, queue them for filing, and return the
        JSON body with them added (an A2A `{"message": ...}` or a bare message), or None when
        the body is not such JSON (the receipts are then in `turn.receipts` only). With an
        error `status` (400 and up), actions not marked failed are receipted as failed."""
        return _endpoint.finish(self, turn, body, content_type, status)


__all__ = [
    "ParafeAgent",
]
