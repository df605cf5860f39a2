"""Input checks every backend applies alike (re-exported by store/base.py)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["has_nul", "reject_nul", "scope_tuple"]


def reject_nul(**values: str) -> None:
    """Raise ValueError if a string to be stored holds a NUL character.

    PostgreSQL text cannot hold NUL, and ids come from clients (JSON allows "\\u0000"), so
    every backend refuses them the same way instead of failing deep in a driver.
    """
    for name, value in values.items():
        if "\x00" in value:
            raise ValueError(f"{name} must not contain NUL characters")


def has_nul(*values: str) -> bool:
    """Tell whether any of the strings holds NUL (so a lookup by it can find nothing)."""
    # One join, not a generator: every lookup calls this, and a generator costs twice as much.
    return "\x00" in "".join(values)


def scope_tuple(name: str, scopes: Iterable[str]) -> tuple[str, ...]:
    """Return `scopes` as a tuple of strings, kept in order; refuse a bare string and NUL.

    A bare string is refused (TypeError) because `tuple("read")` would store four scopes.
    """
    if isinstance(scopes, str):
        raise TypeError(f"{name} must be a sequence of scope strings, not a string")
    result = tuple(scopes)
    for scope in result:
        if not isinstance(scope, str):
            raise TypeError(f"{name} must hold strings, got {type(scope).__name__}")
        if "\x00" in scope:
            raise ValueError(f"{name} must not contain NUL characters")
    return result
