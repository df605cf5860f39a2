"""The routes below a Poppy collection (`/{id}` and `/{id}/{action}`), each collection's
operations named by one table of (action, method)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

_Operation = TypeVar("_Operation")


def resource_route(
    method: str, rest: str, actions: Mapping[tuple[str, str], _Operation]
) -> tuple[_Operation, str] | None:
    """The operation `actions` names for `rest` (the path below the collection: `/{id}`,
    whose action is "", or `/{id}/{action}`) and `method`, with the resource's id; None for
    anything else (no id, an action or method the table does not name, a deeper path)."""
    if not rest.startswith("/"):
        return None
    resource_id, _, action = rest.lstrip("/").partition("/")
    operation = actions.get((action, method)) if resource_id else None
    return None if operation is None else (operation, resource_id)


__all__ = [
    "resource_route",
]
