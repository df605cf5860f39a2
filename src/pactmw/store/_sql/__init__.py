"""One implementation of the Store operations for the SQL backends (sqlite, PostgreSQL).

The operations live in per-concern mixins over `SqlCore`'s dialect hooks; a backend module
keeps only its connection handling, schema and migrations, and fills in the hooks:

- `_read()` / `_write()`: how a transaction starts and which locks it takes (sqlite's
  `BEGIN IMMEDIATE`, a pooled PostgreSQL transaction), and the translation of driver
  errors to `StoreUnavailable` / `StoreError`;
- `_sql` and `_session_sql`: the `Statements` and `SessionStatements` built for its
  `Dialect` (placeholders, `FOR UPDATE` suffixes, scope-column casts);
- `_encode_scopes` / `_decode_scopes`, `_lock_grant_key`, and the `_returning` and
  `_locks_rows` capabilities.

The public operations, with their input checks, come from the contracts (store/_protocols/);
the mixins implement the `_` methods they call. Decisions come from store/_decisions.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pactmw.store._protocols import AllOperations
from pactmw.store._sql.account_tokens import AccountTokensMixin, AccountTokenStatements
from pactmw.store._sql.agents import AgentsMixin
from pactmw.store._sql.conversations import ConversationsMixin
from pactmw.store._sql.core import Executor, Rows, SqlCore
from pactmw.store._sql.details import DetailsMixin
from pactmw.store._sql.devices import DevicesMixin
from pactmw.store._sql.dialect import Dialect
from pactmw.store._sql.operations import OperationsMixin, OperationStatements
from pactmw.store._sql.ratelimits import RateLimitsMixin
from pactmw.store._sql.retention import RetentionMixin
from pactmw.store._sql.sessions import SessionsMixin, SessionStatements
from pactmw.store._sql.statements import Statements
from pactmw.store._sql.tokens import TokensMixin

__all__ = [
    "AccountTokenStatements",
    "Dialect",
    "Executor",
    "OperationStatements",
    "Rows",
    "SessionStatements",
    "SqlCore",
    "SqlStore",
    "Statements",
]


class SqlStore(
    ConversationsMixin,
    DevicesMixin,
    TokensMixin,
    AgentsMixin,
    DetailsMixin,
    RateLimitsMixin,
    RetentionMixin,
    AccountTokensMixin,
    SessionsMixin,
    OperationsMixin,
    AllOperations,
):
    """Every `Store` operation in SQL; a backend subclass supplies the `SqlCore` hooks,
    mostly through its flavour (store/_sql/flavours.py)."""

    #: Its operations wait on the database: async drivers run them in worker threads.
    may_block = True

    #: The dialect of the class's statements; set by a flavour, or a backend (its placeholder).
    _dialect: ClassVar[Dialect]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A class that sets its dialect gets its statements, built once, here.
        if "_dialect" in vars(cls):
            cls._sql = Statements(cls._dialect)
            cls._session_sql = SessionStatements(cls._dialect)
            cls._account_sql = AccountTokenStatements(cls._dialect)
            cls._operation_sql = OperationStatements(cls._dialect)
