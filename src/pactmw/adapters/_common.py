"""What every adapter does the same way, framework-neutral (no framework is imported here)."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["instance_or_none"]

_T = TypeVar("_T")


def instance_or_none(found: object, kind: type[_T]) -> _T | None:
    """`found` when it is a `kind`, else None: how an adapter reads back what a middleware or
    decorator left on the request (an ASGI scope, a WSGI environ, Flask's `g`), where anything
    else may sit under the same key."""
    return found if isinstance(found, kind) else None
