"""The checks' names: stable, since scripts and tests select on them
(`pactmw.check.names.REPLY`)."""

CARD = "card: fetch and schema"
CARD_HEADERS = "card: headers"
CARD_INTERFACE = "card: supportedInterfaces"
CARD_SCHEME = "card: identity scheme alone in a requirement"
CARD_UNKNOWN = "card: unknown Brand is 404"
REPLY = "message: reply and contextId round trip"
ENCODED_COLON = "message: message%3Asend"
RETRY = "message: retry returns the stored reply byte for byte"
AGENT_MESSAGE_ID = "message: messageId of an agent reply is refused"
FOREIGN_SUB = "context: another user's contextId is unknown"
UNKNOWN_CONTEXT_ID = "context: unknown contextId"
FOREIGN_BRAND = "context: another Brand's contextId is unknown"
TOKEN_REUSE = "auth: one token on both Brands, then an unknown Brand"  # noqa: S105 - a check name
TOKEN_REUSE_ONE_BRAND = "auth: one token reused, then an unknown Brand"  # noqa: S105 - a check name
LIST_TASKS = "tasks: ListTasks default"
PAGE_SIZES = "tasks: pageSize 1 and 100"
BAD_PAGE_SIZES = "tasks: invalid pageSize"
TASK_ROUTES = "tasks: GetTask and CancelTask are TASK_NOT_FOUND"
STREAMING = "unsupported: message:stream and subscribe"
EXTENDED_CARD = "unsupported: extendedAgentCard"
PUSH_CONFIGS = "unsupported: push notification configs"
VERSION_TOLERANCE = "headers: A2A-Version missing or 2.0"
CONTENT_TYPE_TOLERANCE = "headers: request Content-Type variants"
UNMATCHED_ROUTES = "routes: unmatched routes are 404/405 before auth"
MISSING_TOKEN = "auth: missing token"  # noqa: S105 - a check name
MISSING_TOKEN_BODY = "auth: missing token is checked before the body"  # noqa: S105 - a check name
HS256 = "auth: HS256 keyed with the public key"
EXPIRED = "auth: expired token"
FUTURE_IAT = "auth: iat 31 s in the future"
LONG_LIFETIME = "auth: lifetime over 300 s"
AUD_INTERFACE = "auth: aud is the interface URL"
DISABLED_ISSUER = "auth: disabled or unknown issuer"
OTHER_KEY = "auth: signed by another key with the same kid"
ALG_NONE = "auth: alg none"
UNKNOWN_BRAND = "auth: unknown Brand"
BAD_JSON = "malformed: body '{'"
TASK_ID = "malformed: taskId"
RAW_PART = "malformed: raw part"
CONTENT_TYPE = "content type: every A2A answer is exactly application/a2a+json"

DELEGATED_SCHEME = "delegated: card scheme"
DELEGATED_METADATA = "delegated: authorization server metadata"
DELEGATED_DETAILS = "delegated: unsupported authorization_details type"
DELEGATED_STEP_UP = "delegated: step-up task"
DELEGATED_REFUSALS = "delegated: device authorization refusals"
DELEGATED_DEVICE = "delegated: device authorization"
DELEGATED_TOKEN = "delegated: token after approval"  # noqa: S105 - a check name
DELEGATED_SINGLE_USE = "delegated: device code is single-use"
DELEGATED_RECEIPT = "delegated: reply carries a verified receipt"
DELEGATED_TAMPERED = "delegated: tampered delegation token is refused"
DELEGATED_REFRESH = "delegated: refresh"
DELEGATED_SPENT_REFRESH = "delegated: spent refresh token is refused"


__all__ = [
    "AGENT_MESSAGE_ID",
    "ALG_NONE",
    "AUD_INTERFACE",
    "BAD_JSON",
    "BAD_PAGE_SIZES",
    "CARD",
    "CARD_HEADERS",
    "CARD_INTERFACE",
    "CARD_SCHEME",
    "CARD_UNKNOWN",
    "CONTENT_TYPE",
    "CONTENT_TYPE_TOLERANCE",
    "DELEGATED_DETAILS",
    "DELEGATED_DEVICE",
    "DELEGATED_METADATA",
    "DELEGATED_RECEIPT",
    "DELEGATED_REFRESH",
    "DELEGATED_REFUSALS",
    "DELEGATED_SCHEME",
    "DELEGATED_SINGLE_USE",
    "DELEGATED_SPENT_REFRESH",
    "DELEGATED_STEP_UP",
    "DELEGATED_TAMPERED",
    "DELEGATED_TOKEN",
    "DISABLED_ISSUER",
    "ENCODED_COLON",
    "EXPIRED",
    "EXTENDED_CARD",
    "FOREIGN_BRAND",
    "FOREIGN_SUB",
    "FUTURE_IAT",
    "HS256",
    "LIST_TASKS",
    "LONG_LIFETIME",
    "MISSING_TOKEN",
    "MISSING_TOKEN_BODY",
    "OTHER_KEY",
    "PAGE_SIZES",
    "PUSH_CONFIGS",
    "RAW_PART",
    "REPLY",
    "RETRY",
    "STREAMING",
    "TASK_ID",
    "TASK_ROUTES",
    "TOKEN_REUSE",
    "TOKEN_REUSE_ONE_BRAND",
    "UNKNOWN_BRAND",
    "UNKNOWN_CONTEXT_ID",
    "UNMATCHED_ROUTES",
    "VERSION_TOLERANCE",
]
