"""`pactmw check`: the PACT 1.0 conformance checks against a Provider (see `pactmw.check`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pactmw.cli._common import (
    AUDIENCE,
    ISSUER,
    KEY,
    TIMEOUT,
    Command,
    CommandError,
    card_url,
    load_signer,
    not_utf8,
    option,
    positive_seconds,
    print_json,
    printable,
    refuse_empty,
)
from pactmw.protocols.delegation import is_authorization_details

_CHECK_HELP = """\
Run the PACT 1.0 conformance checks against a Provider over HTTP, as a registered personal
agent: --issuer and --key are its registered issuer and private key (the public half served
at its registered jwks_uri), --audience the audience the Provider assigned. URL is a Brand's
card URL or domain (as for `pactmw card`).

PACT Identity (the ground of the public suite, e2e/pact.test.ts): the Agent Card, replies
and contextId, retries, foreign contexts, ListTasks, task and unsupported routes, header
tolerance, unmatched routes before authentication, every authentication refusal (including
iss {ISSUER}/disabled-pa, which should be registered disabled or not at all) and malformed
bodies. --other-brand names a second Brand of the same Provider for the cross-Brand checks.

PACT Delegated (--delegated): the card's device-code scheme and its RFC 8414 metadata, the
step-up task for --ask, then the device flow: the checker prints the Brand's login link, a
person opens it, signs in and approves, and the checker checks the token, a delegated reply's
signed receipt and the refresh. --authorization-details adds RFC 9396 entries to the
request; the token response and the refresh must then echo the granted ones.

Output: one line per check (PASS or FAIL, its name, and for a failure what was expected and
what came back), then `N passed, M failed`; --json prints one JSON document instead.
Progress goes to stderr. Exit status 0 when every check passes, 1 when any fails, 2 for bad
usage (unreadable key, bad URL).
"""


def run(args: argparse.Namespace) -> int:
    from pactmw.check import (
        DEFAULT_ASK,
        Checker,
        CheckResult,
        Progress,
        results_json,
        summary_line,
    )

    refuse_empty(args, "key", "issuer", "audience", "other_brand")
    signer = load_signer(args.key, args.issuer)
    url = card_url(args.url, "URL")
    other = card_url(args.other_brand, "--other-brand") if args.other_brand else None
    if not args.delegated and (
        args.ask is not None or args.scope or args.approval_timeout or args.authorization_details
    ):
        raise CommandError(
            "--ask, --scope, --authorization-details and --approval-timeout go with --delegated"
        )
    details = _authorization_details(args.authorization_details)

    def report(result: CheckResult) -> None:
        if not args.json:  # a failure quotes the Provider: its control characters escaped
            print(printable(result.line()), flush=True)

    checker = Checker(
        url,
        signer,
        args.audience,
        other_card_url=other,
        delegated=args.delegated,
        ask=args.ask if args.ask is not None else DEFAULT_ASK,
        scopes=args.scope,
        authorization_details=details,
        approval_timeout=args.approval_timeout,
        timeout=args.timeout,
        report=report,
        progress=Progress(sys.stderr),
    )
    results = checker.run()
    if args.json:
        print_json(results_json(url, results))
    else:
        print(summary_line(results), flush=True)
    return 0 if results and all(result.passed for result in results) else 1


def _authorization_details(text: str | None) -> list[dict[str, Any]]:
    """`--authorization-details`: a JSON array of RFC 9396 entries, each an object with a
    string `type`, given inline or as `@file.json`."""
    if text is None:
        return []
    source = "--authorization-details"
    if text.startswith("@"):
        source = text[1:]
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read --authorization-details {source}: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise CommandError(
                f"cannot read --authorization-details {source}: {not_utf8(exc)}"
            ) from None
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"{source} is not JSON: {exc}") from exc
    if not entries or not is_authorization_details(entries):
        raise CommandError(f"{source} must be a JSON array of objects, each with a string type")
    return entries


COMMAND = Command(
    "check",
    "run the PACT conformance checks against a Provider",
    _CHECK_HELP,
    run,
    options=(
        option("url", metavar="URL", help="the Brand's card URL or domain"),
        ISSUER,
        KEY,
        AUDIENCE,
        option("--other-brand", metavar="CARD_URL", help="another Brand of the same Provider"),
        option(
            "--delegated", action="store_true", help="also check PACT Delegated (needs a person)"
        ),
        option(
            "--ask",
            metavar="TEXT",
            default=None,
            help="with --delegated: a message that needs delegated scopes "
            "(default: 'Can you show my orders and my account?')",
        ),
        option(
            "--scope",
            action="append",
            default=[],
            metavar="ID",
            help="with --delegated: a scope to request "
            "(repeatable; default: every scope on the card)",
        ),
        option(
            "--authorization-details",
            metavar="JSON",
            help="with --delegated: RFC 9396 entries to request with the scopes, a JSON array "
            "or @file.json; the token and the refresh must echo them",
        ),
        option(
            "--approval-timeout",
            type=positive_seconds,
            metavar="S",
            help="with --delegated: how long to wait for the person "
            "(default: until the code expires)",
        ),
        option("--json", action="store_true", help="print JSON instead of lines"),
        TIMEOUT,
    ),
)


__all__ = [
    "COMMAND",
    "run",
]
