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

Decisions come from store/_decisions.py, input checks from store/base.py: each operation
checks its inputs here, once for both SQL backends.
"""

from __future__ import annotations

from pactmw.store._sql.account_tokens import AccountTokensMixin, AccountTokenStatements
from pactmw.store._sql.agents import AgentsMixin
from pactmw.store._sql.conversations import ConversationsMixin
from pactmw.store._sql.core import Executor, Rows, SqlCore
from pactmw.store._sql.details import DetailsMixin
from pactmw.store._sql.devices import DevicesMixin
from pactmw.store._sql.operations import OperationsMixin, OperationStatements
from pactmw.store._sql.ratelimits import RateLimitsMixin
from pactmw.store._sql.retention import RetentionMixin
from pactmw.store._sql.sessions import SessionsMixin, SessionStatements
from pactmw.store._sql.statements import Dialect, Statements
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
    DetailsMixin,
    AgentsMixin,
    RateLimitsMixin,
    RetentionMixin,
    SessionsMixin,
    AccountTokensMixin,
    OperationsMixin,
):
    """Every `Store` operation in SQL; a backend subclass supplies the `SqlCore` hooks
    (and `_session_sql`, `_account_sql` for the Poppy statements beside `_sql`)."""

    #: Its operations wait on the database: async drivers run them in worker threads.
    may_block = True
