"""State behind the Store protocol: memory, sqlite (the embedded default), PostgreSQL, and
the Django store (a Django site's own database).

Pick a backend with `open_store(url)`; `parse_store_url(url)` reads a URL without opening
anything. The PostgreSQL backend needs the `postgres` extra and is imported only when a
PostgreSQL URL asks for it.

How the package is built: each operation is written once, in its per-concern protocol
(store/_protocols/): the public keyword-only signature, the docstring that says what it
guarantees, and its input checks (NUL refused or found nowhere, scope lists, counters).
The public method then calls the backend's method of the same name with a leading
underscore (`claim_turn` -> `_claim_turn`), declared below the public ones with what it
must do, with inputs it may trust. `MemoryStore` (store/_memory/) and `SqlStore`
(store/_sql/, one SQL implementation) subclass the protocols explicitly and implement only
those; what the backends decide alike lives in store/_decisions.py as pure functions. The
SQL backends share everything but their connections: `SqliteFlavour` and `PostgresFlavour`
(store/_sql/flavours.py) hold each engine's dialect, capabilities and locks,
store/_sql/migrations.py the schema; `SqliteStore`, `PostgresStore` and `DjangoStore` add
connection setup, pragmas or the pool, and how driver errors become `StoreError`s.

Writing a backend of your own: subclass `Store` explicitly (and `AuthorizationDetailsStore`,
`RateLimitStore`, `GrantUsageStore` for the optional operations), your classes first among
the bases so that your methods win over the declarations. You inherit the public
operations with their checks; implement each `_` method they call (the per-concern
protocols list them with what each guarantees, atomicity included) and `close`. mypy
refuses to make an instance of a class that leaves one out. Prove it with the contract
suites in tests/store/, which run unchanged on every backend.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from attrs import frozen

from pactmw.store._protocols.details import AuthorizationDetailsStore
from pactmw.store._protocols.ratelimits import RateLimitStore
from pactmw.store._protocols.usage import GrantUsageStore
from pactmw.store.base import (
    AgentExists,
    Approval,
    Claim,
    ClaimKind,
    Cleanup,
    Conversation,
    DeviceAuthorization,
    DeviceStatus,
    Grant,
    NotFound,
    Poll,
    PollKind,
    Rotation,
    RotationKind,
    Store,
    StoredAgent,
    StoredTurn,
    StoreError,
    StoreUnavailable,
    UserCodeTaken,
)
from pactmw.store.memory import MemoryStore
from pactmw.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pactmw.store.django import DjangoStore
    from pactmw.store.postgres import PostgresStore

__all__ = [
    "AgentExists",
    "Approval",
    "AuthorizationDetailsStore",
    "Claim",
    "ClaimKind",
    "Cleanup",
    "Conversation",
    "DeviceAuthorization",
    "DeviceStatus",
    "DjangoStore",
    "Grant",
    "GrantUsageStore",
    "MemoryStore",
    "NotFound",
    "Poll",
    "PollKind",
    "PostgresStore",
    "RateLimitStore",
    "Rotation",
    "RotationKind",
    "SqliteStore",
    "Store",
    "StoreError",
    "StoreURL",
    "StoreUnavailable",
    "StoredAgent",
    "StoredTurn",
    "UserCodeTaken",
    "open_store",
    "parse_store_url",
]

_SQLITE_PREFIX = "sqlite:///"


def __getattr__(name: str) -> object:
    # PostgresStore is exported, but importing it needs psycopg: defer until asked for.
    if name == "PostgresStore":
        from pactmw.store.postgres import PostgresStore

        return PostgresStore
    if name == "DjangoStore":  # needs Django
        from pactmw.store.django import DjangoStore

        return DjangoStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@frozen
class StoreURL:
    """What a store URL names: the `backend` (`memory`, `sqlite`, `postgresql` or `django`),
    for sqlite the database `path` as written (relative to the working directory unless
    absolute), for django the `alias` of the Django database. Nothing else of the URL is kept:
    a PostgreSQL URL may hold a password."""

    backend: str
    path: str | None = None
    alias: str | None = None

    @property
    def label(self) -> str:
        """Where the store lives, fit for a log line: `sqlite /absolute/path.db`, `memory`
        or `postgresql`."""
        if self.path is not None:
            return f"{self.backend} {os.path.abspath(self.path)}"
        if self.alias is not None:
            return f"django database {self.alias}"
        return self.backend


def parse_store_url(url: str) -> StoreURL:
    """Read a store URL as `open_store` does, opening nothing; ValueError for a URL it would
    refuse (the message never repeats the URL)."""
    if url == "django" or (url.startswith("django:") and "://" not in url):
        alias = url.partition(":")[2] if ":" in url else "default"
        if not alias or not alias.isidentifier():
            raise ValueError(
                "django store must be 'django' or 'django:ALIAS', "
                "ALIAS an entry of settings.DATABASES"
            )
        return StoreURL("django", alias=alias)
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise ValueError(
            "store URL must look like memory://, sqlite:///path.db, postgresql://... "
            "or django[:ALIAS]"
        )
    if scheme == "memory":
        if rest:
            raise ValueError("memory:// store URL takes nothing after the scheme")
        return StoreURL("memory")
    if scheme == "sqlite":
        if not url.lower().startswith(_SQLITE_PREFIX):
            raise ValueError(
                "sqlite store URL needs three slashes: sqlite:///relative/path.db "
                "or sqlite:////absolute/path.db"
            )
        path = url[len(_SQLITE_PREFIX) :]
        if not path or path.endswith("/") or "?" in path or path == ":memory:":
            raise ValueError(
                "sqlite store URL must name a database file, e.g. sqlite:///var/pactmw.db "
                "(use memory:// for an in-memory store)"
            )
        return StoreURL("sqlite", path)
    if scheme in ("postgresql", "postgres"):
        return StoreURL("postgresql")
    raise ValueError(
        f"unsupported store URL scheme {scheme!r}: "
        "expected memory://, sqlite:///path.db or postgresql://..."
    )


def open_store(url: str) -> Store:
    """Open the store a URL names.

    Accepted: `memory://`; `sqlite:///relative/path.db` (relative to the working directory)
    or `sqlite:////absolute/path.db`; `postgresql://...` or `postgres://...` (a libpq URL,
    needs the `postgres` extra, else `MissingExtra`, an ImportError); `django` or
    `django:ALIAS` (the Django project's own database, see `pactmw.store.django`). Any other
    URL raises ValueError, whose message never repeats the URL (it may hold a password). PostgreSQL
    connects lazily: an unreachable server shows up as `StoreUnavailable` on the first
    operation.
    """
    parsed = parse_store_url(url)
    if parsed.backend == "memory":
        return MemoryStore()
    if parsed.alias is not None:
        return _open_django_store(parsed.alias)
    if parsed.path is not None:
        return SqliteStore(parsed.path)
    from importlib.util import find_spec

    from pactmw.core.errors import MissingExtra

    if find_spec("psycopg") is None:
        raise MissingExtra("a PostgreSQL store", "psycopg", "postgres")
    from pactmw.store.postgres import PostgresStore

    return PostgresStore(url)


def _open_django_store(alias: str) -> Store:
    from importlib.util import find_spec

    from pactmw.core.errors import MissingExtra

    if find_spec("django") is None:
        raise MissingExtra("a Django store", "Django", "django")
    from pactmw.store.django import open_django_store

    return open_django_store(alias)
