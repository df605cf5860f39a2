"""Agent Cards from the personal agent's side: fetch, validate, pick the interface, and find
the delegation scheme (PACT §2.1, §5.1; the reference client's schema, pact-provider.md §3).

A personal agent gets a card URL from the Brand, usually `https://{brandDomain}/.well-known/
agent-card.json`, which may redirect to the Provider. `card_flow` follows up to 5 redirects,
each target checked like every other URL (https, or http to loopback only). Once on https,
nothing the card leads to may be plain http (a redirect, or a URL the card names for a
token: `check_card_link`).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import SplitResult, urljoin, urlsplit

from attrs import field, frozen

from pactmw.client.errors import (
    CardInvalid,
    HTTPError,
    ResponseInvalid,
    TooManyRedirects,
    URLRefused,
)
from pactmw.client.flow import Flow, RetryPolicy, exchange, run_async, run_sync
from pactmw.client.http import HttpRequest, HttpResponse, check_url, is_absolute_http_url
from pactmw.client.responses import raise_for_status
from pactmw.client.transport import AsyncioTransport, AsyncTransport, SyncTransport, Transport
from pactmw.core.encoding import is_scope_token

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
CARD_ACCEPT = "application/a2a+json, application/json"


@frozen
class Interface:
    """One `supportedInterfaces` entry."""

    url: str
    protocol_binding: str
    protocol_version: str


@frozen
class AgentCard:
    """A validated Agent Card. `url` is where it was finally fetched from (after redirects);
    `raw` is the whole document, for fields this class does not lift out."""

    name: str
    description: str
    version: str
    interfaces: tuple[Interface, ...]
    capabilities: Mapping[str, Any] = field(repr=False)
    security_schemes: Mapping[str, Any] = field(repr=False)
    security_requirements: tuple[Mapping[str, Any], ...] = field(repr=False)
    skills: tuple[Mapping[str, Any], ...] = field(repr=False)
    raw: Mapping[str, Any] = field(repr=False)
    url: str = ""


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def parse_card(document: Any, *, url: str = "") -> AgentCard:
    """Validate an Agent Card document; `CardInvalid` names the first field that fails."""

    def fail(what: str) -> CardInvalid:
        return CardInvalid(f"agent card{' at ' + url if url else ''}: {what}")

    if not isinstance(document, dict):
        raise fail("not a JSON object")
    name = document.get("name")
    if not isinstance(name, str) or not name:
        raise fail("name must be a non-empty string")
    for key in ("description", "version"):
        if not isinstance(document.get(key), str):
            raise fail(f"{key} must be a string")
    raw_interfaces = document.get("supportedInterfaces")
    if not isinstance(raw_interfaces, list) or not raw_interfaces:
        raise fail("supportedInterfaces must be a non-empty array")
    interfaces: list[Interface] = []
    for entry in raw_interfaces:
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), str) for k in ("url", "protocolBinding", "protocolVersion")
        ):
            raise fail("each interface needs url, protocolBinding and protocolVersion strings")
        interfaces.append(
            Interface(entry["url"], entry["protocolBinding"], entry["protocolVersion"])
        )
    if not isinstance(document.get("capabilities"), dict):
        raise fail("capabilities must be an object")
    for key in ("defaultInputModes", "defaultOutputModes"):
        if not _strings(document.get(key)):
            raise fail(f"{key} must be an array of strings")
    skills = document.get("skills")
    if not isinstance(skills, list):
        raise fail("skills must be an array")
    for skill in skills:
        if (
            not isinstance(skill, dict)
            or not all(isinstance(skill.get(k), str) for k in ("id", "name", "description"))
            or not _strings(skill.get("tags"))
            or ("examples" in skill and not _strings(skill["examples"]))
        ):
            raise fail("each skill needs id, name, description and tags")
    provider = document.get("provider")
    if provider is not None and (
        not isinstance(provider, dict)
        or not is_absolute_http_url(provider.get("url"))
        or not isinstance(provider.get("organization"), str)
    ):
        raise fail("provider must have a url and an organization")
    schemes = document.get("securitySchemes", {})
    if not isinstance(schemes, dict) or not all(isinstance(v, dict) for v in schemes.values()):
        raise fail("securitySchemes must be an object of objects")
    requirements = document.get("securityRequirements", [])
    if not isinstance(requirements, list) or not all(isinstance(r, dict) for r in requirements):
        raise fail("securityRequirements must be an array of objects")
    return AgentCard(
        name=name,
        description=document["description"],
        version=document["version"],
        interfaces=tuple(interfaces),
        capabilities=MappingProxyType(document["capabilities"]),
        security_schemes=MappingProxyType(schemes),
        security_requirements=tuple(MappingProxyType(r) for r in requirements),
        skills=tuple(MappingProxyType(s) for s in skills),
        raw=MappingProxyType(document),
        url=url,
    )


def _leaves_https(origin: str, target: SplitResult) -> bool:
    """Whether going from `origin` to `target` drops https for plain http. `check_url` lets
    plain http reach loopback hosts (local development), but not after https: the agent's
    token would go on over a channel anyone on the path can read and rewrite."""
    return target.scheme == "http" and urlsplit(origin).scheme == "https"


def check_card_link(card_url: str, url: str, what: str) -> str:
    """`url`, which the card at `card_url` names as where a token goes (`what`: "interface",
    "token endpoint"...): `URLRefused` when `check_url` refuses it, or when it is plain http
    and the card came over https. `card_url` "" (a card not fetched) takes what `check_url`
    takes."""
    if _leaves_https(card_url, check_url(url)):
        raise URLRefused(
            f"agent card at {card_url}: plain http {what} {url} refused (the card came over https)"
        )
    return url


def card_interface_url(card: AgentCard, *, binding: str = "HTTP+JSON", version: str = "1.0") -> str:
    """The URL of the interface with this binding and version, wherever it is in the list
    (PACT §2.1: by binding and version, not by position). `CardInvalid` when there is none;
    `URLRefused` when it is not https (or loopback http), or plain http named by a card
    fetched over https (`check_card_link`)."""
    for interface in card.interfaces:
        if interface.protocol_binding == binding and interface.protocol_version == version:
            return check_card_link(card.url, interface.url, "interface").rstrip("/")
    raise CardInvalid(f"the card offers no {binding} {version} interface")


# -- fetching -----------------------------------------------------------------------------------


def card_request(url: str) -> HttpRequest:
    """The card GET: no credentials (cards are public, and redirects may change origin)."""
    check_url(url)
    return HttpRequest("GET", url, headers=(("Accept", CARD_ACCEPT),))


def _redirect_target(current: str, location: str) -> str:
    """Where a redirect from `current` leads; `URLRefused` for a `Location` that is not a
    URL, one `check_url` refuses, or plain http after https: the agent would go on over a
    channel anyone on the path can read and rewrite (the card names where its token goes)."""
    try:
        target = urljoin(current, location)
    except ValueError as exc:  # the server's Location is not a URL at all
        raise URLRefused(f"{current} redirected to {location!r}: not a URL") from exc
    # First: a target with credentials in it is refused without quoting them.
    if _leaves_https(current, check_url(target)):
        raise URLRefused(f"{current} redirected to plain http {target}: refused")
    return target


def _card_json(response: HttpResponse) -> Any:
    """The card's JSON; a `CardInvalid` that says what came instead (a Brand's home page, a
    login page) when the answer is no JSON and does not claim to be."""
    try:
        return response.json()
    except ResponseInvalid as exc:
        media_type = (response.header("content-type") or "").partition(";")[0].strip().lower()
        if not media_type or "json" in media_type:
            raise CardInvalid(str(exc)) from exc
        raise CardInvalid(
            f"{exc}: a {media_type[:100]} page, not an Agent Card (is this the card's URL?)"
        ) from exc


def card_flow(url: str, policy: RetryPolicy) -> Flow[AgentCard]:
    """Fetch and validate a card, following up to `MAX_REDIRECTS` redirects."""
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        response = yield from exchange(
            functools.partial(card_request, current), policy, idempotent=True
        )
        location = response.header("location")
        if response.status in _REDIRECTS and location:
            current = _redirect_target(current, location)
            continue
        if response.status == 401:
            # The card is fetched without credentials: a 401 is no refused token of ours
            # (`IdentityRejected` would send its reader checking the agent's keys) but a URL
            # that is no public card, such as an app's guarded API route.
            raise HTTPError(response.status, response.body, response.headers, url=response.url)
        raise_for_status(response)
        return parse_card(_card_json(response), url=current)
    raise TooManyRedirects(f"{url} redirected more than {MAX_REDIRECTS} times")


def fetch_card(
    url: str,
    *,
    transport: Transport | None = None,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> AgentCard:
    """Fetch a Brand's Agent Card from any URL, following redirects (blocking)."""
    return run_sync(card_flow(url, retry or RetryPolicy()), transport or SyncTransport(), sleep)


async def afetch_card(
    url: str,
    *,
    transport: AsyncTransport | None = None,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AgentCard:
    """Fetch a Brand's Agent Card from any URL, following redirects (asyncio)."""
    return await run_async(
        card_flow(url, retry or RetryPolicy()), transport or AsyncioTransport(), sleep
    )


# -- the delegation scheme (PACT §5.1) ----------------------------------------------------------


@frozen
class Scope:
    """A scope the Brand offers: its id and the description users see on consent."""

    id: str
    description: str


@frozen
class DelegationScheme:
    """The card's device-code scheme. `refresh_url` defaults to `token_url`; `scopes` are in
    card order; `card_url` is where the card was fetched from ("" when not known), which
    decides whether its endpoints may be plain http (`check_card_link`)."""

    name: str
    identity_scheme: str
    device_authorization_url: str
    token_url: str
    refresh_url: str
    metadata_url: str | None
    scopes: tuple[Scope, ...]
    card_url: str = ""

    @property
    def scope_ids(self) -> tuple[str, ...]:
        return tuple(scope.id for scope in self.scopes)


def check_scheme_links(scheme: DelegationScheme) -> None:
    """`check_card_link` for each endpoint of `scheme` that takes the agent's token with a
    device code or a refresh token (the metadata URL takes no token)."""
    for what, url in (
        ("device authorization endpoint", scheme.device_authorization_url),
        ("token endpoint", scheme.token_url),
        ("refresh endpoint", scheme.refresh_url),
    ):
        check_card_link(scheme.card_url, url, what)


def _is_bearer(scheme: Any) -> bool:
    if not isinstance(scheme, Mapping) or set(scheme) != {"httpAuthSecurityScheme"}:
        return False
    body = scheme["httpAuthSecurityScheme"]
    return (
        isinstance(body, Mapping)
        and isinstance(body.get("scheme"), str)
        and body["scheme"].lower() == "bearer"
    )


def _device_code(name: str, identity: str, scheme: Any, card_url: str) -> DelegationScheme | None:
    if not isinstance(scheme, Mapping) or set(scheme) != {"oauth2SecurityScheme"}:
        return None
    body = scheme["oauth2SecurityScheme"]
    if not isinstance(body, Mapping) or not isinstance(body.get("flows"), Mapping):
        return None
    flow = body["flows"].get("deviceCode")
    if not isinstance(flow, Mapping):
        return None
    device, token = flow.get("deviceAuthorizationUrl"), flow.get("tokenUrl")
    refresh, metadata = flow.get("refreshUrl", token), body.get("oauth2MetadataUrl")
    scopes = flow.get("scopes")
    if not all(is_absolute_http_url(u) for u in (device, token, refresh)):
        return None
    if metadata is not None and not is_absolute_http_url(metadata):
        return None
    if not isinstance(scopes, Mapping) or not all(
        is_scope_token(k) and isinstance(v, str) for k, v in scopes.items()
    ):
        return None
    return DelegationScheme(
        name=name,
        identity_scheme=identity,
        device_authorization_url=str(device),
        token_url=str(token),
        refresh_url=str(refresh),
        metadata_url=metadata,
        scopes=tuple(Scope(k, v) for k, v in scopes.items()),
        card_url=card_url,
    )


def delegation_scheme(card: AgentCard) -> DelegationScheme | None:
    """The card's delegated-authority scheme, or None when the Brand offers none.

    Found like the reference client does, by shape rather than by name: the security
    requirement that names exactly two schemes, one an `httpAuthSecurityScheme` Bearer (the
    personal-agent JWT) and the other a valid `oauth2SecurityScheme` device-code flow.
    """
    for requirement in card.security_requirements:
        named = requirement.get("schemes")
        if not isinstance(named, Mapping) or len(named) != 2:
            continue
        first, second = list(named)
        for identity, delegated in ((first, second), (second, first)):
            if _is_bearer(card.security_schemes.get(identity)):
                scheme = card.security_schemes.get(delegated)
                found = _device_code(delegated, identity, scheme, card.url)
                if found is not None:
                    return found
    return None


__all__ = [
    "CARD_ACCEPT",
    "MAX_REDIRECTS",
    "AgentCard",
    "DelegationScheme",
    "Interface",
    "Scope",
    "afetch_card",
    "card_flow",
    "card_interface_url",
    "card_request",
    "check_card_link",
    "check_scheme_links",
    "delegation_scheme",
    "fetch_card",
    "parse_card",
]
