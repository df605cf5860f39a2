"""A tool's argument schema, read from its function's type hints.

The first parameter is who the tool acts for (the account, or the calling personal agent)
and is never an argument. Every other parameter must be passable by keyword; its hint gives
its JSON Schema: `str`, `int`, `float`, `bool`, `Literal[...]`, `Optional[X]` / `X | None`,
`list[X]`, `dict[str, X]`, a `TypedDict`, and `Annotated[X, "a description"]`. A parameter
without a hint (or `Any`) takes any JSON value; a parameter with a default is optional;
`**kwargs` lets the model send members the schema does not name. Any other hint is refused
with the tool's and the parameter's name: give that tool its schema explicitly.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

_PLAIN: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}
_JSON_SCALARS = (str, int, float, bool, type(None))


def schema_from_hints(function: Callable[..., Any], tool: str) -> dict[str, Any]:
    """The JSON Schema (an object) of `function`'s arguments after the first parameter."""
    try:
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ValueError(f"tool {tool!r}: cannot read its parameters ({exc})") from exc
    parameters = list(signature.parameters.values())
    if not parameters or parameters[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise ValueError(
            f"tool {tool!r}: its first parameter must take the account (or, for an identity "
            "tool, the calling personal agent)"
        )
    properties: dict[str, Any] = {}
    required: list[str] = []
    open_ended = False
    for parameter in parameters[1:]:
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            open_ended = True
            continue
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL):
            raise ValueError(
                f"tool {tool!r}: parameter {parameter.name!r} cannot be passed by name"
            )
        where = f"tool {tool!r}, parameter {parameter.name!r}"
        schema = _schema(hints.get(parameter.name, Any), where)
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
        elif isinstance(parameter.default, _JSON_SCALARS):
            schema = {**schema, "default": parameter.default}
        properties[parameter.name] = schema
    schema_object: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema_object["required"] = required
    schema_object["additionalProperties"] = open_ended
    return schema_object


def _schema(hint: Any, where: str) -> dict[str, Any]:
    if hint is Any:
        return {}
    if hint in _PLAIN:
        return dict(_PLAIN[hint])
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        described = _schema(arguments[0], where)
        notes = [note for note in arguments[1:] if isinstance(note, str)]
        return {**described, "description": " ".join(notes)} if notes else described
    if origin is Literal:
        return _literal(arguments, where)
    if origin is Union or origin is types.UnionType:
        return _union(arguments, where)
    if origin is list:
        return {"type": "array", "items": _schema(arguments[0], where) if arguments else {}}
    if origin is dict:
        if arguments and arguments[0] is not str:
            raise ValueError(f"{where}: JSON objects have string keys only")
        values = _schema(arguments[1], where) if arguments else {}
        return {"type": "object", "additionalProperties": values}
    if hint in (list, dict):
        return {"type": "array" if hint is list else "object"}
    if typing.is_typeddict(hint):
        return _typed_dict(hint, where)
    raise ValueError(f"{where}: no JSON Schema for {hint!r}; give the tool `parameters=`")


def _literal(options: tuple[Any, ...], where: str) -> dict[str, Any]:
    if not all(isinstance(option, _JSON_SCALARS) for option in options):
        raise ValueError(f"{where}: Literal values must be strings, numbers, booleans or None")
    kinds = {type(option) for option in options}
    schema: dict[str, Any] = {"enum": list(options)}
    if len(kinds) == 1:
        schema = {**_PLAIN[kinds.pop()], **schema}
    return schema


def _union(members: tuple[Any, ...], where: str) -> dict[str, Any]:
    schemas = [_schema(member, where) for member in members]
    if all(set(schema) == {"type"} for schema in schemas):
        return {"type": [schema["type"] for schema in schemas]}
    return {"anyOf": schemas}


def _typed_dict(hint: Any, where: str) -> dict[str, Any]:
    fields = typing.get_type_hints(hint, include_extras=True)
    required_keys: frozenset[str] = hint.__required_keys__
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            name: _schema(_strip_required(field), f"{where}, member {name!r}")
            for name, field in fields.items()
        },
    }
    # The markers decide when they can be read (under `from __future__ import annotations`
    # the class itself cannot see them, and counts a `NotRequired` member as required).
    required = [
        name
        for name, field in fields.items()
        if _marker(field) == "Required" or (name in required_keys and not _marker(field))
    ]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


#: `typing.Required` and `NotRequired` (Python 3.11+; 3.10 has neither).
_REQUIRED_MARKERS = tuple(
    marker
    for marker in (getattr(typing, "Required", None), getattr(typing, "NotRequired", None))
    if marker is not None
)


def _marker(hint: Any) -> str:
    """ "Required", "NotRequired", or "" for a TypedDict member's hint."""
    origin = typing.get_origin(hint)
    return getattr(origin, "_name", "") if origin in _REQUIRED_MARKERS else ""


def _strip_required(hint: Any) -> Any:
    """`Required[X]` and `NotRequired[X]` mean X here (the keys already say which is which)."""
    if typing.get_origin(hint) in _REQUIRED_MARKERS:
        return typing.get_args(hint)[0]
    return hint


def describe(function: Callable[..., Any]) -> str:
    """A tool's default description: the first paragraph of its function's docstring."""
    doc = inspect.getdoc(function) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def humanize(name: str) -> str:
    """`cancel_order` -> `Cancel order`: a tool's default title."""
    words = name.replace("-", " ").replace("_", " ").split()
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def jsonable_mapping(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON-like mapping (so a caller can never change a registered schema)."""
    return {key: _copy(item) for key, item in value.items()}


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return jsonable_mapping(value)
    if isinstance(value, (list, tuple)):
        return [_copy(item) for item in value]
    return value


__all__ = ["describe", "humanize", "jsonable_mapping", "schema_from_hints"]
