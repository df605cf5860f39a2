"""What the SQL dialects spell differently, and how a statement is built for one; and the
column types each engine's schema uses (`ColumnTypes`, filled into the migrations).

Statements are written with `?` placeholders and `{...}` fields for what the dialects spell
differently (row locks, the scope column's type, a few literals); `statement_builder` fills
them in once per backend class, when its module is imported, so no operation builds SQL.
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import asdict, frozen

__all__ = [
    "POSTGRES_COLUMNS",
    "SQLITE_COLUMNS",
    "Builder",
    "ColumnTypes",
    "Dialect",
    "statement_builder",
]


@frozen
class Dialect:
    """What differs in the SQL text between the backends."""

    placeholder: str  # "?" or "%s"
    lock: str  # appended to a SELECT whose row the transaction decides on
    lock_no_key: str  # the same for a grant row (whose key never changes)
    lock_refresh: str  # the same for the refresh-token row (t) of a token-grant join
    scopes: str  # a scope-list parameter (its cast, where the column needs one)
    no_scopes: str  # the empty scope list, as a literal
    nullable_text: str  # a text parameter compared with IS NULL (typed, where needed)
    collate_c: str  # after grant_id in ORDER BY: compare ids by code point
    true: str
    false: str


#: Turns a statement template into the dialect's SQL text.
Builder = Callable[[str], str]


def statement_builder(dialect: Dialect, **pieces: str) -> Builder:
    """The builder of `dialect`'s statements: its fields, and `pieces` (shared fragments of
    the caller's statements) as further fields; `format` does not nest, so a piece is
    already in the dialect."""
    fields = {**asdict(dialect), **pieces}

    def build(template: str) -> str:
        # `?` and `%` appear in no statement but as the placeholder.
        assert "%" not in template
        return template.format(**fields).replace("?", dialect.placeholder)

    return build


@frozen
class ColumnTypes:
    """How an engine spells what the statements below leave open."""

    real: str  # epoch seconds
    bytes: str  # a stored reply
    flag: str  # a true/false column
    false: str  # its false, as a default
    serial_key: str  # an integer primary key that numbers rows in insertion order
    user_key: str  # before UNIQUE: the name of the (context_id, message_id) constraint
    agent_key: str  # the same for (context_id, reply_message_id)
    user_code_key: str  # the same for the device authorizations' user_code
    scopes: str  # a scope list

    def fill(self, *statements: str, **fields: str) -> tuple[str, ...]:
        """`statements` with these types, and `fields`, in their `{...}` fields (one without
        fields is unchanged)."""
        values = {**asdict(self), **fields}
        return tuple(statement.format(**values) for statement in statements)


SQLITE_COLUMNS = ColumnTypes(
    real="REAL",
    bytes="BLOB",
    flag="INTEGER",
    false="0",
    serial_key="INTEGER PRIMARY KEY",
    user_key="",
    agent_key="",
    user_code_key="",
    scopes="TEXT",  # JSON arrays of strings
)
POSTGRES_COLUMNS = ColumnTypes(
    real="DOUBLE PRECISION",
    bytes="BYTEA",
    flag="BOOLEAN",
    false="FALSE",
    serial_key="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    user_key="CONSTRAINT pactmw_messages_user_key ",
    agent_key="CONSTRAINT pactmw_messages_agent_key ",
    user_code_key="CONSTRAINT pactmw_device_authorizations_user_code ",
    scopes="TEXT[]",
)
