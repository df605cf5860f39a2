"""Reading and writing Parafé data in A2A messages (parafe-verifier.md §4a, §7.5, §11).

Parafé data lives at `message.metadata[EXTENSION_URI]`, never in parts. Reading is total: any
JSON value gives a result or a `ParafeError` with `MISSING_PARAFE_EXTENSION` or
`MALFORMED_PARAFE_DATA`, never another exception.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from attrs import field, frozen

from pactmw.protocols.parafe._constants import (
    A2A_EXTENSIONS_HEADER,
    A2A_EXTENSIONS_HEADER_V0_3,
    A2A_VERSION_HEADER,
    EXTENSION_URI,
    MAX_ACTION_RECEIPTS,
    MEMBERS,
)
from pactmw.protocols.parafe._errors import error_data, malformed, missing

_CHALLENGE = re.compile(r"[0-9a-fA-F]{64}")
_HANDSHAKE_STATUSES = ("authenticated", "rejected", "error")

Headers = Mapping[str, Any] | Iterable[tuple[str, str]]


@frozen
class Consent:
    """The `consent` member: the token, the session it claims, and the presentation proof."""

    token: str = field(repr=False)
    session_id: str
    proof: str | None = field(default=None, repr=False)


@frozen
class HandshakeChallenge:
    """The `handshake_challenge` member (client -> agent)."""

    handshake_id: str
    challenge: str
    initiator_agent_id: str
    broker_url: str
    requested_scope: str
    requested_permissions: tuple[str, ...] | None = None


@frozen
class HandshakeComplete:
    """The `handshake_complete` member (agent -> client).

    `consent_token` is a string whenever `status` is `authenticated`. The optional members are
    kept only when they are strings (the reference does not check them).
    """

    handshake_id: str
    status: str
    consent_token: str | None = field(default=None, repr=False)
    session_id: str | None = None
    error_code: str | None = None
    error_message: str | None = None


@frozen
class SessionClosed:
    """The `session_closed` member: the session and the broker's session receipt (a JWS)."""

    session_id: str
    receipt: str = field(repr=False)


@frozen
class ErrorMember:
    """The `error` member: a Parafé error code and message from the other agent."""

    code: str
    message: str


Member = HandshakeChallenge | HandshakeComplete | Consent | SessionClosed | ErrorMember


@frozen
class ParafeData:
    """Parafé data as read from a message: at most one member, plus any action receipts."""

    member: Member | None
    action_receipts: tuple[str, ...] = field(default=(), repr=False)


def _three_parts(value: Any) -> bool:
    return isinstance(value, str) and value.count(".") == 2


def _receipts(value: Any) -> tuple[str, ...]:
    # §4a step 3: checked before anything else, and a bad list spoils the whole message. The
    # seed text only says "at most 50"; the reference also refuses an empty list and entries
    # that are not three-part strings, and so must we, or a message it refuses we would read
    # (§12 item 9).
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_ACTION_RECEIPTS:
        raise malformed(
            "action_receipts",
            f"expected an array of 1-{MAX_ACTION_RECEIPTS} action receipt JWSs",
        )
    if not all(_three_parts(item) for item in value):
        raise malformed("action_receipts", "each entry must be an action receipt JWS")
    return tuple(value)


def _object(value: Any, label: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise malformed(label, "expected an object")
    return value


def _strings(obj: Mapping[str, Any], label: str, names: Sequence[str]) -> None:
    absent = [name for name in names if not isinstance(obj.get(name), str)]
    if absent:
        raise malformed(label, f"missing fields: {', '.join(absent)}")


def _optional_str(obj: Mapping[str, Any], name: str) -> str | None:
    value = obj.get(name)
    return value if isinstance(value, str) else None


def _member(name: str, value: Any) -> Member:
    obj = _object(value, name)
    if name == "consent":
        _strings(obj, name, ("token", "session_id"))
        # Present means present: `"proof": null` is refused, as the reference does.
        if "proof" in obj and not isinstance(obj["proof"], str):
            raise malformed(name, "proof must be a string")
        return Consent(token=obj["token"], session_id=obj["session_id"], proof=obj.get("proof"))
    if name == "handshake_challenge":
        _strings(
            obj,
            name,
            ("handshake_id", "challenge", "initiator_agent_id", "broker_url", "requested_scope"),
        )
        perms = obj.get("requested_permissions")
        if "requested_permissions" in obj and not (
            isinstance(perms, list) and all(isinstance(p, str) for p in perms)
        ):
            raise malformed(name, "requested_permissions must be an array of strings")
        if _CHALLENGE.fullmatch(obj["challenge"]) is None:
            raise malformed(name, "challenge nonce must be a 64-character hex string")
        return HandshakeChallenge(
            handshake_id=obj["handshake_id"],
            challenge=obj["challenge"],
            initiator_agent_id=obj["initiator_agent_id"],
            broker_url=obj["broker_url"],
            requested_scope=obj["requested_scope"],
            requested_permissions=tuple(perms) if isinstance(perms, list) else None,
        )
    if name == "handshake_complete":
        _strings(obj, name, ("handshake_id", "status"))
        status = obj["status"]
        if status not in _HANDSHAKE_STATUSES:
            raise malformed(name, "status must be authenticated, rejected or error")
        if status == "authenticated" and not isinstance(obj.get("consent_token"), str):
            raise malformed(name, "consent_token is required when status is authenticated")
        return HandshakeComplete(
            handshake_id=obj["handshake_id"],
            status=status,
            consent_token=_optional_str(obj, "consent_token"),
            session_id=_optional_str(obj, "session_id"),
            error_code=_optional_str(obj, "error_code"),
            error_message=_optional_str(obj, "error_message"),
        )
    if name == "session_closed":
        _strings(obj, name, ("session_id", "receipt"))
        if not _three_parts(obj["receipt"]):
            raise malformed(name, "receipt must be the receipt JWS")
        return SessionClosed(session_id=obj["session_id"], receipt=obj["receipt"])
    _strings(obj, name, ("code", "message"))
    return ErrorMember(code=obj["code"], message=obj["message"])


def parse_parafe_data(value: Any) -> ParafeData | None:
    """Read the value stored under the extension URI (§4a steps 1-5, §11).

    None when there is no Parafé data this version understands (absent, `null`, or only
    unknown members). Raises `ParafeError(MALFORMED_PARAFE_DATA)` for data that is present but
    invalid: not an object, `{}`, two members, a bad member, or bad `action_receipts`.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise malformed("metadata", "expected an object")
    receipts = _receipts(value["action_receipts"]) if "action_receipts" in value else ()
    # Present means the key is there, even with `null` (JavaScript's `!== undefined`).
    present = [name for name in MEMBERS if name in value]
    if not present:
        if "action_receipts" in value:
            return ParafeData(member=None, action_receipts=receipts)
        if value:
            # Forward compatibility: only members a later revision may add.
            return None
        # The seed says data with no recognised member reads as absent; the reference makes
        # `{}` malformed (§12 item 10), and interoperability follows the reference.
        raise malformed("metadata", f"expected one of {', '.join(MEMBERS)}, or action_receipts")
    if len(present) > 1:
        raise malformed("metadata", f"expected exactly one member, got {', '.join(present)}")
    return ParafeData(member=_member(present[0], value[present[0]]), action_receipts=receipts)


def read_parafe(message: Any) -> ParafeData | None:
    """The Parafé data of an A2A message (a JSON object), or None when it carries none.

    A message that is not an object, or whose `metadata` is not one, carries none.
    """
    if not isinstance(message, Mapping):
        return None
    metadata = message.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    return parse_parafe_data(metadata.get(EXTENSION_URI))


def read_consent(message: Any) -> Consent:
    """The `consent` member of a message (§4a).

    Raises `ParafeError`: `MISSING_PARAFE_EXTENSION` when the message has no Parafé data, only
    receipts, only unknown members, or a member other than `consent`;
    `MALFORMED_PARAFE_DATA` when the data is invalid.
    """
    data = read_parafe(message)
    if data is None or not isinstance(data.member, Consent):
        raise missing()
    return data.member


def message_id(message: Any) -> str | None:
    """The A2A `messageId` of a message, when it is a string."""
    if isinstance(message, Mapping):
        value = message.get("messageId")
        if isinstance(value, str):
            return value
    return None


# -- activation (§1, spec §3) ----------------------------------------------------------------


def _header_values(headers: Headers, names: frozenset[str]) -> list[str]:
    pairs: Iterable[tuple[Any, Any]]
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    values: list[str] = []
    for name, value in pairs:
        if not isinstance(name, str) or name.lower() not in names:
            continue
        if isinstance(value, str):
            values.append(value)
        elif isinstance(value, (list, tuple)):
            values.extend(v for v in value if isinstance(v, str))
    return values


_ACTIVATION_HEADERS = frozenset({A2A_EXTENSIONS_HEADER.lower(), A2A_EXTENSIONS_HEADER_V0_3.lower()})


def requested_extensions(headers: Headers) -> tuple[str, ...]:
    """Every extension URI a request activates, from `A2A-Extensions` and (A2A 0.3)
    `X-A2A-Extensions`: names case-insensitive, values split on `,` and trimmed."""
    uris: list[str] = []
    for value in _header_values(headers, _ACTIVATION_HEADERS):
        uris.extend(part.strip() for part in value.split(",") if part.strip())
    return tuple(uris)


def is_activated(headers: Headers = (), message: Any = None) -> bool:
    """Tell whether a request activates the Parafé extension: a header lists the URI exactly,
    or the message's `extensions` does (the spec asks clients for both)."""
    if EXTENSION_URI in requested_extensions(headers):
        return True
    if isinstance(message, Mapping):
        extensions = message.get("extensions")
        if isinstance(extensions, list) and EXTENSION_URI in extensions:
            return True
    return False


def activation_headers(a2a_version: str = "1.0", others: Iterable[str] = ()) -> dict[str, str]:
    """The headers a client sends to activate Parafé (A2A 1.0, or `X-A2A-Extensions` for 0.3)."""
    value = ",".join([EXTENSION_URI, *(uri for uri in others if uri != EXTENSION_URI)])
    if a2a_version == "0.3":
        return {A2A_EXTENSIONS_HEADER_V0_3: value}
    return {A2A_VERSION_HEADER: "1.0", A2A_EXTENSIONS_HEADER: value}


# -- writing ---------------------------------------------------------------------------------


def _with_uri(message: Mapping[str, Any]) -> list[Any]:
    extensions = list(message.get("extensions") or [])
    if EXTENSION_URI not in extensions:
        extensions.append(EXTENSION_URI)
    return extensions


def with_parafe(message: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `message` carrying `data` as its Parafé data, with the URI in `extensions`.

    Action receipts already attached are kept unless `data` brings its own.
    """
    metadata = dict(message.get("metadata") or {})
    new = dict(data)
    prior = metadata.get(EXTENSION_URI)
    if isinstance(prior, Mapping) and "action_receipts" in prior and "action_receipts" not in new:
        new["action_receipts"] = list(prior["action_receipts"])
    metadata[EXTENSION_URI] = new
    return {**message, "extensions": _with_uri(message), "metadata": metadata}


def with_action_receipts(message: Mapping[str, Any], receipts: Iterable[str]) -> dict[str, Any]:
    """A copy of `message` with `receipts` added to its Parafé data (duplicates dropped).

    Raises `ValueError` past 50 receipts: readers refuse such a message outright (§7.5), so
    split the work over more than one message instead.
    """
    metadata = dict(message.get("metadata") or {})
    prior = metadata.get(EXTENSION_URI)
    base = dict(prior) if isinstance(prior, Mapping) else {}
    existing = base.get("action_receipts")
    merged = list(dict.fromkeys([*(existing if isinstance(existing, list) else []), *receipts]))
    if not merged:
        return dict(message)
    if len(merged) > MAX_ACTION_RECEIPTS:
        raise ValueError(f"at most {MAX_ACTION_RECEIPTS} action receipts fit in one message")
    base["action_receipts"] = merged
    metadata[EXTENSION_URI] = base
    return {**message, "extensions": _with_uri(message), "metadata": metadata}


def error_reply_data(error: BaseException, receipts: Iterable[str] = ()) -> dict[str, Any]:
    """The Parafé data of a refusal: `{"error": {code, message}, "action_receipts"?: [...]}`.

    Any exception that is not a `ParafeError` is reported as the reference does, as
    `INVALID_CONSENT_TOKEN` with a fixed text (nothing internal leaks).
    """
    data: dict[str, Any] = {"error": error_data(error)}
    listed = list(dict.fromkeys(receipts))
    if len(listed) > MAX_ACTION_RECEIPTS:
        raise ValueError(f"at most {MAX_ACTION_RECEIPTS} action receipts fit in one message")
    if listed:
        data["action_receipts"] = listed
    return data


def consent_data(token: str, session_id: str, proof: str | None = None) -> dict[str, Any]:
    """The Parafé data of a consent-carrying message: `{"consent": {token, session_id, proof?}}`."""
    consent: dict[str, str] = {"token": token, "session_id": session_id}
    if proof is not None:
        consent["proof"] = proof
    return {"consent": consent}


__all__ = [
    "Consent",
    "ErrorMember",
    "HandshakeChallenge",
    "HandshakeComplete",
    "Headers",
    "Member",
    "ParafeData",
    "SessionClosed",
    "activation_headers",
    "consent_data",
    "error_reply_data",
    "is_activated",
    "message_id",
    "parse_parafe_data",
    "read_consent",
    "read_parafe",
    "requested_extensions",
    "with_action_receipts",
    "with_parafe",
]
