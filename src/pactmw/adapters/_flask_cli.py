"""`flask pactmw grants|agents|cleanup`: the delegation grants, personal agents and retention
of the store `app.config["PACTMW"]` configures, with the same wording, rules and exit
statuses as `pactmw grants`, `pactmw agents` and `pactmw cleanup` (the Flask extension adds
this group to `app.cli`): 0 done, 1 nothing to do, 2 (`agent_admin.CANNOT_RUN`) for bad
usage, a bad configuration, or a store that cannot be opened, reached or used."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click
from flask.cli import AppGroup

from pactmw.core.errors import PactmwError
from pactmw.provider import agent_admin, grant_admin
from pactmw.store.base import StoreError

if TYPE_CHECKING:
    from pactmw.provider import Provider

pactmw_cli = AppGroup(
    "pactmw",
    help="Manage pactmw: delegation grants, personal agents, store cleanup. Exit status 0 "
    "done, 1 nothing to do, 2 for bad usage, a bad configuration, or a store that cannot be "
    "opened, reached or used.",
)
grants_cli = AppGroup("grants", help="List or revoke delegation grants.")
agents_cli = AppGroup("agents", help="List, add, block, allow or remove personal agents.")
pactmw_cli.add_command(grants_cli)
pactmw_cli.add_command(agents_cli)


def _provider() -> Provider:
    from pactmw.adapters.flask import get_provider

    try:
        return get_provider()
    except RuntimeError as exc:  # no brands: no Provider, no store
        raise _failure(str(exc), agent_admin.CANNOT_RUN) from None


class _Refused(PactmwError, click.ClickException):
    """The command cannot do its work (exit status 2, as `pactmw` and `manage.py pactmw`
    exit): refused input, a bad configuration, a store that fails."""

    exit_code = agent_admin.CANNOT_RUN


def _failure(message: str, status: int) -> click.ClickException:
    # Exit status 1: the command ran and there was nothing to do; 2: it could not run.
    return _Refused(message) if status == agent_admin.CANNOT_RUN else click.ClickException(message)


@contextmanager
def _store_errors() -> Iterator[None]:
    """A store that fails is exit status 2 with what it said, as the other commands do."""
    try:
        yield
    except StoreError as exc:
        raise _Refused(f"store: {exc}") from exc


def _report(outcome: agent_admin.Outcome) -> None:
    if outcome.error is not None:
        raise _failure(outcome.error, outcome.status)
    for line in outcome.lines:
        click.echo(line)


@grants_cli.command("list")
@click.option("--brand", metavar="B", help="only the grants at Brand B")
@click.option("--account", metavar="A", help="only the grants of account A")
@click.option("--all", "include_inactive", is_flag=True, help="also revoked and expired")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
def list_grants(
    brand: str | None, account: str | None, include_inactive: bool, as_json: bool
) -> None:
    """List the grants (live ones unless --all), newest first."""
    now = time.time()
    with _store_errors():
        grants = _provider().store.list_grants(
            brand_id=brand, account=account, include_inactive=include_inactive, now=now
        )
    click.echo(
        grant_admin.grants_listing(grants, now, include_inactive=include_inactive, as_json=as_json)
    )


@grants_cli.command("revoke")
@click.argument("grant_id", required=False)
@click.option("--account", metavar="A", help="revoke every live grant of account A")
@click.option("--brand", metavar="B", help="with --account: only the grants at Brand B")
def revoke_grants(grant_id: str | None, account: str | None, brand: str | None) -> None:
    """Revoke a grant by id, or every live grant of an account."""
    problem = grant_admin.revoke_usage_problem(grant_id, account, brand)
    if problem is not None:
        raise click.UsageError(problem)
    provider = _provider()
    if provider.oauth is None:
        raise _Refused("no Brand in PACTMW offers delegation: no grants")
    with _store_errors():
        if grant_id is not None:
            done = grant_admin.revoke_one(provider, provider.store, grant_id)
        else:
            assert account is not None
            done = grant_admin.revoke_account(provider, account, brand)
    if done.nothing is not None:
        raise click.ClickException(done.nothing)
    for line in done.lines:
        click.echo(line)


@agents_cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
def list_agents_command(as_json: bool) -> None:
    """List the configured and added agents, by issuer, then the Poppy agents with grants."""
    with _store_errors():
        listing = agent_admin.agents_report(_provider(), as_json=as_json, now=time.time())
    click.echo(listing)


@agents_cli.command("add")
@click.argument("issuer")
@click.argument("jwks_uri")
@click.option("--name", default="", metavar="NAME", help="the name users are shown")
def add_agent_command(issuer: str, jwks_uri: str, name: str) -> None:
    """Add a personal agent at runtime: ISSUER (the iss of its tokens) and JWKS_URI."""
    provider = _provider()
    with _store_errors():
        done = agent_admin.add_agent(
            provider, issuer=issuer, jwks_uri=jwks_uri, name=name, now=time.time()
        )
    _report(done)


def _switch(issuer: str, enabled: bool) -> None:
    provider = _provider()
    with _store_errors():
        done = agent_admin.set_enabled(provider, issuer, enabled)
    _report(done)


@agents_cli.command("block")
@click.argument("issuer")
def block_agent_command(issuer: str) -> None:
    """Refuse an agent (configured or added) from its next request on."""
    _switch(issuer, False)


@agents_cli.command("allow")
@click.argument("issuer")
def allow_agent_command(issuer: str) -> None:
    """Accept a blocked agent again."""
    _switch(issuer, True)


@agents_cli.command("remove")
@click.argument("issuer")
def remove_agent_command(issuer: str) -> None:
    """Remove an agent added at runtime."""
    provider = _provider()
    with _store_errors():
        done = agent_admin.remove_agent(provider, issuer)
    _report(done)


@pactmw_cli.command("cleanup")
def cleanup_command() -> None:
    """Delete expired state, and conversations past retention_days, from the store."""
    provider = _provider()
    with _store_errors():
        done = agent_admin.run_cleanup(provider, time.time())
    for line in done.lines:
        click.echo(line)


__all__ = [
    "add_agent_command",
    "agents_cli",
    "allow_agent_command",
    "block_agent_command",
    "cleanup_command",
    "grants_cli",
    "list_agents_command",
    "list_grants",
    "pactmw_cli",
    "remove_agent_command",
    "revoke_grants",
]
