"""What a Company publishes: `/.well-known/poppy.json` (§3, §3.1) and its issuer's RFC 8414
authorization server metadata (§3.2). Pure builders over one frozen description.

`PoppyCompany` checks itself when built, so a misconfigured Brand fails at startup naming
the setting: every URL https (PAP-3-05), `dpop_signing_alg_values_supported` containing
ES256 (PAP-3.2-10), API types `openapi`/`mcp` (PAP-6-01), the organization's domain among
`poppy_domains` (PAP-3.2-01/02/04). Every domain's document is built from the one
description, so each names the same `auth` (PAP-3.2-06).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from attrs import field, frozen

from pactmw.core.encoding import is_scope_token
from pactmw.core.errors import PactmwError
from pactmw.protocols.poppy._assertions import ASSERTION_ALGS

#: The profile pactmw speaks: a Personal Agent refuses another major.minor (PAP-3.1-01).
PROTOCOL_VERSION = "0.2"
DISCOVERY_PATH = "/.well-known/poppy.json"
METADATA_PREFIX = "/.well-known/oauth-authorization-server"
OPERATIONS_EXTENSION = "operations"
OPERATIONS_VERSION = "1"
API_TYPES = frozenset({"openapi", "mcp"})
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
#: The DPoP algorithms pactmw's verifier accepts (core.dpop); ES256 is required (PAP-3.2-09).
DPOP_ALGS = ("ES256", "RS256")
_DOMAIN = re.compile(
    r"(?=.{1,253}\Z)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
)


class PoppyConfigError(PactmwError, ValueError):
    """A `PoppyCompany` setting is invalid; the message names it."""


def _https(name: str, value: str | None, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    parts = urlsplit(value) if isinstance(value, str) else None
    if (
        parts is None
        or parts.scheme != "https"
        or not parts.hostname
        or parts.username is not None
        or parts.fragment
        or parts.query
    ):
        raise PoppyConfigError(f"PoppyCompany.{name} must be an https URL, got {value!r}")


def _domain_ok(value: str) -> bool:
    return isinstance(value, str) and _DOMAIN.fullmatch(value) is not None


def _scopes(name: str, scopes: tuple[str, ...] | None) -> None:
    if scopes is None:
        return
    if not all(is_scope_token(s) for s in scopes):
        raise PoppyConfigError(f"PoppyCompany.{name} must be scope tokens, got {scopes!r}")


def _tuple_or_none(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    # A typed converter: attrs' mypy plugin cannot type `converter=tuple` for callers.
    return tuple(value)


def _lower(value: str) -> str:
    return value.lower() if isinstance(value, str) else value


def _frozen_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


@frozen
class ApiDescriptor:
    """One entry of `apis` (§6): an OpenAPI description or an MCP server of the app."""

    type: str
    url: str
    description: str

    def __attrs_post_init__(self) -> None:
        if self.type not in API_TYPES:
            raise PoppyConfigError(f"ApiDescriptor.type must be openapi or mcp, got {self.type!r}")
        _https("apis[].url", self.url)
        if not self.description:
            raise PoppyConfigError("ApiDescriptor.description must not be empty")


def _apis(value: Iterable[ApiDescriptor]) -> tuple[ApiDescriptor, ...]:
    return tuple(value)


@frozen
class PoppyCompany:
    """Everything the two documents say about one Company (a pactmw Brand).

    `domain` is the organization's domain, the host that answers `poppy.json` itself (no
    redirect to another host, PAP-3.1-02); `poppy_domains` every domain whose document names
    this `issuer` (default: `domain` alone). A sign-in type is offered when its scopes are
    given (`device_scopes`, `direct_scopes`; an empty tuple offers it with no scope).
    """

    name: str
    domain: str = field(converter=_lower)
    issuer: str
    token_endpoint: str
    revocation_endpoint: str
    device_authorization_endpoint: str | None = None
    authorization_endpoint: str | None = None
    device_scopes: tuple[str, ...] | None = field(default=None, converter=_tuple_or_none)
    direct_scopes: tuple[str, ...] | None = field(default=None, converter=_tuple_or_none)
    custom_scopes: Mapping[str, str] = field(factory=dict, converter=_frozen_map)
    conversations_endpoint: str | None = None
    operations_endpoint: str | None = None
    feedback_endpoint: str | None = None
    apis: tuple[ApiDescriptor, ...] = field(default=(), converter=_apis)
    poppy_domains: tuple[str, ...] = field(default=(), converter=_strings)
    dpop_signing_algs: tuple[str, ...] = field(default=DPOP_ALGS, converter=_strings)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise PoppyConfigError("PoppyCompany.name must not be empty")
        if not _domain_ok(self.domain):
            raise PoppyConfigError(f"PoppyCompany.domain must be a DNS name, got {self.domain!r}")
        if not self.poppy_domains:
            object.__setattr__(self, "poppy_domains", (self.domain,))
        lowered = tuple(d.lower() if isinstance(d, str) else d for d in self.poppy_domains)
        if not all(_domain_ok(d) for d in lowered):
            raise PoppyConfigError(f"PoppyCompany.poppy_domains must be DNS names: {lowered!r}")
        object.__setattr__(self, "poppy_domains", lowered)
        if self.domain not in self.poppy_domains:
            raise PoppyConfigError("PoppyCompany.poppy_domains must include PoppyCompany.domain")
        _https("issuer", self.issuer)
        for name in ("token_endpoint", "revocation_endpoint"):
            _https(name, getattr(self, name))
        for name in (
            "device_authorization_endpoint",
            "authorization_endpoint",
            "conversations_endpoint",
            "operations_endpoint",
            "feedback_endpoint",
        ):
            _https(name, getattr(self, name), optional=True)
        if self.device_scopes is not None and self.device_authorization_endpoint is None:
            raise PoppyConfigError(
                "PoppyCompany.device_scopes needs PoppyCompany.device_authorization_endpoint"
            )
        if self.direct_scopes is not None and self.authorization_endpoint is None:
            raise PoppyConfigError(
                "PoppyCompany.direct_scopes needs PoppyCompany.authorization_endpoint"
            )
        _scopes("device_scopes", self.device_scopes)
        _scopes("direct_scopes", self.direct_scopes)
        _scopes("custom_scopes", tuple(self.custom_scopes))
        if "ES256" not in self.dpop_signing_algs or not set(self.dpop_signing_algs) <= set(
            DPOP_ALGS
        ):
            raise PoppyConfigError(
                f"PoppyCompany.dpop_signing_algs must include ES256 and be among {DPOP_ALGS}"
            )
        if not (self.conversations_endpoint or self.apis):
            # §3.1: a document offers at least one of agent, apis or web (web: not yet).
            raise PoppyConfigError(
                "PoppyCompany needs conversations_endpoint or at least one of apis"
            )


def metadata_url(issuer: str) -> str:
    """The issuer's RFC 8414 §3.1 metadata URL: the well-known path between host and path
    (`https://auth.example/shop-a` -> `https://auth.example/.well-known/oauth-authorization-
    server/shop-a`), a terminating `/` of the path removed first."""
    parts = urlsplit(issuer)
    return urlunsplit(
        (parts.scheme, parts.netloc, METADATA_PREFIX + parts.path.rstrip("/"), "", "")
    )


def discovery_document(company: PoppyCompany, domain: str | None = None) -> dict[str, Any]:
    """The `poppy.json` served at `domain` (default: the organization's own), which must be
    one of `poppy_domains`. Optional members are left out, never null."""
    served = company.domain if domain is None else domain.lower()
    if served not in company.poppy_domains:
        raise PoppyConfigError(f"{domain!r} is not one of PoppyCompany.poppy_domains")
    auth: dict[str, Any] = {"issuer": company.issuer}
    if company.direct_scopes is not None:
        auth["direct"] = {"scopes": list(company.direct_scopes)}
    if company.device_scopes is not None:
        auth["device"] = {"scopes": list(company.device_scopes)}
    if company.custom_scopes:
        auth["custom_scopes"] = dict(company.custom_scopes)
    document: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "organization": {"name": company.name, "domain": served},
        "auth": auth,
    }
    if company.conversations_endpoint is not None:
        document["agent"] = {
            "protocols": [{"type": "poppy", "endpoint": company.conversations_endpoint}]
        }
    if company.apis:
        document["apis"] = [
            {"type": api.type, "url": api.url, "description": api.description}
            for api in company.apis
        ]
    if company.feedback_endpoint is not None:
        document["feedback"] = {"endpoint": company.feedback_endpoint}
    if company.operations_endpoint is not None:
        document["extensions"] = {
            OPERATIONS_EXTENSION: {
                "version": OPERATIONS_VERSION,
                "endpoint": company.operations_endpoint,
            }
        }
    return document


def authorization_server_metadata(company: PoppyCompany) -> dict[str, Any]:
    """The issuer's RFC 8414 metadata with Poppy's members (§3.2)."""
    metadata: dict[str, Any] = {
        "issuer": company.issuer,
        "token_endpoint": company.token_endpoint,
        "revocation_endpoint": company.revocation_endpoint,
        "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        # What client assertions may be signed with (GUIDE-jwt-01/02), ES256 first.
        "token_endpoint_auth_signing_alg_values_supported": sorted(ASSERTION_ALGS),
        "grant_types_supported": _grant_types(company),
        "dpop_signing_alg_values_supported": list(company.dpop_signing_algs),
        "poppy_domains": list(company.poppy_domains),
    }
    if company.device_authorization_endpoint is not None:
        metadata["device_authorization_endpoint"] = company.device_authorization_endpoint
    if company.authorization_endpoint is not None:
        metadata["authorization_endpoint"] = company.authorization_endpoint
        metadata["response_types_supported"] = ["code"]
        metadata["code_challenge_methods_supported"] = ["S256"]
    scopes = sorted(
        {*(company.device_scopes or ()), *(company.direct_scopes or ()), *company.custom_scopes}
    )
    if scopes:
        metadata["scopes_supported"] = scopes
    return metadata


def _grant_types(company: PoppyCompany) -> list[str]:
    grants = [JWT_BEARER_GRANT, "refresh_token"]
    if company.device_authorization_endpoint is not None:
        grants.append(DEVICE_CODE_GRANT)
    if company.authorization_endpoint is not None:
        grants.append("authorization_code")
    return grants


__all__ = [
    "API_TYPES",
    "DEVICE_CODE_GRANT",
    "DISCOVERY_PATH",
    "DPOP_ALGS",
    "JWT_BEARER_GRANT",
    "METADATA_PREFIX",
    "OPERATIONS_EXTENSION",
    "OPERATIONS_VERSION",
    "PROTOCOL_VERSION",
    "ApiDescriptor",
    "PoppyCompany",
    "PoppyConfigError",
    "authorization_server_metadata",
    "discovery_document",
    "metadata_url",
]
