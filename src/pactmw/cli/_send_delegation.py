"""What `pactmw send --authorize` and `--delegation FILE` add to a send: the device flow for a
step-up's scopes, and the delegation tokens kept in a file between sends (read, renewed with
the refresh token, written mode 0600)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pactmw.cli._common import CommandError, OutputFile, not_utf8, printable, write_all
from pactmw.core.encoding import loggable

if TYPE_CHECKING:
    from pactmw.client import (
        AgentCard,
        DeviceCodeClient,
        HTTPError,
        OAuthErrorResponse,
        StepUp,
        TokenResponse,
    )
    from pactmw.client.flow import TokenSource
    from pactmw.client.transport import Transport


def read_delegation(path: str) -> dict[str, Any] | None:
    """The tokens saved in `path` by `--authorize`; None when there is no file yet (the first
    send, whose step-up --authorize answers by writing it)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        # Checked now, not once the person has approved: --authorize could not save there.
        if not Path(path).parent.is_dir():
            raise CommandError(f"{path}: no such directory to save the delegation in") from None
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
    return cast("dict[str, Any]", saved)


def device_client(
    card: AgentCard, credentials: TokenSource, transport: Transport
) -> DeviceCodeClient:
    """The device-code client of the Brand's delegation scheme, as the card declares it."""
    from pactmw.client import DeviceCodeClient, delegation_scheme

    scheme = delegation_scheme(card)
    if scheme is None:
        raise CommandError("the Brand asks for a delegation but its card offers no device flow", 1)
    return DeviceCodeClient(scheme, credentials, transport=transport)


def refreshed(device: DeviceCodeClient, path: str, saved: Mapping[str, Any]) -> str | None:
    """A new access token for the one saved in `path`, saved in its place; None when there
    is no refresh token or the Provider refuses it (the grant ended or was revoked)."""
    from pactmw.client import OAuthErrorResponse

    refresh_token = saved.get("refresh_token")
    if not isinstance(refresh_token, str):
        return None
    try:
        tokens = device.refresh(refresh_token)
    except OAuthErrorResponse:
        return None
    save_delegation(path, tokens)
    return tokens.access_token


def authorize(device: DeviceCodeClient, step_up: StepUp) -> TokenResponse:
    """The device flow for the step-up's missing scopes: the link for the person, then the
    token once they allow (the client polls by RFC 8628's rules: interval, slow_down, expiry)."""
    from pactmw.client import DeviceFlowTimeout, OAuthErrorResponse

    with _refusals("device authorization endpoint"):
        authorization = device.start(step_up.missing_scopes)
    # The Provider's words, escaped: they can neither drive the terminal nor forge a line.
    scopes = printable(", ".join(authorization.scopes))
    link = printable(authorization.verification_uri_complete)
    user_code = printable(authorization.user_code)
    print(
        f"The Brand asks for {scopes} on the user's account. The person opens this link, "
        "signs in at the Brand and allows it:",
        file=sys.stderr,
    )
    print(f"  {link}", file=sys.stderr)
    print(
        f"(user code {user_code}; waiting up to {authorization.expires_in} s)",
        file=sys.stderr,
        flush=True,
    )
    expired = CommandError(
        f"the person did not decide before the device code expired (user code "
        f"{user_code}); send again for a new link",
        1,
    )
    with _refusals("token endpoint"):
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


@contextmanager
def _refusals(endpoint: str) -> Iterator[None]:
    """An OAuth error answer of the Brand's `endpoint` as the one line `refusal` writes.
    Other errors go on as they are: their own text says what went wrong (the agent's token
    refused, a Provider that cannot be reached)."""
    from pactmw.client import HTTPError

    try:
        yield
    except HTTPError as exc:
        error = oauth_error(exc)
        if error is None:
            raise
        raise CommandError(refusal(endpoint, error), 1) from None


def oauth_error(exc: HTTPError) -> OAuthErrorResponse | None:
    """The OAuth error (RFC 6749 §5.2) of an error answer, or None when its body is not one.
    A 429 the client did not wait out (`RateLimited`) has one too: it says why and for how
    long; the client's own rule reads it."""
    from pactmw.client import OAuthErrorResponse
    from pactmw.client.device import oauth_error_for
    from pactmw.client.http import HttpResponse

    if isinstance(exc, OAuthErrorResponse):
        return exc
    found = oauth_error_for(HttpResponse(exc.status, exc.headers, exc.body, exc.url))
    return found if isinstance(found, OAuthErrorResponse) else None


def refusal(endpoint: str, error: OAuthErrorResponse) -> str:
    """Which of the Brand's device-flow endpoints refused, and the OAuth error and description
    it gave; its words and URL escaped (and bounded): they can neither drive the terminal nor
    forge a line."""
    said = loggable(error.error)
    if error.description:
        said += f": {loggable(error.description)}"
    where = f" ({loggable(error.url)})" if error.url else ""
    return f"the Brand's {endpoint}{where} refused: {said} (HTTP {error.status})"


def save_delegation(path: str, tokens: TokenResponse) -> None:
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


__all__ = [
    "authorize",
    "device_client",
    "oauth_error",
    "read_delegation",
    "refreshed",
    "refusal",
    "save_delegation",
]
