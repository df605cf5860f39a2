"""`pactmw agents list|add|block|allow|remove`: the personal agents a Provider accepts, the
configured ones and those added at runtime in its store, managed from another process than
`pactmw serve` (every serving process sees a change on its next request)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pactmw.cli._admin import (
    CANNOT_RUN_HELP,
    STORE_HELP,
    admin_provider,
    load_settings,
    refilled,
    report,
    shared_store,
)
from pactmw.cli._common import CONFIG, JSON_TABLE, Command, log_to_stderr, option

if TYPE_CHECKING:
    from pactmw.provider import Provider

_AGENTS_HELP = (
    """\
List the personal agents a Provider accepts, add one at runtime (on top of the configured
agents), block or allow one, or remove one added at runtime. Changes are kept in the store,
so every process serving it applies them from its next request, without a restart.
"""
    + "\n"
    + STORE_HELP
)

_LIST_HELP = refilled(
    f"""\
List the configured agents and those added at runtime, by issuer: name, source (config or
runtime), status (allowed, blocked, or ignored: a runtime agent also configured), JWKS URL and
when it was added. Then the Poppy agents holding a live grant or a live Session (signed in
or out), by client_id, one per Brand (source "poppy at BRAND"; blocked when blocked or the
Brand's poppy.agents no longer admits it; when its oldest live grant was made, - when it
holds none). --json prints a JSON array instead. Exit status 0, or
{CANNOT_RUN_HELP}.
"""
)

_ADD_HELP = refilled(
    f"""\
Add a personal agent: ISSUER is the exact iss of its tokens (an absolute http(s) URL),
JWKS_URI where its public keys are (https; http only to 127.0.0.1/::1/localhost with
allow_http_jwks_on_loopback = true, as for configured agents). It is verified like a
configured agent, with the Provider's audience. Exit status 0 when added, 1 when the issuer
is already configured or added, 2 for a bad issuer, URL or name (nothing is written); also
{CANNOT_RUN_HELP}.
"""
)

_BLOCK_HELP = refilled(
    f"""\
Block an agent (configured, added, or a Poppy agent by its client_id): its requests get 401
from the next one on, in every process, whichever protocol it speaks (a Poppy agent's live
Sessions too, until it is allowed again). Blocking a blocked agent changes nothing. Exit
status 0, 1 for an issuer that is neither configured nor added nor a Poppy agent (an
open-mode Provider can block any issuer; a Provider whose Poppy Brand admits any agent,
any https client_id), {CANNOT_RUN_HELP}.
"""
)

_ALLOW_HELP = refilled(
    f"""\
Allow a blocked agent again (also a configured agent with enabled = false). Exit status 0, 1
for an issuer that is neither configured nor added nor a Poppy agent, {CANNOT_RUN_HELP}.
"""
)

_REMOVE_HELP = refilled(
    f"""\
Remove an agent added at runtime: its requests get 401 from the next one on. A block of the
issuer stays recorded. Configured agents are removed from the configuration instead. Exit
status 0 when removed, 1 when nothing was (a configured or unknown issuer), {CANNOT_RUN_HELP}.
"""
)

_SHARED = "agents can only be managed in a sqlite or PostgreSQL store"


def _with_provider(args: argparse.Namespace, work: Callable[[Provider], int]) -> int:
    settings = load_settings(args.config)
    with shared_store(settings.store, _SHARED) as store:
        log_to_stderr("pactmw.agents", "INFO")  # what changed, for the operator's records
        return work(admin_provider(settings, store))


def _list(args: argparse.Namespace) -> int:
    from pactmw.provider.agent_admin import agents_report

    def work(provider: Provider) -> int:
        print(agents_report(provider, as_json=args.json, now=time.time()))
        return 0

    return _with_provider(args, work)


def _add(args: argparse.Namespace) -> int:
    from pactmw.provider.agent_admin import add_agent

    return _with_provider(
        args,
        lambda provider: report(
            add_agent(
                provider,
                issuer=args.issuer,
                jwks_uri=args.jwks_uri,
                name=args.name,
                now=time.time(),
            )
        ),
    )


def _switch(enabled: bool) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from pactmw.provider.agent_admin import set_enabled

        return _with_provider(
            args, lambda provider: report(set_enabled(provider, args.issuer, enabled))
        )

    return run


def _remove(args: argparse.Namespace) -> int:
    from pactmw.provider.agent_admin import remove_agent

    return _with_provider(args, lambda provider: report(remove_agent(provider, args.issuer)))


_ISSUER = option("issuer", metavar="ISSUER", help="the agent's issuer (the iss of its tokens)")

COMMAND = Command(
    "agents",
    "list, add, block, allow or remove the personal agents a Provider accepts",
    _AGENTS_HELP,
    actions=(
        Command(
            "list",
            "list the configured and added agents",
            _LIST_HELP,
            _list,
            options=(CONFIG, JSON_TABLE),
        ),
        Command(
            "add",
            "add an agent at runtime",
            _ADD_HELP,
            _add,
            options=(
                CONFIG,
                _ISSUER,
                option("jwks_uri", metavar="JWKS_URI", help="the URL of the agent's JWKS"),
                option("--name", default="", metavar="NAME", help="the name users are shown"),
            ),
        ),
        Command("block", "refuse an agent", _BLOCK_HELP, _switch(False), (CONFIG, _ISSUER)),
        Command("allow", "accept an agent again", _ALLOW_HELP, _switch(True), (CONFIG, _ISSUER)),
        Command(
            "remove", "remove an agent added at runtime", _REMOVE_HELP, _remove, (CONFIG, _ISSUER)
        ),
    ),
)


__all__ = ["COMMAND"]
