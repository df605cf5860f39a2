"""The receipts of one turn: refusals signed at once, successes when the reply is built, and
the AP2 receipts the bot signed."""

from __future__ import annotations

from typing import Any

from attrs import evolve, frozen

from pactmw.protocols.parafe import Ap2Data, Ap2Receipt, Consent, ReceiptSigner
from pactmw.provider.parafe._filer import Filing

#: Which `Ap2Data` member carries an AP2 receipt of each `kind`.
_AP2_MEMBER = {"ap2.checkout_receipt": "checkout_receipt", "ap2.payment_receipt": "payment_receipt"}

#: "Not given" for receipt fields that may be set to None (`details`, `business_ref`, ...).
UNSET: Any = object()


@frozen
class ReceiptFields:
    """What the bot says about an action on its success receipt (`ParafeTurn.require`, then
    `complete`): `details` stays `UNSET` unless given (the receipt then has no hash of it)."""

    business_ref: str | None = None
    details: Any = UNSET
    mandate_ref: str | None = None
    request_ref: str | None = None

    def given(self, **changes: Any) -> ReceiptFields:
        """These fields with the `changes` that are not `UNSET` (`complete`'s "leave as is")."""
        return evolve(self, **{name: v for name, v in changes.items() if v is not UNSET})

    def signing_arguments(self) -> dict[str, Any]:
        """The fields as `ReceiptSigner.sign` keywords (`details` only when given)."""
        arguments: dict[str, Any] = {
            "business_ref": self.business_ref,
            "mandate_ref": self.mandate_ref,
            "request_ref": self.request_ref,
        }
        if self.details is not UNSET:
            arguments["details"] = self.details
        return arguments


_NO_FIELDS = ReceiptFields()


class _Entry:
    """One receipt of a turn: signed at once (refusals) or when the reply is built."""

    __slots__ = ("action", "description", "error", "fields", "session_id", "signed", "token")

    def __init__(
        self, action: str, session_id: str, token: str, fields: ReceiptFields = _NO_FIELDS
    ) -> None:
        self.action = action
        self.session_id = session_id
        self.token = token
        self.fields = fields
        self.error: str | None = None
        self.description: str | None = None
        self.signed: str | None = None

    def __repr__(self) -> str:
        return f"_Entry({self.action!r}, error={self.error!r})"


class ReceiptLedger:
    """A turn's receipts in the order of its actions (one entry a `require`)."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        #: AP2 receipts by `Ap2Data` member, with the session to file them under (or None).
        self._ap2: dict[str, tuple[str | None, Ap2Receipt]] = {}
        #: How many actions were permitted (`accepted`), whatever their receipts say later.
        self.permitted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def refused(self, action: str, consent: Consent, receipt: str | None) -> None:
        """Record a refusal receipt, signed already."""
        entry = _Entry(action, consent.session_id, consent.token)
        entry.signed = receipt
        self._entries.append(entry)

    def accepted(self, action: str, session_id: str, token: str, fields: ReceiptFields) -> None:
        """Record a success receipt, signed later by `sign`."""
        self.permitted += 1
        self._entries.append(_Entry(action, session_id, token, fields))

    def complete(self, action: str, changes: dict[str, Any], failed: str | None) -> None:
        """Update the last unsigned receipt of `action` with `changes` (`UNSET` ones leave a
        field as it is), marked failed with a `failed` reason; `LookupError` without one."""
        for entry in reversed(self._entries):
            if entry.action == action and entry.signed is None:
                break
        else:
            raise LookupError(f"no unsigned receipt for {action!r}: call require() first")
        entry.fields = entry.fields.given(**changes)
        if failed is not None:
            entry.error = "failed"
            entry.description = failed[:500]

    def fail_unfinished(self, reason: str) -> None:
        """Mark every receipt still unsigned and not already failed as failed, for `reason`
        (an endpoint that answered with an error status did not do what it was allowed)."""
        for entry in self._entries:
            if entry.signed is None and entry.error is None:
                entry.error = "failed"
                entry.description = reason[:500]

    def sign(self, signer: ReceiptSigner) -> None:
        """Sign the pending receipts (each once)."""
        for entry in self._entries:
            if entry.signed is None:
                entry.signed = signer.sign(
                    session_id=entry.session_id,
                    consent_token=entry.token,
                    action=entry.action,
                    result="error" if entry.error else "success",
                    error=entry.error,
                    error_description=entry.description,
                    **entry.fields.signing_arguments(),
                )

    @property
    def signed(self) -> tuple[str, ...]:
        """The receipts signed so far, in order."""
        return tuple(entry.signed for entry in self._entries if entry.signed is not None)

    def ap2(self, signed: Ap2Receipt, session_id: str | None) -> None:
        """Record an AP2 receipt for the reply (one of each kind: a data part holds one),
        filed under `session_id` unless it is None. `ValueError` for a second one."""
        member = _AP2_MEMBER[signed.kind]
        if member in self._ap2:
            raise ValueError(f"this turn already has an AP2 {member.replace('_', ' ')}")
        self._ap2[member] = (session_id, signed)

    def ap2_data(self) -> Ap2Data | None:
        """The AP2 receipts for the reply's data parts, or None."""
        if not self._ap2:
            return None
        return Ap2Data(**{member: signed.receipt for member, (_, signed) in self._ap2.items()})

    def filings(self) -> list[Filing]:
        """Every signed receipt to file: the action receipts, then the AP2 receipts with a
        session, with their `kind`."""
        filings = [Filing(e.session_id, e.signed) for e in self._entries if e.signed is not None]
        filings.extend(
            Filing(session_id, signed.receipt, signed.kind)
            for session_id, signed in self._ap2.values()
            if session_id is not None
        )
        return filings


__all__ = [
    "UNSET",
    "ReceiptFields",
    "ReceiptLedger",
]
