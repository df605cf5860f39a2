"""Tools and tool results in the function-calling shapes of the common model APIs.

Plain JSON, no SDK: what a bot passes as `tools=` to a model API, and what it sends back
after running a call. The shapes are the public ones:

- `"openai"`: Chat Completions, `{"type": "function", "function": {name, description,
  parameters}}`; a result is a `{"role": "tool", "tool_call_id", "content"}` message;
- `"openai-responses"`: the Responses API, `{"type": "function", name, description,
  parameters}`; a result is a `{"type": "function_call_output", "call_id", "output"}` item;
- `"anthropic"`: Messages, `{name, description, input_schema}`; a result is a
  `{"type": "tool_result", "tool_use_id", "content", "is_error"}` block;
- `"mcp"`: an MCP `Tool` (`name`, `title`, `description`, `inputSchema`, `annotations`); a
  result is a `CallToolResult` (`content`, `isError`, and `structuredContent` for objects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

ToolFormat = Literal["openai", "openai-responses", "anthropic", "mcp"]
TOOL_FORMATS: tuple[str, ...] = get_args(ToolFormat)


def check_format(format: str) -> None:
    if format not in TOOL_FORMATS:
        raise ValueError(f"unknown tool format {format!r}; use one of {', '.join(TOOL_FORMATS)}")


def definition(
    format: str,
    *,
    name: str,
    title: str,
    description: str,
    parameters: Mapping[str, Any],
    write: bool,
) -> dict[str, Any]:
    """One tool definition in `format` (`parameters` is copied in as given)."""
    check_format(format)
    if format == "openai":
        function = {"name": name, "description": description, "parameters": parameters}
        return {"type": "function", "function": function}
    if format == "openai-responses":
        return {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": parameters,
        }
    if format == "anthropic":
        return {"name": name, "description": description, "input_schema": parameters}
    return {
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": parameters,
        "annotations": {"title": title, "readOnlyHint": not write},
    }


def result_message(
    format: str, *, content: str, is_error: bool, call_id: str | None, structured: Any
) -> dict[str, Any]:
    """What to hand back to the model for one call (`call_id`: the API's id of that call)."""
    check_format(format)
    if format == "mcp":
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": content}],
            "isError": is_error,
        }
        if isinstance(structured, Mapping) and not is_error:
            result["structuredContent"] = structured
        return result
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"a {format} tool result needs the call's id")
    if format == "openai":
        return {"role": "tool", "tool_call_id": call_id, "content": content}
    if format == "openai-responses":
        return {"type": "function_call_output", "call_id": call_id, "output": content}
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": content,
        "is_error": is_error,
    }


__all__ = ["TOOL_FORMATS", "ToolFormat", "check_format", "definition", "result_message"]
