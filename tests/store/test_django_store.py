"""What only the Django store does: run on Django's connection, report Django's database
errors as `StoreError`s, and refuse a setup it cannot work with in words naming the setting.
(The store contract suites run on it as the django-sqlite and django-postgres backends.)"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.store import StoreError, StoreUnavailable, open_store
from tests.store.support import Backend, open_backend
from tests.support.servers import REPO

T0 = 1_700_000_000.0

_TRIGGERS = {
    "sqlite": (
        "CREATE TRIGGER pactmw_test_refuse BEFORE INSERT ON pactmw_conversations"
        " BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END",
    ),
    "postgresql": (
        "CREATE FUNCTION pactmw_test_refuse() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$",
        "CREATE TRIGGER pactmw_test_refuse BEFORE INSERT ON pactmw_conversations"
        " FOR EACH ROW EXECUTE FUNCTION pactmw_test_refuse()",
    ),
}


@pytest.fixture(params=["django-sqlite", "django-postgres"])
def django_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from open_backend(request.param, request, tmp_path)


def test_a_refused_write_is_a_store_error_and_rolled_back(django_backend: Backend) -> None:
    from django.db import connections

    alias = django_backend.url.partition(":")[2]
    store = django_backend.open()
    try:
        store.set_agent_enabled("https://pa.example", True)
        connection = connections[alias]
        with connection.cursor() as cursor:
            for statement in _TRIGGERS[connection.vendor]:
                cursor.execute(statement)
        with pytest.raises(StoreError, match="refused by a trigger") as info:
            store.create_conversation(brand_id="acme", issuer="i", sub="s", now=T0)
        assert not isinstance(info.value, StoreUnavailable)
        assert info.value.__cause__ is None  # Django's exception is summarised, not chained
        # Rolled back, and the connection still works.
        assert store.agent_enabled("https://pa.example") is True
        store.set_agent_enabled("https://pa.example", False)
        assert store.agent_enabled("https://pa.example") is False
    finally:
        store.close()


def test_an_operation_inside_the_sites_transaction_rolls_back_with_it(
    django_backend: Backend,
) -> None:
    from django.db import transaction

    alias = django_backend.url.partition(":")[2]
    store = django_backend.open()
    try:

        def failing_view() -> None:
            with transaction.atomic(using=alias):
                store.set_agent_enabled("https://pa.example", False)
                assert store.agent_enabled("https://pa.example") is False
                raise RuntimeError("the view failed")

        with pytest.raises(RuntimeError, match="the view failed"):
            failing_view()
        assert store.agent_enabled("https://pa.example") is None
    finally:
        store.close()


def test_without_django_settings_the_store_says_so(tmp_path: Path) -> None:
    script = (
        "from pactmw.store import open_store, StoreError\n"
        "try:\n"
        "    open_store('django')\n"
        "except StoreError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "configure Django settings (DJANGO_SETTINGS_MODULE)" in done.stdout


def test_an_unknown_alias_names_the_setting() -> None:
    from tests.store.support import configure_django

    configure_django()
    with pytest.raises(StoreError, match=r"'nowhere', which is not in settings\.DATABASES"):
        open_store("django:nowhere")


def test_a_dropped_connection_is_unavailable_once_then_reconnects(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import psycopg
    from django.db import connections

    backends = open_backend("django-postgres", request, tmp_path)
    backend = next(backends)
    alias = backend.url.partition(":")[2]
    store = backend.open()
    try:
        store.set_agent_enabled("https://pa.example", False)
        connection = connections[alias]
        pid = connection.connection.info.backend_pid
        server = request.getfixturevalue("postgres_server")
        with psycopg.connect(server.dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreUnavailable, match="is unavailable"):
            store.agent_enabled("https://pa.example")
        # The dead connection was closed: the next operation reconnects and sees the data.
        assert store.agent_enabled("https://pa.example") is False
    finally:
        store.close()
        backends.close()


def test_a_connection_django_refuses_to_close_is_a_store_error(
    django_backend: Backend,
) -> None:
    """Django refuses to close a connection made in another thread (a `django.db` error):
    `close` reports it as a `StoreError`, and the store refuses later operations anyway."""
    import threading

    from django.db import connections

    alias = django_backend.url.partition(":")[2]
    store = django_backend.open()
    store.set_agent_enabled("https://pa.example", True)  # this thread's connection opens
    main_connection = connections[alias]
    raised: list[BaseException] = []

    def close_from_another_thread() -> None:
        # What a site that hands its connection to a worker thread ends up with.
        connections[alias] = main_connection
        try:
            store.close()
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=close_from_another_thread)
    worker.start()
    worker.join(timeout=30)
    try:
        (error,) = raised
        assert type(error) is StoreError, repr(error)
        assert "can only be used in that same thread" in str(error)
        assert error.__cause__ is None
        with pytest.raises(StoreUnavailable, match="is closed"):
            store.agent_enabled("https://pa.example")
    finally:
        main_connection.close()


def test_a_store_whose_alias_left_the_settings_says_so_and_closes_quietly(
    django_backend: Backend,
) -> None:
    """A `DATABASES` entry removed while the store is open (a test's settings override, a
    reloaded configuration): an operation is a `StoreError` naming the setting, not Django's
    `ConnectionDoesNotExist`; `close` has no connection of this thread to close, so it does
    nothing (as Django's own `connections.close_all()` skips the alias), and the store is
    closed."""
    from django.db import connections

    alias = django_backend.url.partition(":")[2]
    store = django_backend.open()
    store.set_agent_enabled("https://pa.example", True)
    entry = connections.settings[alias]
    connections[alias].close()
    del connections[alias]
    del connections.settings[alias]
    try:
        with pytest.raises(StoreError, match=rf"'{alias}'.* not in settings\.DATABASES") as info:
            store.agent_enabled("https://pa.example")
        assert type(info.value) is StoreError
        assert info.value.__cause__ is None
        store.close()
        with pytest.raises(StoreUnavailable, match="is closed"):
            store.agent_enabled("https://pa.example")
    finally:
        connections.settings[alias] = entry  # for the fixture's own cleanup
