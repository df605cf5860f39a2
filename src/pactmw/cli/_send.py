"""`pactmw send`: one message to a Brand's agent, as a personal agent, and its reply."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pactmw.cli._common import (
    AUDIENCE,
    ISSUER,
    KEY,
    SUB,
    TIMEOUT,
    Command,
    CommandError,
    OutputFile,
    card_failure,
    card_url,
    load_signer,
    naming,
    not_utf8,
    option,
    print_json,
    printable,
    refuse_empty,
    write_all,
)

if TYPE_CHECKING:
    from pactmw.client import AgentCard, MessageReply, StepUp, TokenResponse
    from pactmw.client.flow import TokenSource
    from pactmw.client.transport import Transport

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
the message again with the delegation token and prints the reply. --delegation FILE keeps that
token: --authorize writes it there (mode 0600), and a later send reads it from there.

Exit status 0 for a reply; 1 when there is none (a step-up, the person denying or not deciding
in time, the agent's token refused, an A2A error, no answer); 2 for bad usage (unreadable key
or delegation file, bad URL).
"""


def run(args: argparse.Namespace) -> int:
    from pactmw.client import A2AClient, ClientError, MessageReply, SyncTransport, fetch_card

    refuse_empty(args, "key", "issuer", "sub", "audience", "context_id", "delegation")
    signer = load_signer(args.key, args.issuer)
    url = card_url(args.url, "URL")
    delegation = _read_delegation(args.delegation) if args.delegation else None
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
        answer = client.send(args.text, context_id=args.context_id, delegation_token=delegation)
        if not isinstance(answer, MessageReply) and args.authorize:
            tokens = _authorize(card, credentials, transport, answer)
            if args.delegation:  # kept before the resend, which may fail on its own
                _save_delegation(args.delegation, tokens)
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


def _read_delegation(path: str) -> str | None:
    """The access token saved in `path` by `--authorize`; None when there is no file yet (the
    first send, whose step-up --authorize answers by writing it)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: {not_utf8(exc)}") from None
    try:
        saved = json.loads(text)
    except ValueError:
        saved = None
    token = saved.get("access_token") if isinstance(saved, dict) else None
    if not isinstance(token, str) or not token:
        # Neither the file nor its token is quoted: it is a secret.
        raise CommandError(f"{path}: not a delegation saved by --authorize (no access_token)")
    return token


def _authorize(
    card: AgentCard, credentials: TokenSource, transport: Transport, step_up: StepUp
) -> TokenResponse:
    """The device flow for the step-up's missing scopes: the link for the person, then the
    token once they allow (the client polls by RFC 8628's rules: interval, slow_down, expiry)."""
    from pactmw.client import (
        DeviceCodeClient,
        DeviceFlowTimeout,
        OAuthErrorResponse,
        delegation_scheme,
    )

    scheme = delegation_scheme(card)
    if scheme is None:
        raise CommandError("the Brand asks for a delegation but its card offers no device flow", 1)
    device = DeviceCodeClient(scheme, credentials, transport=transport)
    authorization = device.start(step_up.missing_scopes)
    print(
        f"The Brand asks for {', '.join(authorization.scopes)} on the user's account. The "
        "person opens this link, signs in at the Brand and allows it:",
        file=sys.stderr,
    )
    print(f"  {authorization.verification_uri_complete}", file=sys.stderr)
    print(
        f"(user code {authorization.user_code}; waiting up to {authorization.expires_in} s)",
        file=sys.stderr,
        flush=True,
    )
    expired = CommandError(
        f"the person did not decide before the device code expired (user code "
        f"{authorization.user_code}); send again for a new link",
        1,
    )
    try:
        return device.wait_for_token(authorization)
    except DeviceFlowTimeout:
        raise expired from None
    except OAuthErrorResponse as exc:
        if exc.error == "access_denied":
            raise CommandError(
                "the person denied the delegation; the Brand's agent did not answer", 1
            ) from None
        if exc.error == "expired_token":  # the Provider's clock ran out first
            raise expired from None
        raise


def _save_delegation(path: str, tokens: TokenResponse) -> None:
    """The token response's fields that a later send (or a refresh) needs, readable by the
    user alone: the tokens act on their account."""
    saved = {
        "access_token": tokens.access_token,
        "token_type": tokens.token_type,
        "scope": tokens.scope,
        "expires_in": tokens.expires_in,
    }
    if tokens.refresh_token is not None:
        saved["refresh_token"] = tokens.refresh_token
    write_all(
        [OutputFile(path, json.dumps(saved, indent=2) + "\n", 0o600)], force=True, parents=False
    )


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
