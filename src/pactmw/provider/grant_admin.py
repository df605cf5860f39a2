"""Operators' view of delegation grants: list them and revoke them, for the `pactmw grants`
command, `manage.py pactmw grants` and `flask pactmw grants` alike (one wording, one rule).

Listing reads the store; revoking goes through the Provider, which emits the
`agent.grant_revoked` audit event for each grant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from attrs import frozen

from pactmw.provider.app import Provider
from pactmw.store.base import Grant, Store

#: How listings show times.
TABLE_TIME = "%Y-%m-%d %H:%M UTC"
JSON_TIME = "%Y-%m-%dT%H:%M:%SZ"
_HEADER = ("GRANT", "BRAND", "ACCOUNT", "AGENT", "SCOPES", "EXPIRES", "STATUS")


def status(grant: Grant, now: float) -> str:
    """`live`, `revoked` or `expired`."""
    if grant.revoked_at is not None:
        return "revoked"
    return "live" if grant.is_live(now) else "expired"


def format_time(value: float | None, pattern: str) -> str | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value, tz=timezone.utc).strftime(pattern)


def aligned_table(rows: Sequence[Sequence[str]]) -> str:
    """`rows` (the header first) as text columns two spaces apart, each as wide as its
    widest cell; the operators' listings (grants, agents) all print this way."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def grant_json(grant: Grant, now: float) -> dict[str, Any]:
    """One grant as JSON (times in ISO 8601 UTC)."""
    return {
        "grant_id": grant.grant_id,
        "brand_id": grant.brand_id,
        "account": grant.account,
        "client_id": grant.client_id,
        "pa_sub": grant.pa_sub,
        "scopes": list(grant.scopes),
        "created_at": format_time(grant.created_at, JSON_TIME),
        "updated_at": format_time(grant.updated_at, JSON_TIME),
        "expires_at": format_time(grant.expires_at, JSON_TIME),
        "revoked_at": format_time(grant.revoked_at, JSON_TIME),
        "status": status(grant, now),
    }


def grants_table(grants: Sequence[Grant], now: float, *, include_inactive: bool) -> str:
    """The listing as an aligned table, or a sentence when there is nothing to list."""
    if not grants:
        if include_inactive:
            return "no grants"
        return "no live grants (--all also lists revoked and expired ones)"
    rows = [_HEADER] + [
        (
            grant.grant_id,
            grant.brand_id,
            grant.account,
            grant.client_id,
            " ".join(grant.scopes),
            format_time(grant.expires_at, TABLE_TIME) or "",
            status(grant, now),
        )
        for grant in grants
    ]
    return aligned_table(rows)


def grants_listing(
    grants: Sequence[Grant], now: float, *, include_inactive: bool, as_json: bool
) -> str:
    """What `grants list` prints: the grants as JSON (`--json`) or as the table."""
    if as_json:
        return json.dumps([grant_json(grant, now) for grant in grants], indent=2)
    return grants_table(grants, now, include_inactive=include_inactive)


def revoke_usage_problem(
    grant_id: str | None, account: str | None, brand: str | None
) -> str | None:
    """Why a `grants revoke` names no one thing to revoke (a usage error), or None."""
    if (grant_id is None) == (account is None):
        return "give either a GRANT_ID or --account A"
    if brand is not None and account is None:
        return "--brand goes with --account (a GRANT_ID names one grant)"
    return None


@frozen
class Revocation:
    """What a revoke did: the lines to print, and why nothing was revoked (or None)."""

    lines: tuple[str, ...]
    nothing: str | None = None


def revoke_one(provider: Provider, store: Store, grant_id: str) -> Revocation:
    """Revoke one grant by id."""
    if provider.revoke_grant(grant_id):
        grant = store.get_grant(grant_id)
        detail = (
            f" (brand {grant.brand_id}, account {grant.account}, agent {grant.client_id})"
            if grant is not None
            else ""
        )
        return Revocation((f"revoked {grant_id}{detail}",))
    grant = store.get_grant(grant_id)
    if grant is None:
        reason = "no such grant"
    elif grant.revoked_at is not None:
        reason = f"already revoked at {format_time(grant.revoked_at, TABLE_TIME)}"
    else:
        reason = f"expired at {format_time(grant.expires_at, TABLE_TIME)}"
    return Revocation((), f"nothing revoked: {grant_id}: {reason}")


def revoke_account(provider: Provider, account: str, brand: str | None) -> Revocation:
    """Revoke every live grant of an account (at one Brand when `brand` is given)."""
    revoked = provider.revoke_account(account, brand_id=brand)
    if not revoked:
        where = f" at brand {brand}" if brand is not None else ""
        return Revocation((), f"nothing revoked: account {account} has no live grant{where}")
    return Revocation(tuple(f"revoked {grant_id}" for grant_id in revoked))


__all__ = [
    "JSON_TIME",
    "TABLE_TIME",
    "Revocation",
    "aligned_table",
    "format_time",
    "grant_json",
    "grants_listing",
    "grants_table",
    "revoke_account",
    "revoke_one",
    "revoke_usage_problem",
    "status",
]
