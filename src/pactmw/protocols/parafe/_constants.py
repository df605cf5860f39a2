"""Constants of the Parafé A2A extension v2 (parafe-verifier.md §1, §6, §7)."""

from __future__ import annotations

#: The extension URI: the metadata key, the `message.extensions` entry, the activation value.
EXTENSION_URI = "https://parafe.ai/extensions/a2a/v2"
#: The retired v1 URI: ignored since reference 3.0 (never read, never written).
EXTENSION_URI_V1 = "https://github.com/getparafe/parafe-a2a-extension/v1"
#: A2A 1.0 activation header, and the A2A 0.3 one.
A2A_EXTENSIONS_HEADER = "A2A-Extensions"
A2A_EXTENSIONS_HEADER_V0_3 = "X-A2A-Extensions"
A2A_VERSION_HEADER = "A2A-Version"

DEFAULT_BROKER_URL = "https://api.parafe.ai"
#: `iss` of every consent token.
CONSENT_ISSUER = "parafe-trust-broker"
#: `iss` of session receipts and index acknowledgments.
BROKER_DID = "did:web:api.parafe.ai"

#: Consent tokens are ES256 only since reference 3.0 (§4 step 8): EdDSA tokens are refused
#: even though the broker's JWKS still lists its retired Ed25519 key.
CONSENT_ALGORITHMS = frozenset({"ES256"})

POP_TYP = "parafe-pop+jwt"
ACTION_RECEIPT_TYP = "parafe-action-receipt+jwt"
INDEX_ACK_TYP = "parafe-index-ack+jwt"
SESSION_RECEIPT_TYP = "parafe-session-receipt+jwt"

#: Presentation proofs (§6 step 5): at most 300 s old, with 60 s of clock tolerance either way.
PROOF_MAX_AGE = 300
PROOF_CLOCK_TOLERANCE = 60
#: A proof `jti` is remembered at least this long (§6 step 10: 300 + 60 s), and until its
#: `iat` is older (`proof_flow`).
PROOF_REPLAY_WINDOW = PROOF_MAX_AGE + PROOF_CLOCK_TOLERANCE
PROOF_MIN_JTI_LENGTH = 16
#: Action receipts (§7.3): 60 s of clock tolerance.
RECEIPT_CLOCK_TOLERANCE = 60
#: At most this many action receipts ride in one message (§4a step 3, §7.5).
MAX_ACTION_RECEIPTS = 50
#: Refusal descriptions on receipts are cut to this many characters (§7.1).
MAX_ERROR_DESCRIPTION = 500
#: The broker's own texts (refusal reasons and messages) are cut to this many characters
#: before anyone sees them, as @getparafe/sdk's `mapBrokerError` cuts them.
MAX_BROKER_TEXT = 500

#: `authorization_modality`, weakest to strongest (§3, §4 step 15).
MODALITY_RANK = {"autonomous": 0, "attested": 1, "delegated": 2, "verified": 3}
IDENTITY_ASSURANCES = ("self_registered", "registered", "claimed")
VERIFICATION_TIERS = ("unverified", "email_verified", "domain_verified", "org_verified")
INITIATOR_PROOFS = ("pop", "credential")

#: The five Parafé data members (§4a step 4); `action_receipts` rides beside any of them.
MEMBERS = ("handshake_challenge", "handshake_complete", "consent", "session_closed", "error")

#: The `error` values of an action receipt (§7.1, §9.2).
ACTION_ERRORS = frozenset(
    {"not_permitted", "excluded", "consent_invalid", "consent_expired", "proof_invalid", "failed"}
)
RECEIPT_KINDS = ("parafe.action_receipt", "ap2.checkout_receipt", "ap2.payment_receipt")

#: The broker keeps DID documents this long in its reference client (§14), and so do we.
DID_DOCUMENT_TTL = 600.0
#: Unknown broker `kid`s trigger a JWKS refetch at most this often (§14).
JWKS_REFETCH_COOLDOWN = 60.0
#: While no broker keys are held (every fetch so far failed), the JWKS is asked again at most
#: this often. The reference fetches again on the very next call (§14); one second keeps a
#: broker that is down from being asked once per request.
JWKS_RETRY_WITHOUT_KEYS = 1.0


__all__ = [
    "A2A_EXTENSIONS_HEADER",
    "A2A_EXTENSIONS_HEADER_V0_3",
    "A2A_VERSION_HEADER",
    "ACTION_ERRORS",
    "ACTION_RECEIPT_TYP",
    "BROKER_DID",
    "CONSENT_ALGORITHMS",
    "CONSENT_ISSUER",
    "DEFAULT_BROKER_URL",
    "DID_DOCUMENT_TTL",
    "EXTENSION_URI",
    "EXTENSION_URI_V1",
    "IDENTITY_ASSURANCES",
    "INDEX_ACK_TYP",
    "INITIATOR_PROOFS",
    "JWKS_REFETCH_COOLDOWN",
    "JWKS_RETRY_WITHOUT_KEYS",
    "MAX_ACTION_RECEIPTS",
    "MAX_BROKER_TEXT",
    "MAX_ERROR_DESCRIPTION",
    "MEMBERS",
    "MODALITY_RANK",
    "POP_TYP",
    "PROOF_CLOCK_TOLERANCE",
    "PROOF_MAX_AGE",
    "PROOF_MIN_JTI_LENGTH",
    "PROOF_REPLAY_WINDOW",
    "RECEIPT_CLOCK_TOLERANCE",
    "RECEIPT_KINDS",
    "SESSION_RECEIPT_TYP",
    "VERIFICATION_TIERS",
]
