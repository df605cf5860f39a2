"""The OAuth 2.0 device-code client of the PACT Delegated profile (PACT §5.3, RFC 8628).

The personal agent is the OAuth client: `client_id` is its issuer URL and every call carries
its PACT JWT as `Authorization: Bearer`. `start` asks for scopes listed on the card, the user
approves them on the Brand's side (the agent only shows `verification_uri_complete`),
`wait_for_token` polls, `refresh` renews. Error mapping follows the reference client: an
OAuth error body with a status other than 401 is `OAuthErrorResponse`; a 401 is a transport-level
error (`IdentityRejected` for the `Bearer realm="a2a"` challenge, else `HTTPError`).

Resending: the device-authorization and token calls are not idempotent (a lost token answer
has already consumed the device code; a refresh token is single-use and a Provider may
revoke the grant when a spent one comes back), so after a failure that may have reached the
Provider they are never resent. `wait_for_token` backs off on network failures as RFC 8628
§3.5 asks, adds 5 s to the interval on every `slow_down`, and polls on through a 503 (a
Provider whose store is briefly down: `temporarily_unavailable`) after its `Retry-After`.
"""

from __future__ import annotations

import asyncio
import enum
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any
from urllib.parse import urlencode

from attrs import field, frozen

from pactmw.client.card import DelegationScheme, check_scheme_links
from pactmw.client.errors import (
    DeviceFlowTimeout,
    HTTPError,
    NetworkError,
    OAuthErrorResponse,
    ResponseInvalid,
    ScopesNotOffered,
)
from pactmw.client.flow import (
    AsyncDriver,
    BlockingDriver,
    Flow,
    RetryPolicy,
    Sleep,
    TokenSource,
    check_token_source,
    exchange,
)
from pactmw.client.http import HttpRequest, HttpResponse, check_url, is_absolute_http_url
from pactmw.client.responses import error_for
from pactmw.client.transport import AsyncioTransport, AsyncTransport, SyncTransport, Transport
from pactmw.core.encoding import json_dumps, json_loads, printable
from pactmw.core.errors import MalformedInput
from pactmw.core.fetch import retry_after
from pactmw.protocols.delegation import is_authorization_details

DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
DEFAULT_INTERVAL = 5  # RFC 8628 §3.2
SLOW_DOWN_STEP = 5  # RFC 8628 §3.5
MAX_BACKOFF_INTERVAL = 60.0
#: The longest `expires_in` or `interval` taken (68 years): past it no device code is real,
#: and far past it `wait_for_token`'s clock arithmetic and sleeps overflow.
MAX_DEVICE_SECONDS = 2**31 - 1
#: The longest `user_code` taken: a person reads and types it (RFC 8628 §6.1 suggests 8
#: characters), and it is printed for them whole.
MAX_USER_CODE_CHARS = 64
#: The longest `verification_uri(_complete)` taken: a link a person opens, printed whole;
#: 2048 characters is what every browser takes.
MAX_VERIFICATION_URI_CHARS = 2048
_VSCHARS = re.compile(r"[\x20-\x7e]+")


@frozen
class DeviceAuthorizationResponse:
    """RFC 8628 §3.2 answer. `received_at` is the client clock when it arrived (monotonic);
    the code is valid until `received_at + expires_in`."""

    device_code: str = field(repr=False)
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_in: int
    interval: int
    scopes: tuple[str, ...]
    received_at: float = 0.0

    @property
    def expires_at(self) -> float:
        return self.received_at + self.expires_in


@frozen
class TokenResponse:
    """A delegation token (RFC 6749 §5.1). `scopes` is what the user approved, which may be
    less than what was asked: read it (PACT §5.3)."""

    access_token: str = field(repr=False)
    token_type: str
    expires_in: int
    scopes: tuple[str, ...]
    refresh_token: str | None = field(default=None, repr=False)
    raw: Mapping[str, Any] = field(factory=dict, repr=False)
    #: RFC 9396 §7: the authorization details the user approved (none when not sent).
    authorization_details: tuple[Mapping[str, Any], ...] = ()

    @property
    def scope(self) -> str:
        return " ".join(self.scopes)


class PollStatus(enum.Enum):
    """A poll that did not yield a token yet."""

    PENDING = "authorization_pending"
    SLOW_DOWN = "slow_down"


PollResult = TokenResponse | PollStatus


# -- the pure part ------------------------------------------------------------------------------


def requested_scopes(scheme: DelegationScheme, scopes: Iterable[str]) -> tuple[str, ...]:
    """The scope ids to ask for, deduplicated in order; `ScopesNotOffered` (a `ValueError`)
    for an id not on the card (PACT §5.2: request only ids on the card), `ValueError` for
    none at all."""
    wanted = tuple(dict.fromkeys(scopes))
    offered = set(scheme.scope_ids)
    unknown = [scope for scope in wanted if scope not in offered]
    if unknown:
        raise ScopesNotOffered(unknown)
    if not wanted:
        raise ValueError("request at least one scope")
    return wanted


def oauth_request(url: str, form: Iterable[tuple[str, str]], *, bearer: str) -> HttpRequest:
    """A form POST to an OAuth endpoint, authenticated by the personal-agent JWT."""
    return HttpRequest(
        "POST",
        url,
        headers=(
            ("Authorization", f"Bearer {bearer}"),
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Accept", "application/json"),
        ),
        body=urlencode(list(form)).encode("ascii"),
    )


def oauth_error_for(response: HttpResponse) -> HTTPError:
    """`OAuthErrorResponse` for an RFC 6749 error body with status != 401; else the plain
    mapping."""
    if response.status != 401:
        try:
            body = json_loads(response.body)
        except MalformedInput:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]:
            description = body.get("error_description")
            return OAuthErrorResponse(
                response.status,
                body["error"],
                description if isinstance(description, str) else None,
                body=response.body,
                headers=response.headers,
                url=response.url,
            )
    return error_for(response)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def parse_device_authorization(
    response: HttpResponse, *, scopes: tuple[str, ...], now: float
) -> DeviceAuthorizationResponse:
    """Read a device-authorization answer (or raise its error)."""
    if not response.ok:
        raise oauth_error_for(response)
    body = response.json_object()
    device_code, user_code = body.get("device_code"), body.get("user_code")
    uri, complete = body.get("verification_uri"), body.get("verification_uri_complete")
    expires_in, interval = body.get("expires_in"), body.get("interval", DEFAULT_INTERVAL)
    if not (isinstance(device_code, str) and device_code and isinstance(user_code, str)):
        raise ResponseInvalid("device authorization without device_code and user_code")
    # Both are shown to the person: text they could not type, or a terminal would act on,
    # is no user code (and a megabyte of it would flood their screen).
    if not (0 < len(user_code) <= MAX_USER_CODE_CHARS and printable(user_code) == user_code):
        raise ResponseInvalid(
            f"user_code must be 1 to {MAX_USER_CODE_CHARS} characters without controls"
        )
    if not (is_absolute_http_url(uri) and is_absolute_http_url(complete)):
        raise ResponseInvalid("verification_uri(_complete) must be absolute URLs")
    if max(len(str(uri)), len(str(complete))) > MAX_VERIFICATION_URI_CHARS:
        raise ResponseInvalid(
            f"verification_uri(_complete) must be at most {MAX_VERIFICATION_URI_CHARS} characters"
        )
    # The user opens these in a browser: the same https rule as for the client's own calls.
    check_url(str(uri))
    check_url(str(complete))
    if not (isinstance(expires_in, int) and isinstance(interval, int)) or not (
        _positive_int(expires_in)
        and _positive_int(interval)
        and max(expires_in, interval) <= MAX_DEVICE_SECONDS
    ):
        raise ResponseInvalid(
            f"expires_in and interval must be positive integers up to {MAX_DEVICE_SECONDS}"
        )
    return DeviceAuthorizationResponse(
        device_code=device_code,
        user_code=user_code,
        verification_uri=str(uri),
        verification_uri_complete=str(complete),
        expires_in=int(expires_in),
        interval=int(interval),
        scopes=scopes,
        received_at=now,
    )


def parse_token_response(response: HttpResponse) -> TokenResponse:
    """Read a token answer: `token_type` bearer (any case), `access_token`, a positive
    integer `expires_in` and a `scope` string (the reference client's rules)."""
    if not response.ok:
        raise oauth_error_for(response)
    body = response.json_object()
    token_type, access = body.get("token_type"), body.get("access_token")
    expires_in, scope, refresh = (
        body.get("expires_in"),
        body.get("scope"),
        body.get("refresh_token"),
    )
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise ResponseInvalid(f"token_type must be Bearer, not {token_type!r}")
    # RFC 6749 A.12: 1*VSCHAR. It goes in a header of every delegated call, where CR, LF,
    # NUL or non-ASCII text cannot be written.
    if not isinstance(access, str) or not _VSCHARS.fullmatch(access):
        raise ResponseInvalid("access_token missing, or not visible ASCII")
    if not isinstance(expires_in, int) or not _positive_int(expires_in):
        raise ResponseInvalid("expires_in must be a positive integer")
    if not isinstance(scope, str):
        raise ResponseInvalid("scope must be a string")
    if refresh is not None and (not isinstance(refresh, str) or not refresh):
        raise ResponseInvalid("refresh_token must be a non-empty string")
    details = body.get("authorization_details", [])
    if not is_authorization_details(details):
        raise ResponseInvalid("authorization_details must be an array of objects with a type")
    return TokenResponse(
        access_token=access,
        token_type=token_type,
        expires_in=int(expires_in),
        scopes=tuple(scope.split()),
        refresh_token=refresh,
        raw=MappingProxyType(body),
        authorization_details=tuple(MappingProxyType(entry) for entry in details),
    )


def parse_poll_response(response: HttpResponse) -> PollResult:
    """A token answer, or `PENDING` / `SLOW_DOWN`; other errors raise (`access_denied`,
    `expired_token`, `invalid_grant` as `OAuthErrorResponse`)."""
    if not response.ok:
        error = oauth_error_for(response)
        if isinstance(error, OAuthErrorResponse):
            for status in PollStatus:
                if error.error == status.value:
                    return status
        raise error
    return parse_token_response(response)


# -- flows --------------------------------------------------------------------------------------


def _post_form(
    url: str, form: Iterable[tuple[str, str]], token: TokenSource, policy: RetryPolicy
) -> Flow[HttpResponse]:
    """POST `form` to an OAuth endpoint, a fresh personal-agent JWT each attempt. Not resent
    once it may have been delivered: each request may spend a device or refresh token."""
    return exchange(lambda: oauth_request(url, form, bearer=token()), policy, idempotent=False)


def start_flow(
    scheme: DelegationScheme,
    token: TokenSource,
    client_id: str,
    scopes: Iterable[str],
    *,
    clock: Callable[[], float],
    policy: RetryPolicy,
    authorization_details: Sequence[Mapping[str, Any]] | None = None,
) -> Flow[DeviceAuthorizationResponse]:
    wanted = requested_scopes(scheme, scopes)
    form: tuple[tuple[str, str], ...] = (("client_id", client_id), ("scope", " ".join(wanted)))
    if authorization_details is not None:
        # RFC 9396 §6: one form field holding the JSON array.
        entries = [dict(entry) for entry in authorization_details]
        form += (("authorization_details", json_dumps(entries).decode("utf-8")),)
    response = yield from _post_form(scheme.device_authorization_url, form, token, policy)
    return parse_device_authorization(response, scopes=wanted, now=clock())


def poll_flow(
    scheme: DelegationScheme,
    token: TokenSource,
    client_id: str,
    device_code: str,
    *,
    policy: RetryPolicy,
) -> Flow[PollResult]:
    form = (
        ("grant_type", DEVICE_CODE_GRANT),
        ("device_code", device_code),
        ("client_id", client_id),
    )
    response = yield from _post_form(scheme.token_url, form, token, policy)
    return parse_poll_response(response)


def wait_flow(
    scheme: DelegationScheme,
    token: TokenSource,
    client_id: str,
    authorization: DeviceAuthorizationResponse,
    *,
    clock: Callable[[], float],
    timeout: float | None,
    policy: RetryPolicy,
) -> Flow[TokenResponse]:
    """Sleep `interval`, poll, repeat: +5 s per `slow_down`; doubled interval after a network
    failure (RFC 8628 §3.5); after a 503, the next poll waits its `Retry-After` (never less
    than `interval`); `DeviceFlowTimeout` once the next poll would come after the code
    expired or after `timeout`."""
    end = authorization.expires_at
    if timeout is not None:
        end = min(end, clock() + timeout)
    interval = float(authorization.interval)
    at_least = 0.0  # a 503's Retry-After, for the next wait only
    while True:
        wait, at_least = max(interval, at_least), 0.0
        if clock() + wait > end:
            left = authorization.expires_at - clock()
            if timeout is not None and clock() + wait <= authorization.expires_at:
                # The caller's bound, not the code's: the person's link still works.
                raise DeviceFlowTimeout(
                    f"no decision within the timeout of {timeout:g} s (user code"
                    f" {authorization.user_code}; the code is valid for {left:.0f} s more:"
                    " wait_for_token again to keep waiting)"
                )
            raise DeviceFlowTimeout(
                f"no decision before the device code expired (user code {authorization.user_code})"
            )
        yield Sleep(wait)
        try:
            result = yield from poll_flow(
                scheme, token, client_id, authorization.device_code, policy=policy
            )
        except NetworkError as exc:
            if not exc.retryable:  # an untrusted certificate, a too-large answer: every poll
                raise
            interval = min(interval * 2, MAX_BACKOFF_INTERVAL)
            continue
        except HTTPError as exc:
            if exc.status != 503:
                raise
            # The Provider cannot answer for now (its store is down: RFC 6749's
            # `temporarily_unavailable`), and a refused poll spent nothing: poll again once
            # it says to, while the code is valid, instead of abandoning the user's approval.
            at_least = retry_after(exc.header("retry-after"), date=exc.header("date")) or 0.0
            continue
        if result is PollStatus.SLOW_DOWN:
            interval += SLOW_DOWN_STEP
        elif isinstance(result, TokenResponse):
            return result


def refresh_flow(
    scheme: DelegationScheme,
    token: TokenSource,
    client_id: str,
    refresh_token: str,
    *,
    policy: RetryPolicy,
) -> Flow[TokenResponse]:
    form = (
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", client_id),
    )
    response = yield from _post_form(scheme.refresh_url, form, token, policy)
    return parse_token_response(response)


# -- the clients --------------------------------------------------------------------------------


def _client_id(token: TokenSource, client_id: str | None) -> str:
    if client_id is not None:
        return client_id
    issuer = getattr(token, "issuer", None)
    if not isinstance(issuer, str) or not issuer:
        raise ValueError("client_id is required unless token is AgentCredentials")
    return issuer


class _DeviceCodeBase:
    def __init__(
        self,
        scheme: DelegationScheme,
        token: TokenSource,
        *,
        client_id: str | None,
        retry: RetryPolicy | None,
        clock: Callable[[], float],
    ) -> None:
        if not isinstance(scheme, DelegationScheme):
            # `delegation_scheme(card)` is None for a Brand without delegation (docs/client.md).
            raise TypeError(
                "scheme must be a DelegationScheme; delegation_scheme(card) is None when the"
                f" Brand offers no delegation (got {type(scheme).__name__})"
            )
        check_token_source(token)
        check_scheme_links(scheme)
        self.scheme = scheme
        self.token = token
        self.client_id = _client_id(token, client_id)
        self.retry = retry or RetryPolicy()
        self.clock = clock

    def _start(
        self, scopes: Iterable[str], details: Sequence[Mapping[str, Any]] | None
    ) -> Flow[DeviceAuthorizationResponse]:
        return start_flow(
            self.scheme,
            self.token,
            self.client_id,
            scopes,
            clock=self.clock,
            policy=self.retry,
            authorization_details=details,
        )

    def _poll(self, authorization: DeviceAuthorizationResponse | str) -> Flow[PollResult]:
        if isinstance(authorization, DeviceAuthorizationResponse):
            authorization = authorization.device_code
        return poll_flow(self.scheme, self.token, self.client_id, authorization, policy=self.retry)

    def _wait(
        self, authorization: DeviceAuthorizationResponse, timeout: float | None
    ) -> Flow[TokenResponse]:
        return wait_flow(
            self.scheme,
            self.token,
            self.client_id,
            authorization,
            clock=self.clock,
            timeout=timeout,
            policy=self.retry,
        )

    def _refresh(self, refresh_token: str) -> Flow[TokenResponse]:
        return refresh_flow(
            self.scheme, self.token, self.client_id, refresh_token, policy=self.retry
        )


class DeviceCodeClient(_DeviceCodeBase):
    """Blocking device-code client for one Brand's delegation scheme (`delegation_scheme`).

    `token` returns a fresh personal-agent JWT per call; `client_id` defaults to its issuer
    when it is `AgentCredentials`. `sleep` and `clock` (monotonic seconds) are injectable.
    """

    def __init__(
        self,
        scheme: DelegationScheme,
        token: TokenSource,
        *,
        client_id: str | None = None,
        transport: Transport | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(scheme, token, client_id=client_id, retry=retry, clock=clock)
        self.driver = BlockingDriver(transport or SyncTransport(), sleep)

    def start(
        self,
        scopes: Iterable[str],
        *,
        authorization_details: Sequence[Mapping[str, Any]] | None = None,
    ) -> DeviceAuthorizationResponse:
        """Ask for `scopes` (ids on the card); show the user `verification_uri_complete`.

        `authorization_details` (RFC 9396 entries, each with a `type` the Brand's metadata
        lists) bind the grant to resources; read back what was approved from the token."""
        return self.driver.run(self._start(scopes, authorization_details))

    def poll(self, authorization: DeviceAuthorizationResponse | str) -> PollResult:
        """One token request: a `TokenResponse`, `PollStatus.PENDING` or `.SLOW_DOWN`."""
        return self.driver.run(self._poll(authorization))

    def wait_for_token(
        self, authorization: DeviceAuthorizationResponse, *, timeout: float | None = None
    ) -> TokenResponse:
        """Poll until the user decides: the token, `OAuthErrorResponse` (`access_denied`...), or
        `DeviceFlowTimeout` at expiry (or after `timeout` seconds). Network failures and 503s
        (a Provider down for a moment) are polled through."""
        return self.driver.run(self._wait(authorization, timeout))

    def refresh(self, refresh_token: str) -> TokenResponse:
        """A new access token (and a new refresh token: the old one is spent)."""
        return self.driver.run(self._refresh(refresh_token))


class AsyncDeviceCodeClient(_DeviceCodeBase):
    """`DeviceCodeClient` for asyncio: the same flows, driven by `AsyncioTransport`."""

    def __init__(
        self,
        scheme: DelegationScheme,
        token: TokenSource,
        *,
        client_id: str | None = None,
        transport: AsyncTransport | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(scheme, token, client_id=client_id, retry=retry, clock=clock)
        self.driver = AsyncDriver(transport or AsyncioTransport(), sleep)

    async def start(
        self,
        scopes: Iterable[str],
        *,
        authorization_details: Sequence[Mapping[str, Any]] | None = None,
    ) -> DeviceAuthorizationResponse:
        return await self.driver.run(self._start(scopes, authorization_details))

    async def poll(self, authorization: DeviceAuthorizationResponse | str) -> PollResult:
        return await self.driver.run(self._poll(authorization))

    async def wait_for_token(
        self, authorization: DeviceAuthorizationResponse, *, timeout: float | None = None
    ) -> TokenResponse:
        return await self.driver.run(self._wait(authorization, timeout))

    async def refresh(self, refresh_token: str) -> TokenResponse:
        return await self.driver.run(self._refresh(refresh_token))


__all__ = [
    "DEFAULT_INTERVAL",
    "DEVICE_CODE_GRANT",
    "MAX_BACKOFF_INTERVAL",
    "MAX_DEVICE_SECONDS",
    "MAX_USER_CODE_CHARS",
    "MAX_VERIFICATION_URI_CHARS",
    "SLOW_DOWN_STEP",
    "AsyncDeviceCodeClient",
    "DeviceAuthorizationResponse",
    "DeviceCodeClient",
    "PollResult",
    "PollStatus",
    "TokenResponse",
    "oauth_error_for",
    "oauth_request",
    "parse_device_authorization",
    "parse_poll_response",
    "parse_token_response",
    "poll_flow",
    "refresh_flow",
    "requested_scopes",
    "start_flow",
    "wait_flow",
]
