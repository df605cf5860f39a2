"""`flask pactmw grants list|revoke`: the delegation grants in the store `app.config["PACTMW"]`
configures, with the same wording and rules as `pactmw grants` (the Flask extension adds
this group to `app.cli`)."""

from __future__ import annotations

import json
import time

import click
from flask.cli import AppGroup

from pactmw.provider.grant_admin import grant_json, grants_table, revoke_account, revoke_one
from pactmw.store.base import StoreError

pactmw_cli = AppGroup("pactmw", help="Manage pactmw: list or revoke delegation grants.")
grants_cli = AppGroup("grants", help="List or revoke delegation grants.")
pactmw_cli.add_command(grants_cli)


@grants_cli.command("list")
@click.option("--brand", metavar="B", help="only the grants at Brand B")
@click.option("--account", metavar="A", help="only the grants of account A")
@click.option("--all", "include_inactive", is_flag=True, help="also revoked and expired")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
def list_grants(
    brand: str | None, account: str | None, include_inactive: bool, as_json: bool
) -> None:
    """List the grants (live ones unless --all), newest first."""
    from pactmw.adapters.flask import get_provider

    now = time.time()
    try:
        grants = get_provider().store.list_grants(
            brand_id=brand, account=account, include_inactive=include_inactive, now=now
        )
    except StoreError as exc:
        raise click.ClickException(f"store: {exc}") from exc
    if as_json:
        click.echo(json.dumps([grant_json(grant, now) for grant in grants], indent=2))
    else:
        click.echo(grants_table(grants, now, include_inactive=include_inactive))


@grants_cli.command("revoke")
@click.argument("grant_id", required=False)
@click.option("--account", metavar="A", help="revoke every live grant of account A")
@click.option("--brand", metavar="B", help="with --account: only the grants at Brand B")
def revoke_grants(grant_id: str | None, account: str | None, brand: str | None) -> None:
    """Revoke a grant by id, or every live grant of an account."""
    from pactmw.adapters.flask import get_provider

    if (grant_id is None) == (account is None):
        raise click.UsageError("give either a GRANT_ID or --account A")
    if brand is not None and account is None:
        raise click.UsageError("--brand goes with --account (a GRANT_ID names one grant)")
    provider = get_provider()
    if provider.oauth is None:
        raise click.ClickException("no Brand in PACTMW offers delegation: no grants")
    try:
        if grant_id is not None:
            done = revoke_one(provider, provider.store, grant_id)
        else:
            assert account is not None
            done = revoke_account(provider, account, brand)
    except StoreError as exc:
        raise click.ClickException(f"store: {exc}") from exc
    if done.nothing is not None:
        raise click.ClickException(done.nothing)
    for line in done.lines:
        click.echo(line)


__all__ = ["grants_cli", "list_grants", "pactmw_cli", "revoke_grants"]
