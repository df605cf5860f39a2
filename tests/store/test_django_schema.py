"""The Django store's tables, as Django's migrations create them, are the SQL store's tables.

The one SQL implementation runs on both, so every table, column, key and index the sqlite
and PostgreSQL stores create must come out of `manage.py migrate` too, and the models must
match the migrations (`makemigrations --check`). When this fails after a store migration was
appended (store/sqlite.py, store/postgres.py `MIGRATIONS`), append a Django migration to
src/pactmw/adapters/django/migrations/ with the same change: the message names the table
and column that differ.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from pactmw.store import PostgresStore, SqliteStore, StoreError, open_store
from tests.store.support import (
    configure_django,
    django_database,
    forget_django_database,
    postgres_settings,
)
from tests.support.pg import PostgresServer

# What Django's schema may have that the stores' own schemas do not, and why.
# Django (before 5.2) wants a one-column primary key: these tables get a surrogate `id`, and
# their composite primary key becomes a unique constraint on the same columns.
SURROGATE_ID = {"pactmw_used_values", "pactmw_authorization_details"}
# The stores' own bookkeeping (their schema version); Django keeps django_migrations instead.
STORE_ONLY = {"pactmw_schema"}

# table -> column -> (type, not null, part of the primary key)
Columns = dict[str, dict[str, tuple[str, bool, bool]]]
# table -> (unique?, partial?, columns) of every key and index
Keys = dict[str, set[tuple[bool, bool, tuple[str, ...]]]]


def _sqlite_type(declared: str) -> str:
    # sqlite compares by type affinity (its rules 1-5); Django's `bool` has NUMERIC affinity
    # and holds the same 0/1 integers as the stores' INTEGER columns.
    upper = declared.upper()
    if "INT" in upper or upper in ("BOOL", "NUMERIC"):
        return "INTEGER"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if not upper or "BLOB" in upper:
        return "BLOB"
    if any(word in upper for word in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def _sqlite_schema(path: Path) -> tuple[Columns, Keys]:
    columns: Columns = {}
    keys: Keys = {}
    with sqlite3.connect(path) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'pactmw%'"
            )
        ]
        for table in tables:
            info = conn.execute(f"PRAGMA table_info({table})").fetchall()
            columns[table] = {
                name: (_sqlite_type(kind), bool(notnull) or pk > 0, pk > 0)
                for _, name, kind, notnull, _, pk in info
            }
            pk_columns = tuple(row[1] for row in sorted(info, key=lambda r: r[5]) if row[5])
            found = {(True, False, pk_columns)} if pk_columns else set()
            for _, index, unique, origin, partial in conn.execute(
                f"PRAGMA index_list({table})"
            ).fetchall():
                if origin == "pk":
                    continue
                indexed = tuple(
                    row[2] for row in conn.execute(f"PRAGMA index_info({index})").fetchall()
                )
                found.add((bool(unique), bool(partial), indexed))
            keys[table] = found
    return columns, keys


def _postgres_schema(dsn: str) -> tuple[Columns, Keys]:
    columns: Columns = {}
    keys: Keys = {}
    with psycopg.connect(dsn) as conn:
        for table, name, kind, nullable in conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable"
            " FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name LIKE 'pactmw%'"
        ):
            columns.setdefault(table, {})[name] = (kind, nullable == "NO", False)
        rows = conn.execute(
            "SELECT t.relname, i.indisunique, i.indisprimary, i.indpred IS NOT NULL,"
            " ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY k(n, o)"
            "       JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n ORDER BY k.o),"
            " pg_get_indexdef(i.indexrelid)"
            " FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid"
            " JOIN pg_namespace s ON s.oid = t.relnamespace"
            " WHERE s.nspname = 'public' AND t.relname LIKE 'pactmw%'"
        ).fetchall()
    for table, unique, primary, partial, indexed, definition in rows:
        if "_pattern_ops" in definition:
            # Django adds a LIKE index beside every text key on PostgreSQL; the store never
            # runs LIKE, so the extra index only costs a little on writes.
            continue
        keys.setdefault(table, set()).add((bool(unique), bool(partial), tuple(indexed)))
        if primary:
            for column in indexed:
                kind, notnull, _ = columns[table][column]
                columns[table][column] = (kind, notnull, True)
    return columns, keys


def _allow_django_extras(columns: Columns, keys: Keys) -> tuple[Columns, Keys]:
    """Django's schema without the differences listed above, and with a composite unique
    key counted as the primary key it stands for."""
    columns = {table: dict(cols) for table, cols in columns.items() if table in columns}
    keys = {table: set(found) for table, found in keys.items()}
    for table in SURROGATE_ID & columns.keys():
        del columns[table]["id"]
        keys[table].discard((True, False, ("id",)))
        composite = {k for k in keys[table] if k[0] and not k[1] and len(k[2]) > 1}
        for _, _, indexed in composite:
            for column in indexed:
                kind, notnull, _ = columns[table][column]
                columns[table][column] = (kind, notnull, True)
    return columns, keys


def _differences(
    store: tuple[Columns, Keys], django: tuple[Columns, Keys], where: str
) -> list[str]:
    store_columns, store_keys = store
    django_columns, django_keys = _allow_django_extras(*django)
    problems: list[str] = []
    for table in sorted(store_columns.keys() - STORE_ONLY - django_columns.keys()):
        problems.append(f"{where}: table {table} has no Django model/migration")
    for table in sorted(django_columns.keys() - store_columns.keys()):
        problems.append(f"{where}: table {table} exists only in the Django migrations")
    for table in sorted(store_columns.keys() & django_columns.keys()):
        ours, theirs = store_columns[table], django_columns[table]
        for column in sorted(ours.keys() - theirs.keys()):
            problems.append(f"{where}: column {table}.{column} is missing from the Django model")
        for column in sorted(theirs.keys() - ours.keys()):
            problems.append(f"{where}: column {table}.{column} exists only in the Django model")
        for column in sorted(ours.keys() & theirs.keys()):
            if ours[column] != theirs[column]:
                problems.append(
                    f"{where}: column {table}.{column} is (type, not null, primary key) "
                    f"{ours[column]} in the store but {theirs[column]} from Django"
                )
        missing = store_keys.get(table, set()) - django_keys.get(table, set())
        extra = django_keys.get(table, set()) - store_keys.get(table, set())
        for unique, partial, indexed in sorted(missing):
            kind = ("partial " if partial else "") + ("unique key" if unique else "index")
            problems.append(f"{where}: {kind} {table}({', '.join(indexed)}) missing in Django")
        for unique, partial, indexed in sorted(extra):
            kind = ("partial " if partial else "") + ("unique key" if unique else "index")
            problems.append(f"{where}: {kind} {table}({', '.join(indexed)}) only in Django")
    return problems


def test_django_migrations_make_the_sqlite_stores_schema(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "store.db").close()
    django_database(
        "pactmw_schema_sqlite",
        {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(tmp_path / "django.db"),
        },
    )
    forget_django_database("pactmw_schema_sqlite")
    problems = _differences(
        _sqlite_schema(tmp_path / "store.db"), _sqlite_schema(tmp_path / "django.db"), "sqlite"
    )
    assert problems == [], "\n".join(problems)


def test_django_migrations_make_the_postgres_stores_schema(
    postgres_server: PostgresServer,
) -> None:
    store_dsn = postgres_server.create_database()
    django_dsn = postgres_server.create_database()
    try:
        store = PostgresStore(store_dsn)
        store.list_agents()  # the first operation creates the schema
        store.close()
        django_database("pactmw_schema_pg", postgres_settings(django_dsn))
        forget_django_database("pactmw_schema_pg")
        problems = _differences(
            _postgres_schema(store_dsn), _postgres_schema(django_dsn), "PostgreSQL"
        )
        assert problems == [], "\n".join(problems)
    finally:
        for dsn in (store_dsn, django_dsn):
            postgres_server.drop_database(dsn.rsplit("/", 1)[1])


def test_the_models_match_the_migrations() -> None:
    from django.core.management import call_command

    configure_django()
    # Exits with status 1 (SystemExit) when a model change has no migration.
    call_command("makemigrations", "pactmw", check=True, dry_run=True, verbosity=0)


def test_an_unmigrated_database_says_to_migrate(tmp_path: Path) -> None:
    from django.db import connections

    configure_django()
    alias = "pactmw_unmigrated"
    connections.settings[alias] = connections.configure_settings(
        {
            "default": connections.settings["default"],
            alias: {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "x.db")},
        }
    )[alias]
    store = open_store(f"django:{alias}")
    try:
        with pytest.raises(StoreError, match=r"manage\.py migrate pactmw --database " + alias):
            store.list_agents()
    finally:
        store.close()
        forget_django_database(alias)
