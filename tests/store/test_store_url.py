"""`parse_store_url`: what a store URL names, read without opening anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from pactmw.store import StoreURL, open_store, parse_store_url


def test_memory() -> None:
    assert parse_store_url("memory://") == StoreURL("memory")
    assert parse_store_url("MEMORY://").label == "memory"


def test_sqlite_paths_relative_and_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = parse_store_url("sqlite:///state/pactmw.db")
    assert relative == StoreURL("sqlite", "state/pactmw.db")
    assert relative.label == f"sqlite {tmp_path / 'state' / 'pactmw.db'}"
    absolute = parse_store_url(f"sqlite:///{tmp_path}/abs.db")  # four slashes
    assert absolute.path == f"{tmp_path}/abs.db"
    assert not (tmp_path / "state").exists()  # nothing was opened or created


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "PostgreSQL"])
def test_postgres_keeps_nothing_of_the_url(scheme: str) -> None:
    parsed = parse_store_url(f"{scheme}://pactmw:s3cr3t-pw@db.example:5432/pactmw")
    assert parsed == StoreURL("postgresql")
    assert parsed.label == "postgresql"
    assert "s3cr3t-pw" not in repr(parsed)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "memory",
        "memory://extra",
        "sqlite://relative.db",
        "sqlite:///",
        "sqlite:///dir/",
        "sqlite:///x.db?mode=ro",
        "sqlite:///:memory:",
        "mysql://user:hunter2@db/x",
    ],
)
def test_refused_as_open_store_refuses(url: str) -> None:
    with pytest.raises(ValueError) as parsing:
        parse_store_url(url)
    with pytest.raises(ValueError) as opening:
        open_store(url)
    assert str(parsing.value) == str(opening.value)
    assert "hunter2" not in str(parsing.value)


def test_django_names_the_database_alias() -> None:
    assert parse_store_url("django") == StoreURL("django", alias="default")
    assert parse_store_url("django:replica") == StoreURL("django", alias="replica")
    assert parse_store_url("django:replica").label == "django database replica"


@pytest.mark.parametrize("url", ["django:", "django:two words", "django:a-b"])
def test_django_without_a_usable_alias_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="django:ALIAS"):
        parse_store_url(url)
