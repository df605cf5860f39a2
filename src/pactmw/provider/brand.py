"""Brands and the support-bot hook: what a turn handler receives and may return."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from attrs import Factory, field, frozen

from pactmw.core.encoding import is_scope_token
from pactmw.core.jwk import KeySet
from pactmw.protocols.delegation import Delegation
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.authorization_details import AuthorizationDetailType
from pactmw.provider.consent_pages import ConsentPages
from pactmw.provider.parafe import ParafeConfig, ParafeTurn
from pactmw.provider.tools import ToolRegistry
from pactmw.provider.turn_tools import BoundTools
from pactmw.store.base import MAX_REFRESH_REUSE_INTERVAL, StoredTurn

if TYPE_CHECKING:
    # Only named in an annotation: the Poppy package imports the flow, which imports Brand.
    from pactmw.provider.poppy import PoppyConfig, Proposal


@frozen
class Skill:
    """An Agent Card skill (informational)."""

    id: str
    name: str
    description: str
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()

    def to_card(self) -> dict[str, Any]:
        card: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "tags": list(self.tags),
        }
        if self.examples:
            card["examples"] = list(self.examples)
        return card


@frozen
class Reply:
    """What a handler may return instead of plain text.

    `data` become A2A data parts after the text part; `close` ends the conversation after
    this reply (later messages to it get UNSUPPORTED_OPERATION). `operation` proposes an
    action instead of performing it (Poppy Operations v1, docs/poppy.md): in a Poppy
    conversation with an agent that negotiated it (`turn.supports_operations`) the message
    carries the operation; anywhere else only `text` is sent, so write it to stand alone.
    """

    text: str
    data: tuple[Mapping[str, Any], ...] = ()
    close: bool = False
    operation: Proposal | None = None


@frozen
class Turn:
    """One user message, as the Brand's bot sees it.

    `history` holds the earlier answered turns of this conversation, oldest first.
    `caller` is the verified personal agent; key the user by `caller.actor_id`.
    `parafe` checks Parafé consent for the Brand's actions: `turn.parafe.require("create_order")`
    (see `ParafeTurn`); `turn.parafe.enabled` is False for a Brand without Parafé.
    `tools` runs the Brand's tools for this caller, from Python or for a model (`BoundTools`).
    """

    text: str
    parts: tuple[Mapping[str, Any], ...] = field(repr=False)
    context_id: str
    message_id: str
    caller: PersonalAgent
    brand: Brand
    history: tuple[StoredTurn, ...] = field(repr=False)
    tools: BoundTools = field(repr=False, eq=False)
    parafe: ParafeTurn = field(factory=lambda: ParafeTurn(None), repr=False, eq=False)
    #: Whether a `Reply(operation=...)` reaches the agent as an operation (a Poppy agent
    #: that negotiated Operations v1 with a Brand that sets `poppy.operations`).
    supports_operations: bool = False

    @property
    def delegation(self) -> Delegation | None:
        """The verified delegation of this turn (account, scopes, grant), or None."""
        return self.caller.delegation

    def require_scopes(self, *scopes: str, message: str = "") -> None:
        """Ask for step-up explicitly: stop unless every scope is granted (spec §5.5)."""
        self.tools.require(*scopes, message=message)


HandlerResult = str | Reply
TurnHandler = Callable[[Turn], HandlerResult | Awaitable[HandlerResult]]


LoginMode = Literal["same-app", "brand"]

#: RFC 8628 `expires_in` unless a Brand's delegation sets `device_code_seconds`.
DEFAULT_DEVICE_CODE_SECONDS = 600
#: A user code is short enough to type: the longer it lives, the longer it can be guessed
#: (and a link forwarded to the wrong person stays usable), so an hour at most.
MAX_DEVICE_CODE_SECONDS = 3600


@frozen
class DelegationConfig:
    """A Brand's PACT Delegated profile (spec §5): its scopes and how its users sign in.

    `scopes` maps scope ids to the descriptions shown verbatim on consent, in card order.
    `mode` "same-app": the consent page uses the host app's signed-in user (the adapter tells
    pactmw who that is); a signed-out user is sent to `login_url?next=...` and back.
    `mode` "brand" (spec §5.3, the reference's model): `login_url` is the Brand's login; it
    POSTs a single-use assertion JWT signed by `brand_issuer` (keys at `brand_jwks_uri`, or
    inline `brand_jwks`) to the consent page.
    `authorization_details` are the RFC 9396 types the Brand accepts, each with its scope
    (see `pactmw.provider.authorization_details`); none by default.
    """

    scopes: Mapping[str, str]
    login_url: str
    mode: LoginMode = "same-app"
    brand_issuer: str | None = None
    brand_jwks_uri: str | None = None
    brand_jwks: KeySet | None = None
    interval: int = 5
    #: Seconds a device code (and the user code and link it comes with) lasts: the RFC 8628
    #: `expires_in`, for PACT's device flow and Poppy's Device Sign-In alike.
    device_code_seconds: int = DEFAULT_DEVICE_CODE_SECONDS
    grant_lifetime: float = 30 * 24 * 3600.0
    skip_consent_if_granted: bool = False
    tools: ToolRegistry = field(factory=ToolRegistry)
    pages: ConsentPages = field(factory=ConsentPages)
    authorization_details: tuple[AuthorizationDetailType, ...] = ()
    #: Seconds after a refresh during which presenting its spent refresh token again gets
    #: the same token pair instead of revoking the grant (0 disables; at most 60).
    refresh_reuse_interval: float = 5.0

    def __attrs_post_init__(self) -> None:
        if not self.scopes:
            raise ValueError("delegation needs at least one scope")
        reuse = self.refresh_reuse_interval
        if (
            isinstance(reuse, bool)
            or not isinstance(reuse, (int, float))
            or not 0 <= reuse <= MAX_REFRESH_REUSE_INTERVAL  # NaN fails this too
        ):
            raise ValueError(
                f"refresh_reuse_interval must be a number of seconds from 0 to "
                f"{MAX_REFRESH_REUSE_INTERVAL:g}"
            )
        lifetime = self.device_code_seconds
        if (
            isinstance(lifetime, bool)
            or not isinstance(lifetime, int)
            or not 0 < lifetime <= MAX_DEVICE_CODE_SECONDS
        ):
            raise ValueError(
                f"device_code_seconds must be a whole number of seconds from 1 to "
                f"{MAX_DEVICE_CODE_SECONDS}"
            )
        kinds = [kind.type for kind in self.authorization_details]
        if len(set(kinds)) != len(kinds):
            raise ValueError("authorization_details lists a type twice")
        for kind in self.authorization_details:
            if not isinstance(kind, AuthorizationDetailType):
                raise ValueError("authorization_details must be AuthorizationDetailType values")
            if kind.scope not in self.scopes:
                raise ValueError(
                    f"authorization details type {kind.type!r} names scope {kind.scope!r}, "
                    "which is not one of the Brand's scopes"
                )
        for scope in self.scopes:
            if not is_scope_token(scope):
                raise ValueError(f"scope id {scope!r} is not an RFC 6749 scope token")
        if self.mode == "brand" and (
            not self.brand_issuer or (self.brand_jwks_uri is None) == (self.brand_jwks is None)
        ):
            raise ValueError("brand login needs brand_issuer and one of brand_jwks_uri/brand_jwks")
        unknown = self.tools.scopes - set(self.scopes)
        if unknown:
            raise ValueError(f"tools name scopes not in the Brand's scopes: {sorted(unknown)}")


@frozen
class Brand:
    """A Brand served by the Provider at `{base_url}/a2a/{id}`.

    With `delegation`, the Brand also offers the PACT Delegated profile; with `parafe`, its
    card declares the Parafé A2A extension and its bot may require Parafé consent; with
    `poppy`, it is also a Poppy Company (its grants and bot are the same for both protocols).
    `tools` are the bot's tools (`turn.tools`); account tools among them need `delegation`
    and name its scopes. They default to `delegation.tools`; give them in one place only.
    """

    id: str
    name: str
    handler: TurnHandler = field(repr=False)
    description: str = ""
    skills: tuple[Skill, ...] = ()
    version: str = "0.1.0"
    delegation: DelegationConfig | None = None
    parafe: ParafeConfig | None = None
    tools: ToolRegistry = field(
        default=Factory(lambda self: _delegation_tools(self.delegation), takes_self=True),
        repr=False,
    )
    #: Poppy beside PACT: the Brand also answers personal agents speaking Poppy (docs/poppy.md).
    poppy: PoppyConfig | None = None

    def __attrs_post_init__(self) -> None:
        # The id is one segment of `/a2a/{id}/...` (decoded): with "/" or as "." or "..", no
        # request could reach the Brand; control characters have no place in a URL.
        if (
            not isinstance(self.id, str)
            or self.id in ("", ".", "..")
            or "/" in self.id
            or not self.id.isprintable()
        ):
            raise ValueError(f"a Brand's id must be one URL path segment (got {self.id!r})")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a Brand's name must be a non-empty string")
        if not callable(self.handler):
            raise ValueError(
                f"a Brand's handler must be callable, not {type(self.handler).__name__}"
            )
        delegation = self.delegation
        if delegation is not None and len(delegation.tools) and delegation.tools is not self.tools:
            raise ValueError("give the Brand's tools once: Brand.tools or DelegationConfig.tools")
        account_scopes = self.tools.scopes
        if account_scopes and delegation is None:
            raise ValueError(
                "account tools need the Brand's delegation (they name scopes "
                f"{sorted(account_scopes)}); open the others with identity=True"
            )
        unknown = account_scopes - set(delegation.scopes if delegation is not None else ())
        if unknown:
            raise ValueError(f"tools name scopes not in the Brand's scopes: {sorted(unknown)}")
        accepted = {kind.type for kind in delegation.authorization_details} if delegation else set()
        for tool in self.tools:
            needs = tool.authorization_details
            if needs is not None and needs.type not in accepted:
                raise ValueError(
                    f"tool {tool.name!r} needs authorization details of type {needs.type!r}, "
                    "which the Brand's delegation does not accept"
                )


def _delegation_tools(delegation: DelegationConfig | None) -> ToolRegistry:
    return delegation.tools if delegation is not None else ToolRegistry()


__all__ = [
    "DEFAULT_DEVICE_CODE_SECONDS",
    "MAX_DEVICE_CODE_SECONDS",
    "Brand",
    "DelegationConfig",
    "HandlerResult",
    "LoginMode",
    "Reply",
    "Skill",
    "Turn",
    "TurnHandler",
]
