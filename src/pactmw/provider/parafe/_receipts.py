"""The receipts of one turn: refusals signed at once, successes when the reply is built."""

from __future__ import annotations

from typing import Any

from pactmw.protocols.parafe import Consent, ReceiptSigner

#: "Not given" for receipt fields that may be set to None (`details`, `business_ref`, ...).
UNSET: Any = object()


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
        self.details: Any = UNSET
        self.mandate_ref: str | None = None
        self.request_ref: str | None = None
        self.error: str | None = None
        self.description: str | None = None
        self.signed: str | None = None

    def __repr__(self) -> str:
        return f"_Entry({self.action!r}, error={self.error!r})"


class ReceiptLedger:
    """A turn's receipts in the order of its actions (one entry a `require`)."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []

    def __len__(self) -> int:
        return len(self._entries)

    def refused(self, action: str, consent: Consent, receipt: str | None) -> None:
        """Record a refusal receipt, signed already."""
        entry = _Entry(action, consent.session_id, consent.token)
        entry.signed = receipt
        self._entries.append(entry)

    def accepted(
        self,
        action: str,
        session_id: str,
        token: str,
        *,
        business_ref: str | None,
        details: Any,
        mandate_ref: str | None,
        request_ref: str | None,
    ) -> None:
        """Record a success receipt, signed later by `sign`."""
        entry = _Entry(action, session_id, token)
        entry.business_ref = business_ref
        entry.details = details
        entry.mandate_ref = mandate_ref
        entry.request_ref = request_ref
        self._entries.append(entry)

    def complete(
        self,
        action: str,
        *,
        business_ref: str | None,
        details: Any,
        mandate_ref: str | None,
        failed: str | None,
    ) -> None:
        """Update the last unsigned receipt of `action` (`UNSET` leaves a field as it is);
        `LookupError` without one."""
        for entry in reversed(self._entries):
            if entry.action == action and entry.signed is None:
                break
        else:
            raise LookupError(f"no unsigned receipt for {action!r}: call require() first")
        if business_ref is not UNSET:
            entry.business_ref = business_ref
        if details is not UNSET:
            entry.details = details
        if mandate_ref is not UNSET:
            entry.mandate_ref = mandate_ref
        if failed is not None:
            entry.error = "failed"
            entry.description = failed[:500]

    def sign(self, signer: ReceiptSigner) -> None:
        """Sign the pending receipts (each once)."""
        for entry in self._entries:
            if entry.signed is None:
                options: dict[str, Any] = {}
                if entry.details is not UNSET:
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

    @property
    def signed(self) -> tuple[str, ...]:
        """The receipts signed so far, in order."""
        return tuple(entry.signed for entry in self._entries if entry.signed is not None)

    def filings(self) -> list[tuple[str, str]]:
        """(session id, receipt) of every signed receipt."""
        return [(e.session_id, e.signed) for e in self._entries if e.signed is not None]


__all__ = [
    "UNSET",
    "ReceiptLedger",
]
