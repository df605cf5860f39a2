"""RFC 9396 authorization details: a grant bound to a resource, not only to a scope.

A Brand lists the types it accepts (`DelegationConfig.authorization_details`), each with
the scope it comes with, a check of one entry (a JSON-Schema-like description, a callable,
or both) and a human rendering for the consent page. The rules, framework-neutral:

- a personal agent may send `authorization_details` (a JSON array, form-encoded, RFC 9396
  §2 and §6) with its device authorization request; an entry whose type the Brand does not
  accept, that fails its check, whose scope is not requested, or with a bidirectional
  control in a string (it could reorder its line on the consent page), makes the whole request
  `invalid_authorization_details` (400), as does the field itself at a Brand accepting none;
- the person sees each entry under its scope on the consent page; unticking the scope
  declines its entries;
- what was approved is echoed in the token response and the delegation token, and kept
  across refresh (it lives with the grant; a widened grant holds the union);
- a tool bound to a type (`ToolRegistry.tool(..., authorization_details=Requires(...))`)
  runs only for arguments one approved entry allows. Like the reference Provider, a grant
  with no entry of that type is limited by its scope alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from attrs import field, frozen

from pactmw.core.encoding import bidi_control_in, json_dumps, json_loads
from pactmw.core.errors import MalformedInput, PactmwError
from pactmw.protocols.delegation import Delegation
from pactmw.provider._json_schema import check_schema, validate
from pactmw.provider.tools import ToolError

#: How many entries one request may carry (a consent page must stay readable).
MAX_ENTRIES = 20
_TYPE = re.compile(r"[\x21-\x7E]{1,200}")


class InvalidAuthorizationDetails(PactmwError):
    """`authorization_details` that cannot be accepted: 400 `invalid_authorization_details`."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class AuthorizationDetailsMismatch(ToolError):
    """A tool was asked for an action no approved authorization detail allows.

    The model reads it as a tool error (`authorization_details_mismatch`) and a write tool's
    action is reported as `rejected`; escaping the bot, it is the turn's answer. Never a
    silent success.
    """

    code = "authorization_details_mismatch"


EntryCheck = Callable[[Mapping[str, Any]], None]
EntryRendering = Callable[[Mapping[str, Any]], str]


@frozen
class AuthorizationDetailType:
    """One accepted type: `type` (its identifier), `scope` it comes with and is dropped with.

    `schema` (the JSON Schema subset of tool arguments) and/or `check` (raises ValueError
    with a message for an entry it refuses) decide what an entry may hold; give at least
    one. `render(entry)` is the sentence on the consent page (default: its members).
    """

    type: str
    scope: str
    schema: Mapping[str, Any] | None = field(default=None, repr=False)
    check: EntryCheck | None = field(default=None, repr=False)
    render: EntryRendering | None = field(default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.type, str) or not _TYPE.fullmatch(self.type):
            raise ValueError(f"authorization details type {self.type!r} must be printable ASCII")
        if self.schema is None and self.check is None:
            raise ValueError(f"authorization details type {self.type!r} needs a schema or check")
        if self.schema is not None:
            check_schema(self.schema, f"authorization details type {self.type!r} schema")

    def problem(self, entry: Mapping[str, Any]) -> str | None:
        """Why `entry` is refused, or None."""
        if self.schema is not None:
            problem = validate(entry, self.schema, "")
            if problem is not None:
                return problem
        if self.check is not None:
            try:
                self.check(entry)
            except ValueError as exc:
                return str(exc) or "refused"
        return None

    def describe(self, entry: Mapping[str, Any]) -> str:
        """The human rendering of one entry."""
        if self.render is not None:
            return self.render(entry)
        return "; ".join(
            f"{name}: {_plain(value)}" for name, value in entry.items() if name != "type"
        )


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_plain(item) for item in value)
    if isinstance(value, str):
        return value
    return json_dumps(value).decode("utf-8")


def _bidi_control(value: Any) -> str | None:
    """The first explicit bidirectional control in any string of `value` (keys too), or None."""
    if isinstance(value, str):
        return bidi_control_in(value)
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list):
        for item in value:
            control = _bidi_control(item)
            if control is not None:
                return control
    return None


def read_authorization_details(
    raw: str,
    types: Sequence[AuthorizationDetailType],
    requested_scopes: Collection[str],
) -> tuple[dict[str, Any], ...]:
    """The entries of a request's `authorization_details` parameter, checked; or raise
    `InvalidAuthorizationDetails` saying why (RFC 9396 §5)."""
    if not types:
        raise InvalidAuthorizationDetails(
            "this authorization server accepts no authorization_details"
        )
    try:
        entries = json_loads(raw)
    except MalformedInput as exc:
        raise InvalidAuthorizationDetails(f"authorization_details is not JSON ({exc})") from exc
    if not isinstance(entries, list) or not entries:
        raise InvalidAuthorizationDetails("authorization_details must be a non-empty JSON array")
    if len(entries) > MAX_ENTRIES:
        raise InvalidAuthorizationDetails(f"at most {MAX_ENTRIES} authorization details")
    accepted = {kind.type: kind for kind in types}
    result: list[dict[str, Any]] = []
    for index, entry in enumerate(entries):
        where = f"authorization_details[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise InvalidAuthorizationDetails(f"{where} must be an object with a string type")
        kind = accepted.get(entry["type"])
        if kind is None:
            raise InvalidAuthorizationDetails(f"{where}: unknown type")
        if kind.scope not in requested_scopes:
            raise InvalidAuthorizationDetails(f"{where} needs the scope {kind.scope}")
        problem = kind.problem(entry)
        if problem is not None:
            raise InvalidAuthorizationDetails(f"{where}: {problem}")
        control = _bidi_control(entry)
        if control is not None:
            # The consent page shows the entry's text: an override in one value could turn
            # the rest of its line around ("SK 318" read as "SK 813").
            raise InvalidAuthorizationDetails(
                f"{where} must not hold bidirectional controls ({control})"
            )
        if entry not in result:
            result.append(entry)
    return tuple(result)


def kept_with_scopes(
    entries: Sequence[Mapping[str, Any]],
    types: Sequence[AuthorizationDetailType],
    granted_scopes: Collection[str],
) -> tuple[Mapping[str, Any], ...]:
    """The entries whose type's scope was granted (the others were declined with it)."""
    scope_of = {kind.type: kind.scope for kind in types}
    return tuple(
        entry for entry in entries if scope_of.get(entry.get("type", "")) in granted_scopes
    )


def entry_text(entry: Mapping[str, Any]) -> str:
    """How an entry is stored: its compact JSON."""
    return json_dumps(dict(entry)).decode("utf-8")


def entry_from_text(text: str) -> dict[str, Any]:
    entry: dict[str, Any] = json_loads(text)
    return entry


@frozen
class Requires:
    """What a tool needs from one type of authorization details: `fields` maps an entry's
    member to the tool argument that must equal it (`{"identifier": "confirmation"}`); an
    entry's array member allows any of its items."""

    type: str
    fields: Mapping[str, str]

    def permits(self, delegation: Delegation | None, arguments: Mapping[str, Any]) -> bool:
        """True when the call is within the approved entries of this type (or the grant has
        none of this type: then the scope alone decides, as in the reference)."""
        if delegation is None:
            return False
        entries = delegation.details_of(self.type)
        if not entries:
            return True
        return any(self._allows(entry, arguments) for entry in entries)

    def _allows(self, entry: Mapping[str, Any], arguments: Mapping[str, Any]) -> bool:
        for member, argument in self.fields.items():
            if member not in entry or argument not in arguments:
                return False
            value, wanted = entry[member], arguments[argument]
            if value != wanted and not (isinstance(value, list) and wanted in value):
                return False
        return True


__all__ = [
    "MAX_ENTRIES",
    "AuthorizationDetailType",
    "AuthorizationDetailsMismatch",
    "EntryCheck",
    "EntryRendering",
    "InvalidAuthorizationDetails",
    "Requires",
    "entry_from_text",
    "entry_text",
    "kept_with_scopes",
    "read_authorization_details",
]
