"""A small JSON Schema subset: what tool arguments and authorization details are checked with.

Tool arguments a model writes and RFC 9396 authorization details a personal agent sends are
checked against a JSON Schema before anything runs. Only the keywords below are understood;
a schema that uses any other (for example `$ref` or `oneOf`) is refused when it is
registered, so a keyword can never be silently ignored and a check silently skipped.

- every value: `type` (a name or a list of names), `enum`, `const`, `anyOf`;
- strings: `minLength`, `maxLength`, `pattern` (searched, as JSON Schema says);
- numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`;
- arrays: `items`, `minItems`, `maxItems`, `uniqueItems`;
- objects: `properties`, `required`, `additionalProperties` (a boolean or a schema);
- annotations, never checked: `title`, `description`, `default`, `examples`, `format`,
  `$comment`, `deprecated`.

JSON's booleans are not numbers here (Python's `True` is an `int`), and an integer is any
number without a fractional part, as in JSON Schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object", "null"})
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "format", "$comment", "deprecated"}
)
_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "anyOf",
        "pattern",
        "items",
        "uniqueItems",
        "properties",
        "required",
        "additionalProperties",
        *_NUMBER_BOUNDS,
        *_COUNTS,
    }
)


def check_schema(schema: Any, where: str = "schema") -> None:
    """Raise `ValueError` naming `where` unless `schema` uses only the supported subset."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} must be a JSON object (a JSON Schema)")
    unknown = sorted(set(schema) - _KEYWORDS - _ANNOTATIONS)
    if unknown:
        raise ValueError(f"{where} uses {unknown[0]!r}, which pactmw's schema checks do not know")
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        if not isinstance(names, list) or not names or not set(names) <= _TYPES:
            raise ValueError(f"{where}.type must be one of {sorted(_TYPES)} or a list of them")
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        raise ValueError(f"{where}.enum must be a non-empty list")
    for key in _COUNTS:
        if key in schema and not _is_count(schema[key]):
            raise ValueError(f"{where}.{key} must be a non-negative integer")
    for key in _NUMBER_BOUNDS:
        if key in schema and not _is_number(schema[key]):
            raise ValueError(f"{where}.{key} must be a number")
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except (re.error, TypeError) as exc:
            raise ValueError(f"{where}.pattern is not a regular expression: {exc}") from exc
    if "uniqueItems" in schema and not isinstance(schema["uniqueItems"], bool):
        raise ValueError(f"{where}.uniqueItems must be true or false")
    if "anyOf" in schema:
        options = schema["anyOf"]
        if not isinstance(options, list) or not options:
            raise ValueError(f"{where}.anyOf must be a non-empty list of schemas")
        for index, option in enumerate(options):
            check_schema(option, f"{where}.anyOf[{index}]")
    if "items" in schema:
        check_schema(schema["items"], f"{where}.items")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ValueError(f"{where}.properties must be an object of schemas")
    for name, member in properties.items():
        check_schema(member, f"{where}.properties.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise ValueError(f"{where}.required must be a list of property names")
    extra = schema.get("additionalProperties", True)
    if not isinstance(extra, bool):
        check_schema(extra, f"{where}.additionalProperties")


def validate(value: Any, schema: Mapping[str, Any], path: str = "") -> str | None:
    """The first way `value` breaks `schema`, as a sentence naming where; None if it fits.

    `schema` must have passed `check_schema`. `path` prefixes the place named in the answer.
    """
    where = path or "the value"
    if "anyOf" in schema and not any(validate(value, o, path) is None for o in schema["anyOf"]):
        return f"{where} matches none of the allowed shapes"
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, name) for name in names):
            return f"{where} must be {' or '.join(_ARTICLES[name] for name in names)}"
    if "const" in schema and not _same(value, schema["const"]):
        return f"{where} must be {_show(schema['const'])}"
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        return f"{where} must be one of " + ", ".join(_show(option) for option in schema["enum"])
    if isinstance(value, str):
        return _string_problem(value, schema, where)
    if _is_number(value):
        return _number_problem(value, schema, where)
    if isinstance(value, list):
        return _array_problem(value, schema, path, where)
    if isinstance(value, Mapping):
        return _object_problem(value, schema, path, where)
    return None


_ARTICLES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def _string_problem(value: str, schema: Mapping[str, Any], where: str) -> str | None:
    if len(value) < schema.get("minLength", 0):
        return f"{where} must be at least {schema['minLength']} characters long"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return f"{where} must be at most {schema['maxLength']} characters long"
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        return f"{where} must match the pattern {schema['pattern']}"
    return None


def _number_problem(value: float, schema: Mapping[str, Any], where: str) -> str | None:
    if "minimum" in schema and value < schema["minimum"]:
        return f"{where} must be at least {schema['minimum']}"
    if "maximum" in schema and value > schema["maximum"]:
        return f"{where} must be at most {schema['maximum']}"
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        return f"{where} must be more than {schema['exclusiveMinimum']}"
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        return f"{where} must be less than {schema['exclusiveMaximum']}"
    return None


def _array_problem(
    value: Sequence[Any], schema: Mapping[str, Any], path: str, where: str
) -> str | None:
    if len(value) < schema.get("minItems", 0):
        return f"{where} must have at least {schema['minItems']} items"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return f"{where} must have at most {schema['maxItems']} items"
    if schema.get("uniqueItems"):
        seen = [_canonical(item) for item in value]
        if len(set(seen)) != len(seen):
            return f"{where} must not repeat an item"
    if "items" in schema:
        for index, item in enumerate(value):
            problem = validate(item, schema["items"], f"{path or 'the value'}[{index}]")
            if problem is not None:
                return problem
    return None


def _object_problem(
    value: Mapping[str, Any], schema: Mapping[str, Any], path: str, where: str
) -> str | None:
    for name in schema.get("required", []):
        if name not in value:
            return f"{_member(path, name)} is required"
    properties: Mapping[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name, member in value.items():
        if name in properties:
            problem = validate(member, properties[name], _member(path, name))
        elif extra is False:
            problem = f"{_member(path, name)} is not expected"
        elif isinstance(extra, Mapping):
            problem = validate(member, extra, _member(path, name))
        else:
            problem = None
        if problem is not None:
            return problem
    return None


def _member(path: str, name: str) -> str:
    shown = name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name) else json.dumps(name[:64])
    return f"{path}.{shown}" if path else shown


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return _is_number(value) and (isinstance(value, int) or value.is_integer())
    if name == "number":
        return _is_number(value)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, Mapping)
    return value is None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _canonical(value: Any) -> str:
    """One text per JSON value (1 and 1.0 alike, booleans apart from numbers)."""
    return json.dumps(_normal(value), sort_keys=True, default=str)


def _normal(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _normal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normal(item) for item in value]
    return value


def _same(left: Any, right: Any) -> bool:
    return _canonical(left) == _canonical(right)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


__all__ = ["check_schema", "validate"]
