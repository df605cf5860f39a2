"""`turn.tools`: a Brand's tools bound to one turn's caller, for Python code and for models.

Offering and running are separate checks, as in AuthKit's agent: a model is *offered*
every tool a personal agent may ever reach (identity tools, every account tool even behind
a scope the person has not delegated, and `request_permission` on a delegated Brand), but a
call *runs* only when the delegation covers its scope. A refused call raises
`StepUpRequired`, which the Provider turns into the step-up task: the model asks for a
permission by doing what it would do anyway. A name that is not offered is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

from pactmw.core.encoding import json_dumps, json_loads
from pactmw.core.errors import MalformedInput
from pactmw.protocols.delegation import Action, args_hash
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider._json_schema import validate
from pactmw.provider._tool_formats import ToolFormat, definition, result_message
from pactmw.provider._tool_schema import jsonable_mapping
from pactmw.provider.authorization_details import AuthorizationDetailsMismatch, Requires
from pactmw.provider.tools import (
    REQUEST_PERMISSION,
    StepUpRequired,
    Summary,
    Tool,
    ToolError,
    ToolRegistry,
)


@frozen
class ToolOutcome:
    """The result of one model tool call: `ok` with its `result`, or an `error` and `message`.

    `error` is `unknown_tool`, `invalid_arguments`, or the `code` of the `ToolError` the tool
    raised. `content` is the text to give the model; `tool_message(format, call_id)` wraps it
    in the shape of that model API (see `BoundTools.definitions`).
    """

    tool: str
    ok: bool
    result: Any = None
    error: str | None = None
    message: str = ""

    @property
    def content(self) -> str:
        if not self.ok:
            return f"Error ({self.error}): {self.message}"
        if isinstance(self.result, str):
            return self.result
        return json_dumps(self.result).decode("utf-8")

    def tool_message(self, format: ToolFormat, call_id: str | None = None) -> dict[str, Any]:
        """The result in `format`'s shape; every format but `mcp` needs the call's id."""
        return result_message(
            format,
            content=self.content,
            is_error=not self.ok,
            call_id=call_id,
            structured=self.result,
        )


class BoundTools:
    """`turn.tools`: the Brand's tools for this turn's caller, recording what runs.

    From Python, `turn.tools.cancel_order(order="A-1")` runs `cancel_order(account,
    order="A-1")` when the delegation grants the tool's scope and raises `StepUpRequired`
    otherwise; identity tools run as `function(caller, ...)`. For a model,
    `definitions(format)` lists the offered tools and `run(name, arguments)` runs one call
    with its JSON arguments, checked against the tool's schema first.

    `actions` and `scopes_used` (account tools that ran) go into the receipt; `reports`
    (write tools that ran or failed) become the reply's `{"action": ...}` data parts.

    With `propose_writes` (a Poppy agent that negotiated Operations v1) an account write
    tool is not run: its checked call is kept in `proposed` and answered
    `{"status": "awaiting_confirmation", ...}`; the conversation proposes it as an
    operation, performed when the agent confirms it (OPS-3-03).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        caller: PersonalAgent,
        *,
        scopes: Mapping[str, str] | None = None,
        propose_writes: bool = False,
    ) -> None:
        self._caller = caller
        self._propose_writes = propose_writes
        #: Write tool calls proposed instead of run (tool, arguments), in call order.
        self.proposed: list[tuple[Tool, dict[str, Any]]] = []
        self._delegation = caller.delegation
        offered = {tool.name: tool for tool in registry}
        if scopes:
            offered[REQUEST_PERMISSION] = _request_permission_tool(scopes)
        self._tools = offered
        self.actions: list[Action] = []
        self.scopes_used: list[str] = []
        self.reports: list[dict[str, Any]] = []

    @property
    def offered(self) -> tuple[Tool, ...]:
        """Every tool a model may be offered in this turn, in registration order."""
        return tuple(self._tools.values())

    def definitions(self, format: ToolFormat = "openai") -> list[dict[str, Any]]:
        """The offered tools as `format` tool definitions: `openai` (Chat Completions),
        `openai-responses`, `anthropic` or `mcp`. Fresh JSON each call."""
        return [
            definition(
                format,
                name=tool.name,
                title=tool.title,
                description=tool.description,
                parameters=jsonable_mapping(tool.parameters),
                write=tool.write,
            )
            for tool in self._tools.values()
        ]

    def require_details(self, type: str, **fields: Any) -> None:
        """Refuse (`AuthorizationDetailsMismatch`) unless an approved entry of `type` has
        these members (an array member: one of its items); a grant with no entry of that
        type is left to its scope, as in the reference."""
        needs = Requires(type=type, fields={name: name for name in fields})
        if not needs.permits(self._delegation, fields):
            raise AuthorizationDetailsMismatch("The permission you were given does not cover that.")

    def require(self, *scopes: str, message: str = "") -> None:
        """Stop the turn with a step-up unless every scope is granted (an explicit request)."""
        granted = self._delegation.scopes if self._delegation is not None else frozenset()
        missing = tuple(scope for scope in scopes if scope not in granted)
        if missing:
            raise StepUpRequired(missing, message)

    def call(self, name: str, /, **arguments: Any) -> Any:
        """Run tool `name` from Python (see the class docstring); `KeyError` if unknown."""
        return self._invoke(self._tools[name], arguments)

    def run(
        self, name: str, arguments: str | bytes | Mapping[str, Any] | None = None
    ) -> ToolOutcome:
        """Run one model tool call: `arguments` as the model wrote them (JSON text, or the
        object an API already parsed). A bad call is a `ToolOutcome` error the model can
        read; a call behind a scope not granted raises `StepUpRequired`."""
        tool = self._tools.get(name) if isinstance(name, str) else None
        shown = repr(name)[:80]
        if tool is None:
            offered = ", ".join(self._tools) or "none"
            return _failure(shown, "unknown_tool", f"No tool {shown}; the tools are: {offered}.")
        parsed = _arguments(arguments)
        if isinstance(parsed, str):
            return _failure(name, "invalid_arguments", parsed)
        problem = validate(parsed, tool.parameters, "")
        if problem is not None:
            return _failure(name, "invalid_arguments", _sentence(problem))
        try:
            result = self._invoke(tool, parsed)
        except ToolError as refused:
            return _failure(name, refused.code, refused.message)
        try:
            json_dumps(result)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"tool {name!r} returned a value that is not JSON: {exc}") from exc
        return ToolOutcome(tool=name, ok=True, result=result)

    def _invoke(self, tool: Tool, arguments: Mapping[str, Any]) -> Any:
        if tool.scope is None:
            subject: Any = self._caller
        else:
            self.require(tool.scope)
            assert self._delegation is not None  # `require` passed, so there is one
            subject = self._delegation.account
            needs = tool.authorization_details
            if needs is not None and not needs.permits(self._delegation, arguments):
                refused = AuthorizationDetailsMismatch(
                    f"The permission you were given does not cover this {tool.name} call."
                )
                if tool.write:
                    self.reports.append(
                        _report(tool, "rejected", Summary(tool.title, refused.message))
                    )
                raise refused
            if tool.write and self._propose_writes:
                self.proposed.append((tool, dict(arguments)))
                return {
                    "status": "awaiting_confirmation",
                    "summary": tool_call_summary(tool, arguments),
                    "detail": "Proposed to the person's agent; it runs once they confirm.",
                }
        try:
            result = tool.function(subject, **arguments)
        except ToolError as failed:
            if tool.write:
                self.reports.append(_report(tool, "failed", Summary(tool.title, failed.message)))
            raise
        if tool.scope is not None:
            written = args_hash(arguments) if tool.write else None
            self.actions.append(Action(tool=tool.name, args_hash=written))
            if tool.scope not in self.scopes_used:
                self.scopes_used.append(tool.scope)
        if tool.write:
            self.reports.append(
                _report(tool, "completed", tool.summarize(arguments, result), result)
            )
        return result

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in self._tools:
            raise AttributeError(name)
        return lambda **arguments: self.call(name, **arguments)


def tool_call_summary(tool: Tool, arguments: Mapping[str, Any]) -> str:
    """A write tool call in words, with every argument (OPS-3-01: the summary says all that
    affects the action): `Cancel order: order="A-1"`."""
    if not arguments:
        return tool.title
    shown = ", ".join(f"{name}={json_dumps(value).decode()}" for name, value in arguments.items())
    return f"{tool.title}: {shown}"


def _report(tool: Tool, status: str, summary: Summary, result: Any = None) -> dict[str, Any]:
    """The seed's `{action: {tool, status, summary: {title, detail}, result}}` data part."""
    return {
        "action": {
            "tool": tool.name,
            "status": status,
            "summary": summary.to_dict(),
            "result": result,
        }
    }


def _arguments(arguments: str | bytes | Mapping[str, Any] | None) -> dict[str, Any] | str:
    """The call's arguments as an object, or why they are not one."""
    if arguments is None or arguments in ("", b""):
        return {}
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json_loads(arguments)
        except MalformedInput as exc:
            return f"The arguments are not valid JSON ({exc})."
    if not isinstance(arguments, Mapping):
        return "The arguments must be a JSON object."
    return dict(arguments)


def _failure(tool: str, error: str, message: str) -> ToolOutcome:
    return ToolOutcome(tool=tool, ok=False, error=error, message=message)


def _sentence(problem: str) -> str:
    return problem[:1].upper() + problem[1:] + "."


def _request_permission_tool(scopes: Mapping[str, str]) -> Tool:
    """`request_permission(scopes, reason?)`: a step-up asked for up front (never recorded)."""
    listed = "; ".join(f"{scope}: {text}" for scope, text in scopes.items())

    def request_permission(caller: PersonalAgent, scopes: list[str], reason: str = "") -> Any:
        delegation = caller.delegation
        granted = delegation.scopes if delegation is not None else frozenset()
        missing = tuple(scope for scope in scopes if scope not in granted)
        if missing:
            raise StepUpRequired(missing, reason.strip())
        return {"granted": list(scopes)}

    parameters = {
        "type": "object",
        "properties": {
            "scopes": {
                "type": "array",
                "items": {"type": "string", "enum": list(scopes)},
                "minItems": 1,
                "uniqueItems": True,
                "description": "The permissions to ask for.",
            },
            "reason": {
                "type": "string",
                "maxLength": 500,
                "description": "One sentence for the person: what you will do with them.",
            },
        },
        "required": ["scopes"],
        "additionalProperties": False,
    }
    return Tool(
        name=REQUEST_PERMISSION,
        scope=None,
        function=request_permission,
        description=(
            "Ask the person to approve permissions on their account before acting. Calling "
            "a tool you lack permission for asks too; use this when you know in advance. "
            f"Permissions: {listed}."
        ),
        parameters=parameters,
        title="Request permission",
    )


__all__ = ["BoundTools", "ToolOutcome", "tool_call_summary"]
