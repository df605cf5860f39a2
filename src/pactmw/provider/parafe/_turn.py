"""`ParafeTurn`: `turn.parafe` in a bot (and `request.parafe` behind `@parafe_action`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pactmw.core.encoding import loggable
from pactmw.protocols.parafe import (
    MAX_ACTION_RECEIPTS,
    Ap2Data,
    Ap2Outcome,
    Ap2Receipt,
    Consent,
    HandshakeComplete,
    MandateReferences,
    ParafeData,
    ParafeError,
    SessionReceipt,
    VerifiedConsent,
    error_reply_data,
    read_ap2,
    read_consent,
    read_parafe,
    with_action_receipts,
    with_ap2,
    with_parafe,
)
from pactmw.protocols.parafe._ap2_receipts import ReferenceForm
from pactmw.provider.parafe._check import MessageCheck
from pactmw.provider.parafe._consent import ParafeConsent, ParafeRefused
from pactmw.provider.parafe._filer import Filing
from pactmw.provider.parafe._receipts import UNSET, ReceiptFields, ReceiptLedger
from pactmw.provider.parafe._reply import handshake_data, refusal_message

if TYPE_CHECKING:
    from pactmw.provider.parafe._agent import ParafeAgent

logger = logging.getLogger("pactmw.provider.parafe")


class ParafeTurn:
    """`turn.parafe`: Parafé for one incoming message.

    `require(action)` (`arequire` in async code) verifies the message's consent for `action`
    (token, then proof, once per message; the next actions only against the verified token),
    and records a success receipt, signed when the reply is built; `complete(action, ...)`
    sets its business reference or marks it failed. A refusal is signed at once and raised as
    `ParafeRefused`. `ap2` is the AP2 mandates (and receipts) the message carries;
    `ap2_receipt` answers a mandate. `enabled` is False when the Brand has no Parafé
    configuration.
    """

    def __init__(
        self,
        agent: ParafeAgent | None,
        message: Any = None,
        *,
        activated: bool = False,
        no_message: str | None = None,
    ):
        self._agent = agent
        self._message = message
        #: The request activated the extension (header or `message.extensions`).
        self.activated = activated
        #: The `handshake_complete` this turn answered a challenge with, if any.
        self.handshake: HandshakeComplete | None = None
        #: The verified session receipt of a `session_closed` message, if any.
        self.session_closed: SessionReceipt | None = None
        self._ledger = ReceiptLedger()
        # `no_message`: why there is no message (an endpoint's body that holds none), which
        # the refusal says.
        self._check = MessageCheck(message, no_message)
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
    def ap2(self) -> Ap2Data | None:
        """The AP2 artifacts in the message's data parts (spec §5.3), or None."""
        return read_ap2(self._message)

    @property
    def receipts(self) -> tuple[str, ...]:
        """The receipts signed so far (pending success receipts are signed by the reply)."""
        return self._ledger.signed

    # -- require ---------------------------------------------------------------------------

    def _ready(self, action: str) -> ParafeAgent:
        if self._agent is None:
            raise RuntimeError("this Brand has no Parafé configuration ([brands.X.parafe])")
        if not isinstance(action, str) or not action:
            raise ValueError("action must be a non-empty string")
        if len(self._ledger) >= MAX_ACTION_RECEIPTS:
            raise ValueError(f"at most {MAX_ACTION_RECEIPTS} Parafé actions fit in one turn")
        return self._agent

    def require(
        self,
        action: str,
        *,
        business_ref: str | None = None,
        details: Any = UNSET,
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
            verified = self._check.verify(agent, action)
        except ParafeError as exc:
            raise self._refuse(agent, exc, action) from None
        fields = ReceiptFields(business_ref, details, mandate_ref, request_ref)
        return self._accept(verified, action, fields)

    async def arequire(
        self,
        action: str,
        *,
        business_ref: str | None = None,
        details: Any = UNSET,
        mandate_ref: str | None = None,
        request_ref: str | None = None,
    ) -> ParafeConsent:
        """Async `require`."""
        agent = self._ready(action)
        try:
            verified = await self._check.averify(agent, action)
        except ParafeError as exc:
            raise self._refuse(agent, exc, action) from None
        fields = ReceiptFields(business_ref, details, mandate_ref, request_ref)
        return self._accept(verified, action, fields)

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
            self._ledger.refused(action, consent, receipt)
        # Codes only: the message may quote claims, and tokens never reach a log.
        if error.cause is None:
            logger.info("Parafé refused %s: %s", loggable(action), loggable(error.code))
        else:
            # The broker could not be reached (the code is the reference's, which does not
            # say so): an operator's matter, so a WARNING naming the cause.
            logger.warning(
                "Parafé refused %s: %s (%s: the broker could not be reached)",
                loggable(action),
                loggable(error.code),
                loggable(error.cause),
            )
        return ParafeRefused(error, action, receipt)

    def _accept(
        self, verified: VerifiedConsent, action: str, fields: ReceiptFields
    ) -> ParafeConsent:
        self._ledger.accepted(action, verified.session_id, verified.consent_token, fields)
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
            mandates=claims.mandates,
        )
        return self._consent

    def complete(
        self,
        action: str,
        *,
        business_ref: str | None = UNSET,
        details: Any = UNSET,
        mandate_ref: str | None = UNSET,
        failed: str | None = None,
    ) -> None:
        """Update the receipt of the last `require(action)` of this turn: its business
        reference, details or mandate, or `failed="why"` when the permitted action failed
        (the receipt then says `error: failed`). Raises `LookupError` without one."""
        changes = {"business_ref": business_ref, "details": details, "mandate_ref": mandate_ref}
        self._ledger.complete(action, changes, failed)

    def refused_by_outage_alone(self, refused: ParafeRefused) -> bool:
        """Whether `refused` is a broker outage (`error.cause`: its keys, a DID document or
        the online check could not be had) and nothing else happened in Parafé this turn: no
        action permitted, no AP2 receipt, no handshake answered, no session closed. Such a
        refusal says "try again later", so it is no answer to keep for the message: the
        Provider leaves the message unanswered (as for a bot failure), and the same message
        sent again is checked again. A turn that permitted an action keeps its reply, so
        what the bot did is never done twice.

        For KEY_FETCH_FAILED no proof was spent: the replay record is the proof check's last
        step, after the keys, so the very same message passes once the broker is back. For
        BROKER_UNREACHABLE the proof was spent before the online check, and stays so: the
        reference records the jti as the last step of its offline proof check, before any
        online call (which carries the proof to the broker, which may remember it too, even
        when its answer was lost), so recording it only after the online check is not its
        order, and would let a replayed proof reach the broker. The message is left
        unanswered all the same: sent again with a fresh proof, it is checked again and can
        pass; sent with the spent one, it gets the truth ("the proof was already used"),
        where a stored outage refusal would say "try again later" to every retry for ever.
        """
        return (
            refused.error.cause is not None
            and self._ledger.permitted == 0
            and self.ap2_reply is None
            and self.handshake is None
            and self.session_closed is None
        )

    # -- AP2 -----------------------------------------------------------------------------

    def ap2_receipt(
        self,
        kind: str,
        outcome: Ap2Outcome,
        mandate: str | MandateReferences | None = None,
        *,
        reference_form: ReferenceForm = "closed_jwt",
    ) -> Ap2Receipt:
        """Answer an AP2 mandate, accepted or not, with a signed AP2 receipt (spec §5.3): a
        Checkout Receipt (`kind` "checkout") or a Payment Receipt ("payment").

        `mandate` defaults to the message's own mandate of that kind (`ap2`). The receipt is
        signed with the agent's key (P-256: AP2 receipts are ES256), `iss` the agent's DID;
        it goes into the reply as a data part (one of each kind a turn) and is filed with
        its `kind` under the session of the consent verified in this turn (when none was,
        the reply carries it but it is not filed). Raises `ValueError` (no mandate, an
        incomplete receipt, another key type) or `RuntimeError` (no `signing_key`).
        """
        if self._agent is None or self._agent.signer is None:
            raise RuntimeError("AP2 receipts are signed with the agent's signing_key")
        if mandate is None:
            data = self.ap2
            mandate = None if data is None else getattr(data, f"{kind}_mandate", None)
            if mandate is None:
                raise ValueError(f"the message carries no {kind} mandate: pass mandate")
        signed = self._agent.signer.ap2_receipt(
            kind, outcome, mandate, reference_form=reference_form
        )
        self._ledger.ap2(signed, self._consent.session_id if self._consent else None)
        return signed

    # -- the reply -------------------------------------------------------------------------

    def fail_unfinished(self, reason: str) -> None:
        """Mark the receipts of this turn's permitted actions that are not signed yet, and
        not marked failed by `complete`, as failed for `reason`."""
        self._ledger.fail_unfinished(reason)

    def sign_receipts(self) -> tuple[str, ...]:
        """Sign the pending receipts (once) and return every receipt of the turn, in order."""
        signer = self._agent.signer if self._agent is not None else None
        if signer is not None:
            self._ledger.sign(signer)
        return self.receipts

    def filings(self) -> list[Filing]:
        """Every signed receipt, for filing with the broker (AP2 receipts with their kind)."""
        return self._ledger.filings()

    @property
    def ap2_reply(self) -> Ap2Data | None:
        """The AP2 receipts `ap2_receipt` signed for the reply, or None."""
        return self._ledger.ap2_data()

    def _with_ap2(self, message: dict[str, Any]) -> dict[str, Any]:
        data = self.ap2_reply
        return message if data is None else with_ap2(message, data)

    def decorate(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """The reply message with this turn's Parafé data (the `handshake_complete` member
        when a challenge was answered, and the receipts) and its AP2 receipts."""
        out = dict(message)
        if self.handshake is not None:
            out = with_parafe(out, {"handshake_complete": handshake_data(self.handshake)})
        receipts = self.sign_receipts()
        if receipts:
            out = with_action_receipts(out, receipts)
        return self._with_ap2(out)

    def refusal(self, refused: ParafeRefused, context_id: str | None) -> tuple[str, dict[str, Any]]:
        """The text and agent message of a refusal: the `error` member and the receipts (or,
        in a turn that answered a handshake, the `handshake_complete` member instead, since
        Parafé data holds one member)."""
        text, message = refusal_message(refused, context_id)
        receipts = self.sign_receipts()
        if self.handshake is not None:
            return text, self.decorate(message)
        return text, self._with_ap2(with_parafe(message, error_reply_data(refused.error, receipts)))


__all__ = [
    "ParafeTurn",
]
