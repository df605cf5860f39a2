"""`pactmw send`: one message to a Brand's agent, as a personal agent, and its reply."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pactmw.cli._common import (
    AUDIENCE,
    ISSUER,
    KEY,
    SUB,
    TIMEOUT,
    Command,
    CommandError,
    card_failure,
    card_url,
    load_signer,
    naming,
    option,
    print_json,
    printable,
    refuse_empty,
)
from pactmw.cli._send_delegation import (
    authorize,
    device_client,
    read_delegation,
    refreshed,
    save_delegation,
)

if TYPE_CHECKING:
    from pactmw.client import MessageReply, StepUp

_SEND_HELP = """\
Send one message to a Brand's agent as a registered personal agent, and print its reply:
--key and --issuer are the agent's private key and registered issuer, --sub the user it
speaks for, --audience the audience the Provider assigned (as for `pactmw token`). URL is
a Brand's card URL or domain (as for `pactmw card`).

Output: the reply's text on stdout, then on stderr the --context-id that continues the
conversation (the Brand's agent sees the earlier messages). --json prints the A2A answer
instead: {"message": ...}, or {"task": ...} for a step-up.

A message that needs the user's account at the Brand (PACT Delegated) gets a step-up, not a
reply: the line on stderr names the missing scopes and the link for the person to approve.
With --authorize, pactmw send runs the device flow instead: it prints a link on stderr for the
person to open, sign in at the Brand and allow the scopes, waits for their decision, then sends
the message again with the delegation token and prints the reply (with --json, that answer's
JSON alone on stdout: the link stays on stderr). --delegation FILE keeps that token:
--authorize writes it there (mode 0600), and a later send reads it from there, renewing it with
the saved refresh token once the Provider refuses it (expired).

Exit status 0 for a reply; 1 when there is none (a step-up, the person denying or not deciding
in time, the agent's token refused, an A2A error, no answer); 2 for bad usage (unreadable key
or delegation file, bad URL).
"""


def run(args: argparse.Namespace) -> int:
    from pactmw.client import (
        A2AClient,
        ClientError,
        DelegationTokenRejected,
        MessageReply,
        SyncTransport,
        fetch_card,
    )

    refuse_empty(args, "key", "issuer", "sub", "audience", "context_id", "delegation")
    signer = load_signer(args.key, args.issuer)
    url = card_url(args.url, "URL")
    saved = read_delegation(args.delegation) if args.delegation else None
    credentials = signer.for_user(args.sub, args.audience)
    transport = SyncTransport(timeout=args.timeout)
    try:
        card = fetch_card(url, transport=transport)
        client = A2AClient.from_card(card, credentials, transport=transport)
    except ClientError as exc:
        raise card_failure(url, exc) from None
    try:
        # The client retries within its RetryPolicy: a message continuing a conversation is
        # resent with its messageId, and the Provider answers a resend with the stored reply.
        token = saved["access_token"] if saved else None
        try:
            answer = client.send(args.text, context_id=args.context_id, delegation_token=token)
        except DelegationTokenRejected:
            if saved is None:
                raise
            # Expired, most likely: the saved refresh token renews it, with no person to ask.
            token = refreshed(device_client(card, credentials, transport), args.delegation, saved)
            if token is None and not args.authorize:
                raise CommandError(
                    f"the delegation saved in {args.delegation} was refused and cannot be "
                    "renewed (its grant ended or was revoked); --authorize asks the person again",
                    1,
                ) from None
            # A refused token refuses the whole request: this message was not answered yet.
            answer = client.send(args.text, context_id=args.context_id, delegation_token=token)
        if not isinstance(answer, MessageReply) and args.authorize:
            tokens = authorize(device_client(card, credentials, transport), answer)
            if args.delegation:  # kept before the resend, which may fail on its own
                save_delegation(args.delegation, tokens)
            # The same message (its id and conversation): the Provider kept it unanswered.
            answer = client.send(
                args.text,
                context_id=answer.context_id,
                message_id=answer.sent_message_id,
                delegation_token=tokens.access_token,
            )
    except ClientError as exc:
        # An agent the Provider refuses (IdentityRejected) is one of these: its text says
        # what to check (issuer, key, audience, clock).
        raise CommandError(naming(client.url, exc), 1) from None
    if isinstance(answer, MessageReply):
        _show_reply(answer, as_json=args.json)
        return 0
    _show_step_up(answer, as_json=args.json)
    raise CommandError(_step_up_line(answer), 1)


def _show_reply(reply: MessageReply, *, as_json: bool) -> None:
    if as_json:
        print_json({"message": dict(reply.message)})
        return
    _print_text(reply.text)
    # On stderr: stdout stays the reply alone, for a script that reads it.
    print(f"to continue: --context-id {printable(reply.context_id)}", file=sys.stderr)


def _show_step_up(step_up: StepUp, *, as_json: bool) -> None:
    if as_json:
        print_json({"task": dict(step_up.task)})
    else:
        _print_text(step_up.text)  # the Brand's words to the user, when it has some


def _step_up_line(step_up: StepUp) -> str:
    scopes = ", ".join(step_up.missing_scopes)
    return (
        f"delegation needed: the Brand asks for {scopes} on the user's account; the person "
        f"approves at {step_up.verification_uri_complete}, then the agent sends the message "
        "again with a delegation token from the device flow (--authorize runs it)"
    )


def _print_text(text: str) -> None:
    """The agent's text as its lines, each with its control characters escaped: a Brand's
    words can neither drive the terminal nor forge a line that seems to be pactmw's."""
    if text:
        for line in text.split("\n"):
            print(printable(line))


COMMAND = Command(
    "send",
    "send a message to a Brand's agent and print its reply",
    _SEND_HELP,
    run,
    options=(
        option("url", metavar="URL", help="the Brand's card URL or domain"),
        option("text", metavar="TEXT", help="the message"),
        KEY,
        ISSUER,
        SUB,
        AUDIENCE,
        option(
            "--context-id",
            metavar="ID",
            help="continue this conversation (the id the previous reply printed)",
        ),
        option(
            "--authorize",
            action="store_true",
            help="on a step-up, run the device flow, then send the message again",
        ),
        # A file, as --key is, not the token itself: a command line is visible to every
        # user of the machine (ps), and the token acts on the person's account.
        option(
            "--delegation",
            metavar="FILE",
            help="send with the delegation token saved in FILE; --authorize saves it there",
        ),
        option("--json", action="store_true", help="print the A2A answer as JSON"),
        TIMEOUT,
    ),
)


__all__ = [
    "COMMAND",
    "run",
]
