"""Parafé A2A extension v2: consent tokens, presentation proofs and action receipts.

The receiving agent verifies the consent an A2A message carries (`ParafeVerifier`), or just
a presentation proof (`verify_presentation_proof`), signs receipts for what it did or
refused (`ReceiptSigner`) and declares itself in its agent card (`card_extension`). The
calling agent attaches consent with a fresh proof per message (`ConsentPresenter`) and
checks the receipts it gets back (`ReceiptVerifier`). Before a handshake, either side can
check who the other is from its broker-issued identity credential (`verify_identity_credential`).
AP2 artifacts ride beside Parafé data in data parts (`read_ap2`, `with_ap2`); a merchant signs
AP2 receipts for the mandates presented to it (`ReceiptSigner.ap2_receipt`).

The checks, their order and the error codes are the reference implementation's
(shared/reference/parafe-verifier.md), which wins where the seed text differs; each module
says where. Everything but `BrokerKeys` is pure; verification is written once as a flow that
`verify` and `averify` drive with blocking or non-blocking I/O.
"""

from __future__ import annotations

from pactmw.core.replay import MemoryReplayMemory, ReplayMemory, StoreReplayMemory
from pactmw.protocols.parafe._ap2 import (
    AP2_CHECKOUT_MANDATE_KEY,
    AP2_CHECKOUT_RECEIPT_KEY,
    AP2_EXTENSION_URI,
    AP2_PAYMENT_MANDATE_KEY,
    AP2_PAYMENT_RECEIPT_KEY,
    Ap2Data,
    ap2_card_extension,
    ap2_parts,
    read_ap2,
    with_ap2,
)
from pactmw.protocols.parafe._ap2_receipts import (
    AP2_RECEIPT_KINDS,
    Ap2Outcome,
    Ap2Receipt,
    MandateRef,
    MandateReferences,
    mandate_references,
    sign_ap2_receipt,
)
from pactmw.protocols.parafe._broker import (
    BrokerKeys,
    KeySource,
    StaticBrokerKeys,
    broker_key_set,
)
from pactmw.protocols.parafe._broker_api import BrokerRetry, FiledReceipt, request_pop
from pactmw.protocols.parafe._card import (
    CardExtension,
    ScopeRequirement,
    TrustedIssuer,
    card_extension,
    parse_card_extension,
    scope_requirements_from_policies,
)
from pactmw.protocols.parafe._client import ConsentPresenter
from pactmw.protocols.parafe._consent import ConsentClaims
from pactmw.protocols.parafe._constants import (
    BROKER_DID,
    CONSENT_ISSUER,
    DEFAULT_BROKER_URL,
    EXTENSION_URI,
    MAX_ACTION_RECEIPTS,
)
from pactmw.protocols.parafe._credential import (
    averify_credential_jwt,
    averify_identity_credential,
    verify_credential_jwt,
    verify_identity_credential,
)
from pactmw.protocols.parafe._did import DidDocument, DidUnavailable, agent_did
from pactmw.protocols.parafe._errors import (
    EXPIRED_CONSENT_TOKEN,
    INVALID_CONSENT_TOKEN,
    INVALID_PROOF,
    MALFORMED_PARAFE_DATA,
    MISSING_PARAFE_EXTENSION,
    RECEIPT_CODES,
    SCOPE_VIOLATION,
    VERIFIER_CODES,
    WRONG_AUDIENCE,
    ParafeError,
)
from pactmw.protocols.parafe._identity import IDENTITY_VCT, IdentityCredential
from pactmw.protocols.parafe._message import (
    Consent,
    ErrorMember,
    HandshakeChallenge,
    HandshakeComplete,
    ParafeData,
    SessionClosed,
    activation_headers,
    consent_data,
    error_reply_data,
    is_activated,
    parse_parafe_data,
    read_consent,
    read_parafe,
    requested_extensions,
    with_action_receipts,
    with_parafe,
)
from pactmw.protocols.parafe._online import OnlineVerification
from pactmw.protocols.parafe._presentation import (
    averify_presentation_proof,
    verify_presentation_proof,
)
from pactmw.protocols.parafe._proof import ProofClaims, create_presentation_proof
from pactmw.protocols.parafe._receipt_signer import ReceiptSigner, receipt_error_for
from pactmw.protocols.parafe._receipts import (
    ActionReceipt,
    IndexAck,
    SessionReceipt,
    check_session_index,
    consent_ref,
    details_hash,
    entry_hash,
    receipt_hash,
)
from pactmw.protocols.parafe._verify import ParafeVerifier, ReceiptVerifier, VerifiedConsent

__all__ = [
    "AP2_CHECKOUT_MANDATE_KEY",
    "AP2_CHECKOUT_RECEIPT_KEY",
    "AP2_EXTENSION_URI",
    "AP2_PAYMENT_MANDATE_KEY",
    "AP2_PAYMENT_RECEIPT_KEY",
    "AP2_RECEIPT_KINDS",
    "BROKER_DID",
    "CONSENT_ISSUER",
    "DEFAULT_BROKER_URL",
    "EXPIRED_CONSENT_TOKEN",
    "EXTENSION_URI",
    "IDENTITY_VCT",
    "INVALID_CONSENT_TOKEN",
    "INVALID_PROOF",
    "MALFORMED_PARAFE_DATA",
    "MAX_ACTION_RECEIPTS",
    "MISSING_PARAFE_EXTENSION",
    "RECEIPT_CODES",
    "SCOPE_VIOLATION",
    "VERIFIER_CODES",
    "WRONG_AUDIENCE",
    "ActionReceipt",
    "Ap2Data",
    "Ap2Outcome",
    "Ap2Receipt",
    "BrokerKeys",
    "BrokerRetry",
    "CardExtension",
    "Consent",
    "ConsentClaims",
    "ConsentPresenter",
    "DidDocument",
    "DidUnavailable",
    "ErrorMember",
    "FiledReceipt",
    "HandshakeChallenge",
    "HandshakeComplete",
    "IdentityCredential",
    "IndexAck",
    "KeySource",
    "MandateRef",
    "MandateReferences",
    "MemoryReplayMemory",
    "OnlineVerification",
    "ParafeData",
    "ParafeError",
    "ParafeVerifier",
    "ProofClaims",
    "ReceiptSigner",
    "ReceiptVerifier",
    "ReplayMemory",
    "ScopeRequirement",
    "SessionClosed",
    "SessionReceipt",
    "StaticBrokerKeys",
    "StoreReplayMemory",
    "TrustedIssuer",
    "VerifiedConsent",
    "activation_headers",
    "agent_did",
    "ap2_card_extension",
    "ap2_parts",
    "averify_credential_jwt",
    "averify_identity_credential",
    "averify_presentation_proof",
    "broker_key_set",
    "card_extension",
    "check_session_index",
    "consent_data",
    "consent_ref",
    "create_presentation_proof",
    "details_hash",
    "entry_hash",
    "error_reply_data",
    "is_activated",
    "mandate_references",
    "parse_card_extension",
    "parse_parafe_data",
    "read_ap2",
    "read_consent",
    "read_parafe",
    "receipt_error_for",
    "receipt_hash",
    "request_pop",
    "requested_extensions",
    "scope_requirements_from_policies",
    "sign_ap2_receipt",
    "verify_credential_jwt",
    "verify_identity_credential",
    "verify_presentation_proof",
    "with_action_receipts",
    "with_ap2",
    "with_parafe",
]
