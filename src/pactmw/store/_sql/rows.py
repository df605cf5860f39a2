"""Stored values as rows: one reader per value instead of a hand-written mapper each.

A value's row holds its attrs fields as columns, in field order (a join may add further
columns after them). Each column reads by its field's type: numbers through `float`, `int`
or `bool` (drivers may hand back another numeric type), optional ones keeping None, byte
strings as `bytes`, and scope lists through the dialect's decoder; text and literals as
they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs
from attrs import AttrsInstance, frozen

from pactmw.store.base import Conversation, DeviceAuthorization, Grant

__all__ = [
    "CONVERSATION_ROW",
    "DEVICE_ROW",
    "GRANT_ROW",
    "RowReader",
    "ScopeDecoder",
    "opt_bytes",
    "opt_float",
]

T = TypeVar("T", bound=AttrsInstance)

#: How a dialect reads a scope-list column.
ScopeDecoder = Callable[[Any], tuple[str, ...]]


def opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def opt_bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


_CONVERSIONS: tuple[tuple[object, Callable[[Any], Any]], ...] = (
    (float, float),
    (int, int),
    (bool, bool),
    (bytes, bytes),
    (float | None, opt_float),
    (int | None, _opt_int),
    (bytes | None, opt_bytes),
)
# A scope-list column: its decoder is the dialect's, known only when a row is read.
_SCOPES = tuple[str, ...]


def _conversion(field_type: object) -> Callable[[Any], Any] | None:
    # None: the column is read as it is (text, optional text, a literal's text).
    return next((read for kind, read in _CONVERSIONS if kind == field_type), None)


@frozen
class RowReader(Generic[T]):
    """Reads `kind` (an attrs class) from rows whose first columns are its fields, in order."""

    kind: type[T]
    _reads: tuple[Callable[[Any], Any] | None, ...]
    _scope_columns: tuple[int, ...]

    @classmethod
    def of(cls, kind: type[T]) -> RowReader[T]:
        types = [field.type for field in attrs.fields(attrs.resolve_types(kind))]
        scope_columns = tuple(i for i, field_type in enumerate(types) if field_type == _SCOPES)
        return cls(kind, tuple(_conversion(field_type) for field_type in types), scope_columns)

    def columns(self, **renamed: str) -> str:
        """The column list of a SELECT that this reader reads (`renamed`: field -> column)."""
        names = (field.name for field in attrs.fields(self.kind))
        return ", ".join(renamed.get(name, name) for name in names)

    def read(self, row: Sequence[Any], decode_scopes: ScopeDecoder | None = None) -> T:
        """The value in `row`; `decode_scopes` is needed when the value holds a scope list."""
        # One pass with no call for text columns: as fast as a hand-written mapper.
        # `strict=False`: a join may add columns after the value's.
        reads = zip(self._reads, row, strict=False)
        values = [value if read is None else read(value) for read, value in reads]
        for column in self._scope_columns:
            assert decode_scopes is not None
            values[column] = decode_scopes(values[column])
        return self.kind(*values)


CONVERSATION_ROW = RowReader.of(Conversation)
DEVICE_ROW = RowReader.of(DeviceAuthorization)
GRANT_ROW = RowReader.of(Grant)
