"""`pactmw cleanup`: delete from a Provider's store what can no longer be used, and the
conversations past `retention_days` (run it daily, from cron or a scheduler)."""

from __future__ import annotations

import argparse
import time

from pactmw.cli._admin import (
    CANNOT_RUN_HELP,
    STORE_HELP,
    admin_provider,
    load_settings,
    refilled,
    shared_store,
)
from pactmw.cli._common import CONFIG, Command

_CLEANUP_HELP = (
    refilled(
        f"""\
Remove what can no longer be used from the store: expired device authorizations, refresh
tokens that can no longer be rotated (expired unused ones, those of revoked or expired
grants; a spent token of a live grant is kept, since its replay reveals a theft), expired
single-use values, authorization details and rate-limit counters, and Poppy's expired
Sessions, Account Tokens and Idempotency-Key answers; and, when retention_days is set, the
conversations without activity for that many days, with their messages (personal data), and
the Poppy operations final or expired and unchanged for that long. Grants are kept. Prints
what was deleted. Exit status 0, or {CANNOT_RUN_HELP}.
"""
    )
    + "\n"
    + STORE_HELP
)


def _cleanup(args: argparse.Namespace) -> int:
    from pactmw.provider.agent_admin import run_cleanup

    settings = load_settings(args.config)
    with shared_store(settings.store, "no other process can clean it up") as store:
        done = run_cleanup(admin_provider(settings, store), time.time())
    for line in done.lines:
        print(line)
    return 0


COMMAND = Command(
    "cleanup",
    "delete expired state and conversations past retention_days from a Provider's store",
    _CLEANUP_HELP,
    _cleanup,
    options=(CONFIG,),
)


__all__ = ["COMMAND"]
