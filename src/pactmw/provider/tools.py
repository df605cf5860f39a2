"""Account actions for the support bot: scopes, step-up and receipt entries (PACT §5.5-§5.6).

A Brand lists its bot's actions in a `ToolRegistry`, each naming the scope it needs. The bot
calls them through `turn.tools`; a call whose scope the caller has not been granted (or any
account action without a delegation token) stops the turn and becomes a step-up task, and
every call that runs is recorded for the turn's signed receipt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import frozen

from pactmw.core.errors import PactmwError
from pactmw.protocols.delegation import Action, Delegation, args_hash


class StepUpRequired(PactmwError):
    """Raised inside a turn: the caller must approve more scopes first.

    The Provider answers with a `TASK_STATE_AUTH_REQUIRED` task listing `missing_scopes` and a
    fresh consent link; the conversation stays open. `message` is shown to the personal agent.
    """

    def __init__(self, missing_scopes: tuple[str, ...], message: str = "") -> None:
        super().__init__(message or "I need your permission to do that.")
        self.missing_scopes = tuple(dict.fromkeys(missing_scopes))
        self.message = message or (
            "I need your permission to do that: " + ", ".join(self.missing_scopes) + "."
        )


@frozen
class Tool:
    """One account action: `function(account, **args)`; `write` actions get an `argsHash`."""

    name: str
    scope: str
    function: Callable[..., Any]
    write: bool = False


class ToolRegistry:
    """The account actions a Brand's bot may take on behalf of a signed-in user."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(
        self, name: str, function: Callable[..., Any], *, scope: str, write: bool = False
    ) -> None:
        if name in self._tools:
            raise ValueError(f"tool {name!r} is already registered")
        self._tools[name] = Tool(name=name, scope=scope, function=function, write=write)

    def tool(
        self, *, scope: str, write: bool = False, name: str | None = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of `add`; the function's name is the tool's name by default."""

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            self.add(name or function.__name__, function, scope=scope, write=write)
            return function

        return register

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(tool.scope for tool in self._tools.values())


class BoundTools:
    """`turn.tools`: the registry bound to this turn's caller, recording what runs.

    `turn.tools.cancel_order(order="A-1")` runs `cancel_order(account, order="A-1")` when the
    delegation grants the tool's scope, and raises `StepUpRequired` otherwise.
    """

    def __init__(self, registry: ToolRegistry, delegation: Delegation | None) -> None:
        self._registry = registry
        self._delegation = delegation
        self.actions: list[Action] = []
        self.scopes_used: list[str] = []

    def require(self, *scopes: str, message: str = "") -> None:
        """Stop the turn with a step-up unless every scope is granted (an explicit request)."""
        granted = self._delegation.scopes if self._delegation is not None else frozenset()
        missing = tuple(scope for scope in scopes if scope not in granted)
        if missing:
            raise StepUpRequired(missing, message)

    def call(self, name: str, /, **arguments: Any) -> Any:
        """Run tool `name` for the delegated account (see the class docstring)."""
        tool = self._registry[name]
        self.require(tool.scope)
        assert self._delegation is not None  # `require` passed, so there is one
        result = tool.function(self._delegation.account, **arguments)
        self.actions.append(
            Action(tool=name, args_hash=args_hash(arguments) if tool.write else None)
        )
        if tool.scope not in self.scopes_used:
            self.scopes_used.append(tool.scope)
        return result

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in self._registry:
            raise AttributeError(name)
        return lambda **arguments: self.call(name, **arguments)


__all__ = [
    "BoundTools",
    "StepUpRequired",
    "Tool",
    "ToolRegistry",
]
