"""The Django Store: pactmw's state in the site's own database, through Django's connection.

`store = "django"` (the `default` database) or `"django:ALIAS"` (another entry of
`DATABASES`). The tables come from the Django app `pactmw.adapters.django` and its
migrations (`manage.py migrate`), with the names and columns of the sqlite and PostgreSQL
stores, so the one SQL implementation (store/_sql) runs unchanged on Django's connection for
the alias, in the dialect of its vendor:

- PostgreSQL: each operation runs in `transaction.atomic(using=alias)` and locks the rows it
  decides on (`SELECT ... FOR UPDATE`) exactly as `PostgresStore` does; upserts of a grant key
  take the same advisory lock. Needs the `postgres` extra (psycopg 3), as Django 4.2+ can use.
- sqlite: sqlite has no row locks. Each write transaction starts with a write that matches
  nothing, which takes the database's one write lock up front as `BEGIN IMMEDIATE` does, so
  two decisions never interleave, across threads and processes. Limits: one writer at a time
  for the whole database (the site's own writes included); a writer waits for the lock up to
  the connection's timeout (Python's 5 s unless `OPTIONS["timeout"]` says otherwise), then the
  operation fails with `StoreUnavailable`; without WAL (Django's default journal) readers
  also wait while a writer commits. Fine for one machine and modest traffic; use PostgreSQL
  beyond that.

Django's connections are per thread, as for any ORM query: each thread runs the store on its
own connection. Called inside the site's own `transaction.atomic()`, an operation becomes a
savepoint of that transaction and commits (or rolls back) with it. Driver errors surface as
`StoreUnavailable` (connection problems, a read-only database) or `StoreError`, never with
the password.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from attrs import evolve
from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db import utils as db_utils

from pactmw.store._sql import Executor, Rows, SqlStore
from pactmw.store._sql.flavours import SQLITE_DIALECT, PostgresFlavour, SqliteFlavour
from pactmw.store.base import StoreError, StoreUnavailable

#: The Django app whose migrations make the store's tables.
_APP = "pactmw.adapters.django"

__all__ = ["DjangoStore", "open_django_store"]

# A write that never matches (issuer is a NOT NULL primary key) but still takes sqlite's write
# lock, so a deferred BEGIN behaves as BEGIN IMMEDIATE: no decision reads before it holds the
# lock, and two writers never deadlock upgrading read locks.
_SQLITE_TAKE_WRITE_LOCK = "DELETE FROM pactmw_agent_overrides WHERE issuer IS NULL"


class _Executor:
    """Runs statements on a Django cursor; every statement answers with the cursor itself
    (psycopg2's `execute` returns None, which the SQL store's `Executor` does not allow)."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, query: str, params: Sequence[Any] = (), /) -> Rows:
        self._cursor.execute(query, params)
        return self._cursor  # type: ignore[no-any-return]


class DjangoStore(SqlStore):
    """A Store on a Django database connection; see the module docstring.

    Open it with `open_django_store(alias)`, which picks the dialect of the alias's vendor.
    Nothing connects until the first operation. The schema is Django's business
    (`manage.py migrate`): a database without the tables fails its first operation with a
    `StoreUnavailable` (a server's 503) that says to migrate.
    """

    _vendor: ClassVar[str]

    def __init__(self, alias: str = DEFAULT_DB_ALIAS) -> None:
        self._alias = alias
        self._closed = False
        self._ops = itertools.count()  # paces the opportunistic purge; see _maybe_purge

    @property
    def alias(self) -> str:
        """The `DATABASES` entry the store runs on."""
        return self._alias

    def _describe(self) -> str:
        return f"Django database {self._alias!r} ({self._vendor})"

    def _scrub(self, text: str) -> str:
        # .get: an alias removed from the settings has no password left to hide.
        password = str(connections.settings.get(self._alias, {}).get("PASSWORD") or "")
        message = " ".join(text.split())
        return message.replace(password, "***") if password else message

    def _take_write_lock(self, ex: Executor) -> None:
        """Take the lock a write transaction needs before it reads; nothing where rows lock."""

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Executor]:
        if self._closed:
            raise StoreUnavailable(f"the store on {self._describe()} is closed")
        try:
            connection = connections[self._alias]
        except connections.exception_class:  # ConnectionDoesNotExist: the alias left DATABASES
            raise self._alias_gone() from None
        try:
            with transaction.atomic(using=self._alias), connection.cursor() as cursor:
                ex = _Executor(cursor)
                if write:
                    self._take_write_lock(ex)
                yield ex
        except (db_utils.OperationalError, db_utils.InterfaceError) as exc:
            if _missing_table(exc):
                raise self._unmigrated() from None
            if not connection.in_atomic_block and not connection.is_usable():
                # A connection the server dropped: the thread's next operation reconnects
                # (outside requests, nothing else would close it).
                connection.close()
            raise self._unavailable(exc) from None
        except db_utils.ProgrammingError as exc:
            if _missing_table(exc):
                raise self._unmigrated() from None
            raise self._failed(exc) from None
        except db_utils.Error as exc:  # a constraint broken, bad data: the store's own fault
            if self._refuses_for_now(exc):  # unless the database refuses for now
                raise self._unavailable(exc) from None
            raise self._failed(exc) from None

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        return StoreUnavailable(
            self._scrub(f"{self._describe()} is unavailable: {self._driver_message(exc)}")
        )

    def _failed(self, exc: BaseException) -> StoreError:
        return StoreError(self._scrub(f"{self._describe()}: {self._driver_message(exc)}"))

    def _alias_gone(self) -> StoreError:
        return StoreError(
            f"the store runs on Django database {self._alias!r}, which is not in "
            f"settings.DATABASES any more ({', '.join(sorted(connections.settings))})"
        )

    def _unmigrated(self) -> StoreUnavailable:
        # Unavailable, not broken: `manage.py migrate` makes it work without a restart, so
        # a request meanwhile is "try again later" (503), as during an outage, never a 500.
        migrate = f"`manage.py migrate pactmw --database {self._alias}`"
        if apps.is_installed(_APP):  # then migrating is all it lacks; the other step misleads
            return StoreUnavailable(f"{self._describe()} has no pactmw tables: run {migrate}")
        return StoreUnavailable(
            f"{self._describe()} has no pactmw tables: add {_APP!r} to INSTALLED_APPS and "
            f"run {migrate}"
        )

    def _read(self) -> contextlib.AbstractContextManager[Executor]:
        return self._transaction(write=False)

    def _write(self) -> contextlib.AbstractContextManager[Executor]:
        return self._transaction(write=True)

    def close(self) -> None:
        """Refuse later operations (`StoreUnavailable`) and close this thread's connection
        unless it is inside a transaction; Django owns the connections of other threads.
        Django's refusal to close (a connection of another thread, a driver error) is a
        `StoreError`, as every other failure of the store is; the store is closed anyway.
        An alias removed from `DATABASES` leaves this thread nothing to close: that is no
        error, as Django's own `connections.close_all()` passes over it."""
        self._closed = True
        try:
            connection = connections[self._alias]
        except connections.exception_class:
            # ConnectionDoesNotExist, which Django raises only when the alias left DATABASES
            # and this thread holds no connection to it.
            return
        if connection.in_atomic_block:
            return
        try:
            connection.close()
        except db_utils.Error as exc:
            raise StoreError(
                self._scrub(
                    f"{self._describe()}: the connection did not close: {self._driver_message(exc)}"
                )
            ) from None


def _missing_table(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "no such table: pactmw_" in text or (
        "relation" in text and "pactmw_" in text and "does not exist" in text
    )


class _SqliteDjangoStore(SqliteFlavour, DjangoStore):
    _vendor = "sqlite"
    # sqlite's statements with Django's `%s` placeholders, which Django's sqlite cursor turns
    # into `?`: with DEBUG on, Django formats each query with `%` to log it, and a `?`
    # statement with parameters would fail there.
    _dialect = evolve(SQLITE_DIALECT, placeholder="%s")

    def _take_write_lock(self, ex: Executor) -> None:
        ex.execute(_SQLITE_TAKE_WRITE_LOCK)


class _PostgresDjangoStore(PostgresFlavour, DjangoStore):
    # The statements, and the very advisory lock per grant key, of PostgresStore, so both may
    # share one database.
    _vendor = "postgresql"


def open_django_store(alias: str = DEFAULT_DB_ALIAS) -> DjangoStore:
    """The store on Django database `alias`, in its vendor's dialect.

    Needs configured Django settings. Raises `StoreError` naming the setting when `alias` is
    not in `DATABASES` or its vendor is neither sqlite nor PostgreSQL; `MissingExtra` when a
    PostgreSQL database lacks psycopg 3.
    """
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        settings.DATABASES  # noqa: B018 (loads DJANGO_SETTINGS_MODULE, or says it is unset)
    except ImproperlyConfigured:
        raise StoreError(
            "store = 'django' runs on a Django project's database: configure Django settings "
            "(DJANGO_SETTINGS_MODULE) first"
        ) from None
    if alias not in connections.settings:
        raise StoreError(
            f"PACTMW['store'] names Django database {alias!r}, "
            f"which is not in settings.DATABASES ({', '.join(sorted(connections.settings))})"
        )
    vendor = connections[alias].vendor
    if vendor == "sqlite":
        return _SqliteDjangoStore(alias)
    if vendor == "postgresql":
        from importlib.util import find_spec

        from pactmw.core.errors import MissingExtra

        if find_spec("psycopg") is None:
            raise MissingExtra("a Django PostgreSQL store", "psycopg", "postgres")
        return _PostgresDjangoStore(alias)
    raise StoreError(
        f"PACTMW['store'] = 'django:{alias}' needs a sqlite or PostgreSQL database; "
        f"settings.DATABASES[{alias!r}] is {vendor}"
    )
