"""A Brand's Poppy settings (`[brands.ID.poppy]`): what it publishes and whom it admits.

A Brand that sets `poppy` answers personal agents speaking Poppy draft 0.2 beside PACT
(docs/poppy.md). Its issuer is `{base_url}/a2a/{brand}/poppy`, one per Brand (PAP-3.2-07/08);
its `poppy.json` is served on `domain` (and every one of `domains`), never redirected to
(PAP-3.1-02).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal

from attrs import field, frozen

from pactmw.protocols.poppy import ApiDescriptor
from pactmw.provider.poppy._operation_values import OperationsConfig

#: Session Tokens last hours, not days (PAP-4.2-04); the SDK's default is one hour.
DEFAULT_SESSION_SECONDS = 3600.0
MAX_SESSION_SECONDS = 24 * 3600.0

AgentsPolicy = Literal["any"] | tuple[str, ...]


def _agents(value: str | tuple[str, ...] | list[str]) -> AgentsPolicy:
    if value == "any":
        return "any"
    if isinstance(value, str):
        raise ValueError('agents must be "any" or a list of client_id URLs')
    return tuple(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _apis(value: Iterable[ApiDescriptor]) -> tuple[ApiDescriptor, ...]:
    return tuple(value)


def _frozen_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


@frozen
class PoppyConfig:
    """One Brand's Poppy company settings.

    - `domain`: the organization's domain, the host whose `/.well-known/poppy.json` names
      this Brand (PAP-3.1-02); `domains` every host that serves it (default: `domain`);
    - `agents`: `"any"` admits every personal agent whose client metadata verifies (the SDK's
      default), or the `client_id` URLs admitted; others are `invalid_client`;
    - `session_seconds`: how long a Session Token lasts (at most a day, PAP-4.2-04);
    - `apis`: the app's own APIs listed in `poppy.json` (§6);
    - `custom_scopes`: scope -> description, listed in `auth.custom_scopes`;
    - `operations`: Operations v1 (its executors), listed in poppy.json when set.
    """

    domain: str
    agents: AgentsPolicy = field(converter=_agents)
    domains: tuple[str, ...] = field(default=(), converter=_strings)
    session_seconds: float = DEFAULT_SESSION_SECONDS
    apis: tuple[ApiDescriptor, ...] = field(default=(), converter=_apis)
    custom_scopes: Mapping[str, str] = field(factory=dict, converter=_frozen_map)
    operations: OperationsConfig | None = None

    def __attrs_post_init__(self) -> None:
        if isinstance(self.agents, tuple) and not self.agents:
            raise ValueError('agents must name at least one client_id (or be "any")')
        if isinstance(self.agents, tuple) and not all(
            isinstance(a, str) and a.startswith("https://") for a in self.agents
        ):
            raise ValueError("agents must be https client_id URLs")
        if (
            isinstance(self.session_seconds, bool)
            or not isinstance(self.session_seconds, (int, float))
            # At least a second: a token's lifetime is whole seconds (expires_in), so less
            # would start every Session expired.
            or not 1 <= self.session_seconds <= MAX_SESSION_SECONDS
        ):
            raise ValueError(
                f"session_seconds must be a number of seconds in [1, {MAX_SESSION_SECONDS:g}]"
            )

    def admits(self, client_id: str) -> bool:
        """Whether this Brand accepts the personal agent `client_id`."""
        return self.agents == "any" or client_id in self.agents


__all__ = ["DEFAULT_SESSION_SECONDS", "MAX_SESSION_SECONDS", "AgentsPolicy", "PoppyConfig"]
