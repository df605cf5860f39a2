"""The support bot's tools: scopes, step-up, receipts, and what a model is offered (§5.5-§5.6).

A Brand lists its bot's tools in a `ToolRegistry`. An **account tool** names the scope it
needs and runs as the signed-in user (`function(account, **arguments)`); an **identity
tool** (`identity=True`) is open to any verified personal agent, with or without a
delegation (`function(caller, **arguments)`, `caller` being the `PersonalAgent`). A tool
that names neither is refused when it is registered: a tool is never reachable by an
outside caller by accident.

Each tool has a description and a JSON Schema of its arguments (read from the function's
type hints, or given), so a language model can be offered them (see `BoundTools`). A call
whose scope the caller has not been granted (or any account tool without a delegation
token) stops the turn and becomes the step-up task; account tools that run are recorded
for the turn's signed receipt, and write tools are reported in the reply as A2A data parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from attrs import Factory, field, frozen

from pactmw.core.errors import PactmwError
from pactmw.provider._json_schema import check_schema
from pactmw.provider._tool_schema import describe, humanize, jsonable_mapping, schema_from_hints

if TYPE_CHECKING:  # authorization_details imports ToolError from here
    from pactmw.provider.authorization_details import Requires

#: What the model APIs accept as a function name (OpenAI's and Anthropic's common rule).
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The built-in tool a delegated Brand offers so a model can ask for scopes up front.
REQUEST_PERMISSION = "request_permission"


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


class ToolError(PactmwError):
    """Raised by a tool that cannot do what it was asked, with a message the model may read.

    Raise it only when nothing was changed. Run by a model (`BoundTools.run`) it becomes a
    tool error the model reads (and a write tool's action is reported as `failed`); called
    from Python it propagates to the bot like any exception. `code` is a stable word.
    """

    code = "tool_failed"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


@frozen
class Summary:
    """What an action did, in the words the Brand would show the person (`title`, `detail`)."""

    title: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"title": self.title, "detail": self.detail}


SummaryFunction = Callable[[Mapping[str, Any], Any], "Summary | str"]


@frozen
class Tool:
    """One tool: `scope` None means an identity tool (any personal agent may run it).

    `parameters` is the JSON Schema (an object) of its arguments; `write` tools get an
    `argsHash` in receipts and an action data part in the reply; `summary(arguments,
    result)` words that data part (default: the title, and the result when it is text).
    `authorization_details` binds the tool to approved RFC 9396 entries (see `Requires`).
    """

    name: str
    scope: str | None
    function: Callable[..., Any] = field(repr=False)
    write: bool = False
    description: str = ""
    parameters: Mapping[str, Any] = field(
        factory=lambda: {"type": "object", "properties": {}}, repr=False
    )
    title: str = field(default=Factory(lambda self: humanize(self.name), takes_self=True))
    summary: SummaryFunction | None = field(default=None, repr=False)
    authorization_details: Requires | None = None

    @property
    def identity(self) -> bool:
        """True for an identity tool: no delegation needed."""
        return self.scope is None

    def summarize(self, arguments: Mapping[str, Any], result: Any) -> Summary:
        """The action's summary for its data part."""
        if self.summary is None:
            return Summary(title=self.title, detail=result if isinstance(result, str) else "")
        worded = self.summary(arguments, result)
        return worded if isinstance(worded, Summary) else Summary(self.title, str(worded))


class ToolRegistry:
    """The tools a Brand's bot may run for personal agents (account and identity tools)."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(
        self,
        name: str,
        function: Callable[..., Any],
        *,
        scope: str | None = None,
        identity: bool = False,
        write: bool = False,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        title: str | None = None,
        summary: SummaryFunction | None = None,
        authorization_details: Requires | None = None,
    ) -> Tool:
        """Register a tool; exactly one of `scope` (an account tool) or `identity=True`.

        `description` defaults to the docstring's first paragraph, `parameters` to the
        schema of the type hints after the first parameter (see `pactmw.provider.tools`).
        Raises `ValueError` naming the tool when something cannot be offered to a model.
        """
        if name in self._tools:
            raise ValueError(f"tool {name!r} is already registered")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
        if name == REQUEST_PERMISSION:
            raise ValueError(f"tool name {name!r} is pactmw's built-in step-up request")
        if (scope is None) != identity:
            raise ValueError(
                f"tool {name!r} needs a scope (an account tool) or identity=True (open to "
                "any personal agent), not both"
                if identity
                else f"tool {name!r} needs a scope, or identity=True to open it to any "
                "personal agent"
            )
        if scope is not None and (not isinstance(scope, str) or not scope):
            raise ValueError(f"tool {name!r}: scope must be a non-empty string")
        if parameters is None:
            schema = schema_from_hints(function, name)
        else:
            check_schema(parameters, f"tool {name!r} parameters")
            if parameters.get("type") != "object":
                raise ValueError(f"tool {name!r} parameters must be a schema of type object")
            schema = jsonable_mapping(parameters)
        if authorization_details is not None:
            if scope is None:
                raise ValueError(f"tool {name!r}: authorization details bind account tools only")
            unknown = set(authorization_details.fields.values()) - set(schema["properties"])
            if unknown:
                raise ValueError(f"tool {name!r} has no arguments {sorted(unknown)}")
        tool = Tool(
            name=name,
            scope=scope,
            function=function,
            write=write,
            description=describe(function) if description is None else description,
            parameters=schema,
            title=title or humanize(name),
            summary=summary,
            authorization_details=authorization_details,
        )
        self._tools[name] = tool
        return tool

    def tool(
        self,
        *,
        scope: str | None = None,
        identity: bool = False,
        write: bool = False,
        name: str | None = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        title: str | None = None,
        summary: SummaryFunction | None = None,
        authorization_details: Requires | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of `add`; the function's name is the tool's name by default."""

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            self.add(
                name or function.__name__,
                function,
                scope=scope,
                identity=identity,
                write=write,
                description=description,
                parameters=parameters,
                title=title,
                summary=summary,
                authorization_details=authorization_details,
            )
            return function

        return register

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(tuple(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def scopes(self) -> frozenset[str]:
        """The scopes the account tools name."""
        return frozenset(tool.scope for tool in self._tools.values() if tool.scope is not None)


__all__ = [
    "REQUEST_PERMISSION",
    "StepUpRequired",
    "Summary",
    "SummaryFunction",
    "Tool",
    "ToolError",
    "ToolRegistry",
]
