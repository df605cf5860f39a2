"""`manage.py pactmw grants list|revoke`: the delegation grants in the store `settings.PACTMW`
configures, listed and revoked with the same wording and rules as `pactmw grants`."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from pactmw.adapters.django._config import get_provider
from pactmw.provider.grant_admin import grant_json, grants_table, revoke_account, revoke_one
from pactmw.store.base import StoreError


class Command(BaseCommand):
    help = "Manage pactmw: list or revoke delegation grants (`pactmw grants` for this site)."

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

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            provider = get_provider()
        except Exception as exc:  # a bad PACTMW (the system checks say which key)
            raise CommandError(f"pactmw is not configured: {exc}") from exc
        try:
            if options["action"] == "list":
                self._list(provider.store, options)
            else:
                self._revoke(provider, options)
        except StoreError as exc:
            raise CommandError(f"store: {exc}") from exc

    def _list(self, store: Any, options: dict[str, Any]) -> None:
        now = time.time()
        grants = store.list_grants(
            brand_id=options["brand"],
            account=options["account"],
            include_inactive=options["all"],
            now=now,
        )
        if options["json"]:
            self.stdout.write(json.dumps([grant_json(grant, now) for grant in grants], indent=2))
        else:
            self.stdout.write(grants_table(grants, now, include_inactive=options["all"]))

    def _revoke(self, provider: Any, options: dict[str, Any]) -> None:
        grant_id, account, brand = options["grant_id"], options["account"], options["brand"]
        if (grant_id is None) == (account is None):
            raise CommandError("give either a GRANT_ID or --account A")
        if brand is not None and account is None:
            raise CommandError("--brand goes with --account (a GRANT_ID names one grant)")
        if provider.oauth is None:
            raise CommandError("no Brand in settings.PACTMW offers delegation: no grants")
        if grant_id is not None:
            done = revoke_one(provider, provider.store, grant_id)
        else:
            done = revoke_account(provider, account, brand)
        if done.nothing is not None:
            raise CommandError(done.nothing, returncode=1)
        for line in done.lines:
            self.stdout.write(line)


__all__ = ["Command"]
