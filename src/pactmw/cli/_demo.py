"""`pactmw demo`: the whole story on this machine (see `pactmw.demo`)."""

from __future__ import annotations

import argparse

from pactmw.cli._common import Command, option
from pactmw.cli._serve import require_serve_extra

_DEMO_HELP = """\
Run the whole story on this machine, in a temporary directory, on 127.0.0.1 only:
a personal agent (pactmw.client, with its own key and JWKS server) talks to `pactmw serve`
(a real subprocess, embedded sqlite store).

PACT Identity: Agent Card, a signed multi-turn conversation, an idempotent retry and two
refusals. PACT Delegated: an account question gets a step-up; the personal agent runs the
device flow; the person (played by the demo) signs in at the Brand's own login (a development
Brand login, pactmw.brand_login), unticks a scope on the consent page and allows; the
delegated reply carries a receipt the personal agent verifies; a turn needing the unticked
scope gets a step-up; a Parafé consent from a stand-in broker allows a reorder; the token
is refreshed; `pactmw grants revoke` revokes the grant and the token is refused (401
invalid_token).

Exits 0 when every step behaves as PACT 1.0 says. Needs uvicorn and Starlette, as
`pactmw serve` does: pip install "pactmw[serve]".
"""


def run(args: argparse.Namespace) -> int:
    require_serve_extra("pactmw demo")  # before the story starts a server that cannot run
    from pactmw.demo import run_demo

    return run_demo(keep=args.keep)


COMMAND = Command(
    "demo",
    "run a personal agent against a local Provider and print the transcript",
    _DEMO_HELP,
    run,
    options=(
        option(
            "--keep",
            action="store_true",
            help="keep the temporary directory (config, sqlite database, server log)",
        ),
    ),
)


__all__ = [
    "COMMAND",
    "run",
]
