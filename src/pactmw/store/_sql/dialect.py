"""What the SQL dialects spell differently, and how a statement is built for one.

Statements are written with `?` placeholders and `{...}` fields for what the dialects spell
differently (row locks, the scope column's type, a few literals); `statement_builder` fills
them in once per backend class, when its module is imported, so no operation builds SQL.
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import asdict, frozen

__all__ = ["Builder", "Dialect", "statement_builder"]


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
