"""One typed configuration, built from a plain dict.

A TOML file, Django's `settings.PACTMW`, Flask's `app.config["PACTMW"]` and Python code all
feed `Settings.from_mapping`, so every entry point reads the same keys the same way. Unknown
keys are errors: a typo must not silently weaken a check.
"""

from __future__ import annotations

import difflib
import ipaddress
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from attrs import frozen

from pactmw.core.encoding import bidi_control_in
from pactmw.core.errors import MalformedInput, PactmwError
from pactmw.core.fetch import FetchPolicy, IPNetwork, parse_networks
from pactmw.core.http import PROVIDER_MOUNT
from pactmw.core.jwk import KeySet, parse_jwks
from pactmw.core.keys import JwksCache
from pactmw.protocols.identity import (
    IDENTITY_ALGORITHMS,
    AgentOverrides,
    AgentRegistry,
    IdentityVerifier,
    RegisteredAgent,
    RuntimeAgents,
)

T = TypeVar("T")


class ConfigError(PactmwError, ValueError):
    """The configuration is invalid; the message names the key."""


def _typed(data: Mapping[str, Any], key: str, kind: type[T], default: T, where: str) -> T:
    value = data.get(key, default)
    # bool is an int subclass; a float setting given as an int is fine.
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ConfigError(f"{where}{key} must be a {kind.__name__}")
    return value


def optional_string(data: Mapping[str, Any], key: str, where: str) -> str | None:
    """The non-empty string under `key`, or None when absent; the message names the key
    after `where`, the prefix of its table (as `refuse_unknown` takes it: "brands.b.")."""
    value = data.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{where}{key} must be a non-empty string")
    return value


def guarded_prefix(value: object, name: str, *, empty_is_none: bool) -> str | None:
    """A guarded path prefix as configured under `name`: None guards nothing, else a path
    starting with "/" (request paths always do: "api/" would silently guard nothing). The
    settings write "nothing" as "" (`empty_is_none`; TOML has no null); elsewhere "" is refused,
    since read as a prefix it would guard every path."""
    if value is None or (value == "" and empty_is_none):
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string")
    if not value.startswith("/"):
        raise ConfigError(f"{name} must be a path starting with '/' (got {value!r})")
    return value


def require_verifier(verifier: object) -> IdentityVerifier:
    """`verifier` when it is an `IdentityVerifier`, else `ConfigError`: passing `Settings`
    or a `Provider` for one is easy, and it would fail only at the first request. What holds
    one (a Provider, a Guard: not imported here, which they import) is told to pass it."""
    if not isinstance(verifier, IdentityVerifier):
        made = ""
        if isinstance(verifier, Settings):
            made = " (Settings.build_verifier() makes one)"
        elif isinstance(getattr(verifier, "verifier", None), IdentityVerifier):
            made = f" (pass {type(verifier).__name__.lower()}.verifier)"
        raise ConfigError(
            f"verifier must be an IdentityVerifier{made}, not {type(verifier).__name__}"
        )
    return verifier


def check_base_url(base_url: object) -> str:
    """A Provider's `base_url`: its public http(s) URL, without the trailing slash."""
    if not isinstance(base_url, str) or not base_url:
        raise ConfigError("base_url is required: the public http(s) URL of this Provider")
    if not base_url.startswith(("http://", "https://")):
        # Written, just without its scheme ("127.0.0.1:8000"): "required" would send its
        # author looking for a key that is there.
        raise ConfigError(f"base_url must be an http:// or https:// URL (got {base_url!r})")
    try:
        url = urlsplit(base_url)
        valid = url.hostname is not None and url.port != -1  # .port raises past 65535
    except ValueError:  # also a bracketed host that is no IPv6 address ("http://[::1")
        valid = False
    if not valid:
        # Every card URL is made of it: refused here, not as a traceback at the first card.
        raise ConfigError(f"base_url is not a valid http(s) URL: {base_url!r}")
    if "@" in url.netloc:
        # The Agent Cards would publish the user name and password to every caller; and
        # the URL is not repeated, so the password reaches no log either.
        raise ConfigError(
            "base_url must not hold a user name or password: it is published in every"
            " Agent Card; give the public URL personal agents reach"
        )
    for part, present in (("a query", "?" in base_url), ("a fragment", "#" in base_url)):
        if present:
            # Every URL pactmw publishes is base_url plus a path, which would land inside
            # the query or fragment: the card would name an interface nobody can reach.
            raise ConfigError(
                f"base_url must not have {part}: every URL pactmw publishes is base_url plus"
                f" a path (got {base_url!r})"
            )
    return base_url.rstrip("/")


def refuse_unknown(data: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    """A `ConfigError` naming the first key of `data` (in sorted order) not in `known`, in
    the table `where` (`""` at the top, else ending with a dot), and the known key it is
    closest to, when one is close (a misspelling, or Flask's habit of upper-case settings),
    so its reader need not search the docs."""
    unknown = sorted(set(data) - known)
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key.lower(), sorted(known), n=1, cutoff=0.8)
        guess = f" (did you mean {where}{close[0]}?)" if close else ""
        raise ConfigError(f"unknown configuration key {where}{key}{guess}")


def optional_jwks(data: Mapping[str, Any], key: str, what: str) -> KeySet | None:
    """`data[key]` read as a JWKS (None when absent); a bad one is a `ConfigError` that
    starts with `what`."""
    if key not in data:
        return None
    value = data[key]
    try:
        return parse_jwks(value)
    except MalformedInput as exc:
        if isinstance(value, str) and not value.lstrip().startswith("{"):
            # A file's name is the likely mistake ("invalid JSON" would not say so).
            raise ConfigError(
                f"{what}: {value!r} is not a JWKS document; {key} takes the document itself "
                f"(a table, or its JSON text), not a file name: read the file, or serve it "
                f"and give {key}_uri"
            ) from exc
        raise ConfigError(f"{what}: {exc}") from exc


_AGENT_KEYS = frozenset({"issuer", "jwks_uri", "jwks", "name", "enabled", "audience"})


def agent_from_mapping(data: Mapping[str, Any], where: str = "agents[]: ") -> RegisteredAgent:
    """One `[[agents]]` entry: `issuer`, `jwks_uri` or `jwks`, `name`, `enabled`, `audience`."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}each agent must be a table/dict")
    refuse_unknown(data, _AGENT_KEYS, where)
    issuer = optional_string(data, "issuer", where)
    if issuer is None:
        raise ConfigError(f"{where}issuer is required")
    check_agent_issuer(issuer, f"{where}issuer")
    jwks = optional_jwks(data, "jwks", f"{where}jwks")
    # Every key is read before the agent is built: a ConfigError is a ValueError, and one
    # raised inside the `try` would be named twice ("agents[0].agents[0].enabled ...").
    name = _typed(data, "name", str, "", where)
    control = bidi_control_in(name)
    if control is not None:  # the pages' rule, as `pactmw agents add` has it
        raise ConfigError(f"{where}name must not hold bidirectional controls ({control})")
    jwks_uri = optional_string(data, "jwks_uri", where)
    enabled = _typed(data, "enabled", bool, True, where)
    audience = optional_string(data, "audience", where)
    # Said here, by the entry's keys: RegisteredAgent's own text names the issuer, which
    # after `where` named the entry twice ("agents[0].agent 'https://...' needs ...").
    if jwks_uri is None and jwks is None:
        raise ConfigError(f"{where}jwks_uri or jwks is required")
    if jwks_uri is not None and jwks is not None:
        raise ConfigError(f"{where}jwks_uri and jwks are both set: give one")
    if jwks is not None and not any(jwks.candidates(None, alg) for alg in IDENTITY_ALGORITHMS):
        # `parse_jwks` skips what cannot verify (RFC 7517 §5): an inline set left with no
        # ES256/RS256 key (empty, `oct` or Ed25519 only) loaded, then refused each token as
        # `unknown_kid`. A `jwks_uri`'s document may change, so only the inline one is judged.
        raise ConfigError(
            f"{where}jwks has no public key that verifies an identity JWT (ES256 or RS256): "
            "every token of this agent would be refused"
        )
    try:
        return RegisteredAgent(
            issuer=issuer,
            name=name,
            jwks_uri=jwks_uri,
            jwks=jwks,
            enabled=enabled,
            audience=audience,
        )
    except ValueError as exc:
        raise ConfigError(f"{where}{exc}") from exc


@frozen
class Settings:
    """Everything pactmw needs to verify personal agents.

    Keys (all optional but `audience`): `audience`, `agents` (a list of agent tables),
    `allow_http_jwks_on_loopback`, `allowed_jwks_networks` (CIDR strings for internal JWKS
    hosts), `open_mode`, `protect_prefix` (the path prefix the middleware guards; empty
    string or None guards nothing, leaving it to decorators), `clock_skew`, `jwks_timeout`.
    """

    audience: str
    agents: tuple[RegisteredAgent, ...] = ()
    allow_http_jwks_on_loopback: bool = False
    allowed_jwks_networks: tuple[IPNetwork, ...] = ()
    open_mode: bool = False
    protect_prefix: str | None = PROVIDER_MOUNT
    clock_skew: float = 30.0
    jwks_timeout: float = 5.0

    def __attrs_post_init__(self) -> None:
        # The checks of values, here so that settings built in code (`Settings(agents=...)`)
        # are held to them as `from_mapping`'s are: a bad issuer would refuse every token as
        # unknown_issuer, a JWKS URL no fetch may reach every token as jwks_unavailable.
        for index, agent in enumerate(self.agents):
            check_agent_issuer(agent.issuer, f"agents[{index}].issuer")
            if agent.jwks_uri is not None:
                check_jwks_uri(
                    agent.jwks_uri, self.allow_http_jwks_on_loopback, f"agents[{index}].jwks_uri"
                )
        issuers = [agent.issuer for agent in self.agents]
        if len(set(issuers)) != len(issuers):
            raise ConfigError("agents: each issuer may be listed once")
        if not 0 <= self.clock_skew <= 300:
            raise ConfigError("clock_skew must be between 0 and 300 seconds")
        if not 0 < self.jwks_timeout <= 60:
            raise ConfigError("jwks_timeout must be between 0 and 60 seconds")

    KNOWN_KEYS = frozenset(
        {
            "audience",
            "agents",
            "allow_http_jwks_on_loopback",
            "allowed_jwks_networks",
            "open_mode",
            "protect_prefix",
            "clock_skew",
            "jwks_timeout",
        }
    )

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], *, extra_keys: frozenset[str] = frozenset()
    ) -> Settings:
        """Build from a dict; `extra_keys` are accepted (other parts of pactmw read them)."""
        if not isinstance(data, Mapping):
            raise ConfigError("configuration must be a dict/table")
        refuse_unknown(data, cls.KNOWN_KEYS | extra_keys, "")
        audience = optional_string(data, "audience", "")
        if audience is None:
            raise ConfigError("audience is required (the aud personal agents put in their JWT)")
        agents_data = data.get("agents", [])
        if not isinstance(agents_data, list):
            raise ConfigError("agents must be a list of tables")
        agents = tuple(agent_from_mapping(a, f"agents[{i}].") for i, a in enumerate(agents_data))
        allow_http = _typed(data, "allow_http_jwks_on_loopback", bool, False, "")
        networks = data.get("allowed_jwks_networks", [])
        if not isinstance(networks, list) or not all(isinstance(n, str) for n in networks):
            raise ConfigError("allowed_jwks_networks must be a list of CIDR strings")
        try:
            parsed_networks = parse_networks(networks)
        except MalformedInput as exc:
            raise ConfigError(f"allowed_jwks_networks: {exc.__cause__}") from exc
        prefix = guarded_prefix(
            data.get("protect_prefix", PROVIDER_MOUNT), "protect_prefix", empty_is_none=True
        )
        skew = _typed(data, "clock_skew", float, 30.0, "")
        timeout = _typed(data, "jwks_timeout", float, 5.0, "")
        return cls(
            audience=audience,
            agents=agents,
            allow_http_jwks_on_loopback=allow_http,
            allowed_jwks_networks=parsed_networks,
            open_mode=_typed(data, "open_mode", bool, False, ""),
            protect_prefix=prefix,
            clock_skew=skew,
            jwks_timeout=timeout,
        )

    def fetch_policy(self) -> FetchPolicy:
        """The outbound-fetch policy for JWKS and discovery."""
        return FetchPolicy(
            timeout=self.jwks_timeout,
            allow_http_on_loopback=self.allow_http_jwks_on_loopback,
            allowed_networks=self.allowed_jwks_networks,
        )

    def build_verifier(
        self,
        *,
        overrides: AgentOverrides | None = None,
        runtime: RuntimeAgents | None = None,
        clock: Callable[[], float] | None = None,
        keys: JwksCache | None = None,
    ) -> IdentityVerifier:
        """An `IdentityVerifier` for these settings (one per process; it holds the key cache).

        `overrides` and `runtime` are the store that keeps agent switches and agents added at
        runtime (see `AgentRegistry`); their keys are fetched under `fetch_policy()` too.
        """
        if not self.agents and runtime is None and not self.open_mode:
            # Settings that start and then refuse every caller (401 `unknown_issuer`): said
            # at startup, where the mistake is, not found in the first caller's refusal. A
            # Provider passes its store (`runtime`), where `pactmw agents add` registers them.
            logging.getLogger("pactmw.identity").warning(
                "agents is empty: no personal agent can be verified, every caller is refused "
                "(list the agents in agents, or serve brands, whose store keeps agents "
                "added with `pactmw agents add`)"
            )
        registry = AgentRegistry(self.agents, overrides=overrides, runtime=runtime)
        extra: dict[str, Any] = {} if clock is None else {"clock": clock}
        return IdentityVerifier(
            audience=self.audience,
            registry=registry,
            keys=keys or JwksCache(self.fetch_policy()),
            open_mode=self.open_mode,
            leeway=self.clock_skew,
            **extra,
        )


#: Never in a URL; an issuer holding one would be compared with `iss` as written.
_NOT_IN_A_URL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


def check_agent_issuer(issuer: str, where: str) -> None:
    """Refuse (`ConfigError` naming `where` and showing the value) an agent's issuer no token
    could match: the rule for configured agents (`[[agents]]`, `Settings(agents=...)`) and
    for agents added at runtime (`pactmw agents add`, the Django admin) alike.

    An issuer is an absolute http(s) URL, matched exactly against the `iss` of its tokens
    (PACT §3.1), so nothing is normalised: "pa.example" or a stray space would load, then
    refuse every token as unknown_issuer. `RegisteredAgent` itself does not check it: it is
    also built per request, from a token's `iss` (open mode, blocked issuers) and from stored
    rows, where a refusal would be an error at every request rather than at startup."""
    # Not a str: `Settings(agents=...)` built in code is not type-checked at run time.
    valid = isinstance(issuer, str) and _NOT_IN_A_URL.search(issuer) is None
    if valid:
        try:
            parts = urlsplit(issuer)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:  # a bracketed host that is no IPv6 address ("http://[::1")
            valid = False
    if not valid:
        raise ConfigError(
            f"{where} must be an absolute http(s) URL, exactly as the agent's tokens have it "
            f"in iss (e.g. https://pa.example): {issuer!r}"
        )


def check_jwks_uri(url: str, allow_http_on_loopback: bool, where: str) -> None:
    """Refuse (`ConfigError` naming `where`) a JWKS URL the fetch policy could never fetch:
    the rule for configured agents and for agents added at runtime alike. Which addresses
    may be reached is checked when the keys are fetched (`FetchPolicy`)."""
    if not _fetchable(url, allow_http_on_loopback):
        raise ConfigError(
            f"{where} must be https (http only to 127.0.0.1/::1/"
            "localhost with allow_http_jwks_on_loopback = true)"
        )


def _fetchable(url: str, allow_http_on_loopback: bool) -> bool:
    """Whether the fetch policy could ever fetch `url` (checked at load, not at first use)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # a bracketed host that is no IPv6 address ("https://[::1")
        return False
    if parts.scheme == "https" and parts.hostname:
        return True
    if parts.scheme != "http" or not allow_http_on_loopback or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


def in_protected_path(path: str, prefix: str | None) -> bool:
    """Tell whether the middleware guards `path` under `prefix` (None guards nothing).

    The prefix is a path segment, written with its trailing slash or without: `/api` and
    `/api/` both guard `/api`, `/api/` and `/api/...`, never `/apiary` (a route of its own).
    The prefix's own path is guarded too: frameworks serve `/api` beside `/api/...`
    (FastAPI's `APIRouter(prefix="/api")` with `@router.get("")`), and left out, it would
    answer without a token."""
    if prefix is None:
        return False
    segment = prefix.rstrip("/")  # "" for "/": every path
    return path == segment or path.startswith(segment + "/")


__all__ = [
    "ConfigError",
    "Settings",
    "agent_from_mapping",
    "check_agent_issuer",
    "check_base_url",
    "check_jwks_uri",
    "guarded_prefix",
    "in_protected_path",
    "optional_jwks",
    "optional_string",
    "refuse_unknown",
    "require_verifier",
]
