"""`pactmw grants list` and `pactmw grants revoke`: the delegation grants in a Provider's
store, read and revoked from another process than `pactmw serve`."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from pactmw.cli._admin import (
    CANNOT_RUN_HELP,
    admin_provider,
    load_settings,
    refilled,
    shared_store,
)
from pactmw.cli._common import CONFIG, JSON_TABLE, Command, CommandError, log_to_stderr, option

if TYPE_CHECKING:
    from pactmw.provider import Provider, ProviderSettings
    from pactmw.store.base import Store

_GRANTS_HELP = """\
List or revoke the delegation grants of the PACT Delegated profile: what each user let a
personal agent do on their account at a Brand. The grants are read from the store of a TOML
configuration (the file `pactmw serve` uses); run the command from the directory pactmw serve
runs in, since a relative sqlite store path (the default) is relative to the current directory.
"""

_SHARED = "grants can only be managed in a sqlite or PostgreSQL store"

_GRANTS_LIST_HELP = refilled(
    f"""\
List the live delegation grants (newest first) as a table: grant id, Brand, account, agent
issuer, scopes, expiry and status. --all adds revoked and expired grants; --json prints a JSON
array instead (times in ISO 8601 UTC). Exit status 0, or {CANNOT_RUN_HELP}.
"""
)

_GRANTS_REVOKE_HELP = refilled(
    f"""\
Revoke one grant by id, or every live grant of an account (at one Brand with --brand). The
grant's delegation tokens are refused (401 invalid_token) on their next use and its refresh
tokens stop working. Revocation goes through the Provider, which emits the
agent.grant_revoked audit event (logged on stderr here). Exit status 0 when something was
revoked, 1 when nothing was (unknown id, already revoked or expired, no live grant of the
account), {CANNOT_RUN_HELP}.
"""
)


def _grants_list(args: argparse.Namespace) -> int:
    from pactmw.provider.grant_admin import grants_listing

    settings = load_settings(args.config)
    now = time.time()
    with shared_store(settings.store, _SHARED) as store:
        grants = store.list_grants(
            brand_id=args.brand, account=args.account, include_inactive=args.all, now=now
        )
    print(grants_listing(grants, now, include_inactive=args.all, as_json=args.json))
    return 0


def _revoking_provider(settings: ProviderSettings, store: Store, config: str) -> Provider:
    """A Provider over `store` for its revocation API (which emits the audit events)."""
    if not any(brand.delegation is not None for brand in settings.brands):
        raise CommandError(
            f"{config}: no [brands.ID.delegation] table, so no Brand has grants to revoke"
        )
    return admin_provider(settings, store)


def _grants_revoke(args: argparse.Namespace) -> int:
    from pactmw.provider.grant_admin import revoke_account, revoke_one, revoke_usage_problem

    problem = revoke_usage_problem(args.grant_id, args.account, args.brand)
    if problem is not None:
        raise CommandError(problem)
    settings = load_settings(args.config)
    with shared_store(settings.store, _SHARED) as store:
        provider = _revoking_provider(settings, store, args.config)
        log_to_stderr("pactmw.audit", "INFO")
        if args.grant_id is not None:
            done = revoke_one(provider, store, args.grant_id)
        else:
            done = revoke_account(provider, args.account, args.brand)
        if done.nothing is not None:
            raise CommandError(done.nothing, 1)
        for line in done.lines:
            print(line)
        return 0


COMMAND = Command(
    "grants",
    "list or revoke the delegation grants in a Provider's store",
    _GRANTS_HELP,
    actions=(
        Command(
            "list",
            "list the grants",
            _GRANTS_LIST_HELP,
            _grants_list,
            options=(
                CONFIG,
                option("--brand", metavar="B", help="only the grants at Brand B"),
                option("--account", metavar="A", help="only the grants of account A"),
                option("--all", action="store_true", help="also list revoked and expired grants"),
                JSON_TABLE,
            ),
        ),
        Command(
            "revoke",
            "revoke a grant, or every grant of an account",
            _GRANTS_REVOKE_HELP,
            _grants_revoke,
            options=(
                CONFIG,
                option("grant_id", nargs="?", metavar="GRANT_ID", help="the grant to revoke"),
                option("--account", metavar="A", help="revoke every live grant of account A"),
                option("--brand", metavar="B", help="with --account: only the grants at Brand B"),
            ),
            usage="pactmw grants revoke [-h] --config FILE (GRANT_ID | --account A [--brand B])",
        ),
    ),
)


__all__ = [
    "COMMAND",
]
