"""`ColumnTypes.fill` (store/_sql/dialect.py): an engine's column types put into the schema
statements, as every migration of the SQL stores is written."""

from __future__ import annotations

from pactmw.store._sql.dialect import POSTGRES_COLUMNS, SQLITE_COLUMNS


def test_fill_puts_each_engines_types_into_every_statement() -> None:
    statements = ("CREATE TABLE t (at {real} NOT NULL, scopes {scopes})", "ALTER TABLE t {flag}")
    assert SQLITE_COLUMNS.fill(*statements) == (
        "CREATE TABLE t (at REAL NOT NULL, scopes TEXT)",
        "ALTER TABLE t INTEGER",
    )
    assert POSTGRES_COLUMNS.fill(*statements) == (
        "CREATE TABLE t (at DOUBLE PRECISION NOT NULL, scopes TEXT[])",
        "ALTER TABLE t BOOLEAN",
    )


def test_a_statement_without_fields_is_left_as_written() -> None:
    index = "CREATE INDEX t_at ON t (at)"
    assert SQLITE_COLUMNS.fill(index) == (index,)
    assert SQLITE_COLUMNS.fill() == ()


def test_named_fields_are_filled_beside_the_types() -> None:
    # The device table is written once, for its first name and, in sqlite's version 10, its
    # rebuilt copy.
    table = "CREATE TABLE {table} (pa_sub {pa_sub}, at {real})"
    assert SQLITE_COLUMNS.fill(table, "CREATE INDEX i ON t (at)", table="d", pa_sub="TEXT") == (
        "CREATE TABLE d (pa_sub TEXT, at REAL)",
        "CREATE INDEX i ON t (at)",
    )
