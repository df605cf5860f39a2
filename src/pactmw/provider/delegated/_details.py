"""RFC 9396 authorization details in the device flow: requested, approved, issued.

The rules are in `pactmw.provider.authorization_details`; this module reads them off the
device authorization request and keeps the entries in the store: requested ones with the
device authorization until the person decides, approved ones with the grant (a widened
grant holds the union), from where every token response and delegation token reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pactmw.provider.authorization_details import (
    InvalidAuthorizationDetails,
    entry_from_text,
    entry_text,
    kept_with_scopes,
    read_authorization_details,
)
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.delegated._errors import OAuthError
from pactmw.provider.flow import SubFlow, store
from pactmw.store import AuthorizationDetailsStore
from pactmw.store.base import Store

PARAMETER = "authorization_details"


def requested_details(
    form: Mapping[str, list[str]], config: DelegationConfig, scopes: Sequence[str]
) -> tuple[dict[str, Any], ...]:
    """The checked entries of a device authorization request (none without the field)."""
    values = form.get(PARAMETER)
    if values is None:
        return ()
    if len(values) != 1:
        raise OAuthError("invalid_authorization_details", f"send {PARAMETER} once")
    try:
        return read_authorization_details(values[0], config.authorization_details, scopes)
    except InvalidAuthorizationDetails as exc:
        raise OAuthError("invalid_authorization_details", exc.description) from exc


def device_owner(device_code_hash: str) -> str:
    return f"device:{device_code_hash}"


def grant_owner(grant_id: str) -> str:
    return f"grant:{grant_id}"


def _held(target: Store) -> AuthorizationDetailsStore:
    # The Provider refuses, at startup, a Brand with types on a store without these.
    assert isinstance(target, AuthorizationDetailsStore)
    return target


def keep(
    target: Store,
    owner: str,
    entries: Sequence[Mapping[str, Any]],
    now: float,
    expires_at: float | None,
) -> SubFlow:
    """Store `entries` for `owner` (nothing to do without entries)."""
    if entries:
        yield store(
            _held(target).add_authorization_details,
            owner=owner,
            entries=[entry_text(entry) for entry in entries],
            now=now,
            expires_at=expires_at,
        )


def held(target: Store, config: DelegationConfig, owner: str) -> SubFlow:
    """The entries `owner` holds (none, without a store lookup, at a Brand accepting none)."""
    if not config.authorization_details:
        return ()
    texts: tuple[str, ...] = yield store(_held(target).authorization_details, owner=owner)
    return tuple(entry_from_text(text) for text in texts)


def approved(
    config: DelegationConfig, requested: Sequence[Mapping[str, Any]], granted: Sequence[str]
) -> tuple[Mapping[str, Any], ...]:
    """What the decision approves: the requested entries whose scope was ticked."""
    return kept_with_scopes(requested, config.authorization_details, granted)


__all__ = [
    "PARAMETER",
    "approved",
    "device_owner",
    "grant_owner",
    "held",
    "keep",
    "requested_details",
]
