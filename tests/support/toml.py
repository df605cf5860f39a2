"""Writing the TOML configuration files the tests hand to `pactmw serve` and the examples."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["toml_value"]


def toml_value(value: Any) -> str:
    """A TOML value for str, bool, int, float, lists (arrays) and mappings (inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string: the escapes agree
    if isinstance(value, Mapping):
        members = ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + members + " }"
    if isinstance(value, Sequence):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {type(value).__name__}")
