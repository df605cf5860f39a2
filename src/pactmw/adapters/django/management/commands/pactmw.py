"""`manage.py pactmw grants|agents|cleanup`: the delegation grants, personal agents and
retention of the store `settings.PACTMW` configures, with the same wording, rules and exit
statuses as `pactmw grants`, `pactmw agents` and `pactmw cleanup`: 0 done, 1 nothing to do,
2 (`agent_admin.CANNOT_RUN`) for bad usage, a bad `PACTMW`, or a store that cannot be
opened, reached or used."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from pactmw.adapters.django._config import configured, get_provider
from pactmw.adapters.django._config import logger as config_logger
from pactmw.provider import agent_admin, grant_admin
from pactmw.provider.app import Provider
from pactmw.store.base import StoreError


class Command(BaseCommand):
    help = (
        "Manage pactmw: list or revoke delegation grants, manage personal agents, clean the "
        "store up (`pactmw grants`, `pactmw agents`, `pactmw cleanup` for this site). Exit "
        "status 0 done, 1 nothing to do, 2 for bad usage, a bad PACTMW, or a store that "
        "cannot be opened, reached or used."
    )
    # The command checks PACTMW itself, as it builds the Provider, and says what is wrong in
    # one line with exit status 2, as `pactmw` and `flask pactmw` do. Django's system checks
    # would stop it first with status 1 and a report, for a bad PACTMW and for anything else
    # of the site (a grant must be revocable while an unrelated app is misconfigured).
    requires_system_checks = ()

    def add_arguments(self, parser: CommandParser) -> None:
        topics = parser.add_subparsers(dest="topic", required=True)
        grants = topics.add_parser("grants", help="list or revoke delegation grants")
        actions = grants.add_subparsers(dest="action", required=True)
        listing = actions.add_parser("list", help="list the grants (live ones unless --all)")
        listing.add_argument("--brand", metavar="B", help="only the grants at Brand B")
        listing.add_argument("--account", metavar="A", help="only the grants of account A")
        listing.add_argument("--all", action="store_true", help="also revoked and expired")
        listing.add_argument("--json", action="store_true", help="print JSON, not a table")
        revoking = actions.add_parser("revoke", help="revoke a grant or an account's grants")
        revoking.add_argument("grant_id", nargs="?", metavar="GRANT_ID")
        revoking.add_argument("--account", metavar="A", help="every live grant of account A")
        revoking.add_argument("--brand", metavar="B", help="with --account: only at Brand B")

        agents = topics.add_parser("agents", help="list, add, block, allow or remove agents")
        verbs = agents.add_subparsers(dest="action", required=True)
        listed = verbs.add_parser("list", help="list the configured, added and Poppy agents")
        listed.add_argument("--json", action="store_true", help="print JSON, not a table")
        adding = verbs.add_parser("add", help="add an agent at runtime")
        adding.add_argument("issuer", metavar="ISSUER", help="the iss of its tokens")
        adding.add_argument("jwks_uri", metavar="JWKS_URI", help="the URL of its JWKS")
        adding.add_argument("--name", default="", metavar="NAME", help="the name users see")
        for verb, what in (
            ("block", "refuse an agent"),
            ("allow", "accept an agent again"),
            ("remove", "remove an agent added at runtime"),
        ):
            verbs.add_parser(verb, help=what).add_argument("issuer", metavar="ISSUER")

        topics.add_parser("cleanup", help="delete expired state and old conversations")

    def run_from_argv(self, argv: list[str]) -> None:
        """As `pactmw` does: output into a pipe whose reader has gone (`manage.py pactmw agents
        list | head -1`) ends the command quietly with exit status 141, and Ctrl-C (while it
        imports the Brands' handlers, or the store answers) with 130, not a traceback."""
        try:
            try:
                super().run_from_argv(argv)
            finally:
                if sys.stdout is not None:  # None: no stdout at all (`>&-`)
                    sys.stdout.flush()  # a closed pipe fails here rather than at exit
        except BrokenPipeError:
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)
        except KeyboardInterrupt:
            sys.exit(130)  # 128 + SIGINT, what a shell reports for Ctrl-C

    def handle(self, *args: Any, **options: Any) -> None:
        for output in (self.stdout, self.stderr):
            # A console that cannot encode a name shows a backslash escape (as `pactmw`
            # does); a StringIO of call_command has no reconfigure and needs none.
            reconfigure = getattr(output, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")
        try:
            with _unlogged(config_logger):
                provider = get_provider()
        except RuntimeError as exc:  # no brands: the words every front-end's command prints
            raise CommandError(str(exc), returncode=agent_admin.CANNOT_RUN) from None
        except Exception as exc:  # a bad PACTMW (the system checks say which key)
            problem = configured.problem or exc  # what building it said, not the 503
            raise CommandError(
                f"pactmw is not configured: {problem}", returncode=agent_admin.CANNOT_RUN
            ) from exc
        try:
            if options["topic"] == "grants":
                if options["action"] == "list":
                    self._list(provider.store, options)
                else:
                    self._revoke(provider, options)
            elif options["topic"] == "agents":
                self._agents(provider, options)
            else:
                for line in agent_admin.run_cleanup(provider, time.time()).lines:
                    self.stdout.write(line)
        except StoreError as exc:
            raise CommandError(f"store: {exc}", returncode=agent_admin.CANNOT_RUN) from exc

    def _list(self, store: Any, options: dict[str, Any]) -> None:
        now = time.time()
        grants = store.list_grants(
            brand_id=options["brand"],
            account=options["account"],
            include_inactive=options["all"],
            now=now,
        )
        self.stdout.write(
            grant_admin.grants_listing(
                grants, now, include_inactive=options["all"], as_json=options["json"]
            )
        )

    def _revoke(self, provider: Any, options: dict[str, Any]) -> None:
        grant_id, account, brand = options["grant_id"], options["account"], options["brand"]
        problem = grant_admin.revoke_usage_problem(grant_id, account, brand)
        if problem is not None:
            raise CommandError(problem, returncode=agent_admin.CANNOT_RUN)
        if provider.oauth is None:
            raise CommandError(
                "no Brand in settings.PACTMW offers delegation: no grants",
                returncode=agent_admin.CANNOT_RUN,
            )
        if grant_id is not None:
            done = grant_admin.revoke_one(provider, provider.store, grant_id)
        else:
            done = grant_admin.revoke_account(provider, account, brand)
        if done.nothing is not None:
            raise CommandError(done.nothing, returncode=1)
        for line in done.lines:
            self.stdout.write(line)

    def _agents(self, provider: Provider, options: dict[str, Any]) -> None:
        action = options["action"]
        if action == "list":
            listing = agent_admin.agents_report(provider, as_json=options["json"], now=time.time())
            self.stdout.write(listing)
            return
        issuer = options["issuer"]
        if action == "add":
            done = agent_admin.add_agent(
                provider,
                issuer=issuer,
                jwks_uri=options["jwks_uri"],
                name=options["name"],
                now=time.time(),
            )
        elif action == "remove":
            done = agent_admin.remove_agent(provider, issuer)
        else:
            done = agent_admin.set_enabled(provider, issuer, action == "allow")
        self._report(done)

    def _report(self, done: agent_admin.Outcome) -> None:
        if done.error is not None:
            raise CommandError(done.error, returncode=done.status)
        for line in done.lines:
            self.stdout.write(line)


@contextlib.contextmanager
def _unlogged(logger: logging.Logger) -> Iterator[None]:
    """Leave `logger` silent meanwhile. Building the settings logs what is wrong for a server
    ("...; pactmw answers 503 until it is fixed"); the command says it in its own error
    (`configured.problem`), and the same problem twice on the console reads as two."""
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


__all__ = ["Command"]
