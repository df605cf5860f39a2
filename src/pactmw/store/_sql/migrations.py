"""The schema of the sqlite and PostgreSQL stores, written once: each migration with the
column types of the engine it runs on.

Each entry of a `*_MIGRATIONS` is one schema version: the statements that bring version N-1
to N. Append new steps; never edit a released one, since databases in the field already ran
it. The Django store's tables come from the Django app's migrations, with the same names and
columns.
"""

from __future__ import annotations

from pactmw.store._sql import account_tokens, operations, sessions
from pactmw.store._sql.dialect import POSTGRES_COLUMNS, SQLITE_COLUMNS, ColumnTypes

__all__ = [
    "MESSAGE_IDS_BACKFILL",
    "POSTGRES_MIGRATIONS",
    "SQLITE_MIGRATIONS",
    "schema_migrations",
]


# Version 2's table, and sqlite's rebuild of it in version 10 (`pa_sub` may be NULL).
_DEVICE_TABLE = """
        CREATE TABLE {table} (
            device_code_hash TEXT PRIMARY KEY,
            user_code TEXT NOT NULL {user_code_key}UNIQUE,
            brand_id TEXT NOT NULL,
            client_id TEXT NOT NULL,
            pa_sub {pa_sub},
            scopes {scopes} NOT NULL,
            created_at {real} NOT NULL,
            expires_at {real} NOT NULL,
            interval_seconds {real} NOT NULL,
            last_polled_at {real},
            status TEXT NOT NULL
                CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
            account TEXT,
            granted_scopes {scopes} NOT NULL,
            grant_id TEXT REFERENCES pactmw_grants (grant_id)
        )
        """
_DEVICE_EXPIRES_INDEX = """
        CREATE INDEX pactmw_device_authorizations_expires
            ON pactmw_device_authorizations (expires_at)
        """


def schema_migrations(
    types: ColumnTypes, version_6: tuple[str, ...], version_10: tuple[str, ...]
) -> tuple[tuple[str, ...], ...]:
    """Every schema version in `types`; versions 6 (the Poppy tables, written beside their
    statements) and 10 (which the engines take differently) as given."""
    return (
        types.fill(
            """
        CREATE TABLE pactmw_conversations (
            context_id TEXT PRIMARY KEY,
            brand_id TEXT NOT NULL,
            issuer TEXT NOT NULL,
            sub TEXT NOT NULL,
            created_at {real} NOT NULL,
            last_activity {real} NOT NULL,
            closed {flag} NOT NULL DEFAULT {false},
            account TEXT
        )
        """,
            # One row per user message; the reply columns stay NULL while the turn is claimed.
            # The two unique constraints are the idempotency invariants (NULLs never collide).
            """
        CREATE TABLE pactmw_messages (
            id {serial_key},
            context_id TEXT NOT NULL
                REFERENCES pactmw_conversations (context_id) ON DELETE CASCADE,
            message_id TEXT NOT NULL,
            text TEXT NOT NULL,
            claimed_at {real} NOT NULL,
            reply_message_id TEXT,
            reply_text TEXT,
            reply {bytes},
            replied_at {real},
            {user_key}UNIQUE (context_id, message_id),
            {agent_key}UNIQUE (context_id, reply_message_id)
        )
        """,
            """
        CREATE TABLE pactmw_agent_overrides (
            issuer TEXT PRIMARY KEY,
            enabled {flag} NOT NULL
        )
        """,
        ),
        # Version 2: the PACT Delegated profile.
        types.fill(
            """
        CREATE TABLE pactmw_grants (
            grant_id TEXT PRIMARY KEY,
            brand_id TEXT NOT NULL,
            account TEXT NOT NULL,
            client_id TEXT NOT NULL,
            pa_sub TEXT NOT NULL,
            scopes {scopes} NOT NULL,
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL,
            expires_at {real} NOT NULL,
            revoked_at {real}
        )
        """,
            # One unrevoked grant per key: the invariant behind upsert_grant, kept by the database.
            """
        CREATE UNIQUE INDEX pactmw_grants_one_live
            ON pactmw_grants (brand_id, account, client_id, pa_sub) WHERE revoked_at IS NULL
        """,
            "CREATE INDEX pactmw_grants_account ON pactmw_grants (account, brand_id)",
            _DEVICE_TABLE,
            _DEVICE_EXPIRES_INDEX,
            """
        CREATE TABLE pactmw_refresh_tokens (
            token_hash TEXT PRIMARY KEY,
            grant_id TEXT NOT NULL REFERENCES pactmw_grants (grant_id),
            client_id TEXT NOT NULL,
            brand_id TEXT NOT NULL,
            created_at {real} NOT NULL,
            expires_at {real} NOT NULL,
            used_at {real}
        )
        """,
            "CREATE INDEX pactmw_refresh_tokens_grant ON pactmw_refresh_tokens (grant_id)",
            "CREATE INDEX pactmw_refresh_tokens_expires ON pactmw_refresh_tokens (expires_at)",
            """
        CREATE TABLE pactmw_used_values (
            namespace TEXT NOT NULL,
            value TEXT NOT NULL,
            expires_at {real} NOT NULL,
            PRIMARY KEY (namespace, value)
        )
        """,
            "CREATE INDEX pactmw_used_values_expires ON pactmw_used_values (expires_at)",
            table="pactmw_device_authorizations",  # _DEVICE_TABLE's name and pa_sub
            pa_sub="TEXT NOT NULL",
        ),
        # Version 3: RFC 9396 authorization details of device authorizations and grants
        # (owner `device:<code hash>` or `grant:<grant id>`), each entry once per owner.
        types.fill(
            """
        CREATE TABLE pactmw_authorization_details (
            owner TEXT NOT NULL,
            digest TEXT NOT NULL,
            position INTEGER NOT NULL,
            entry TEXT NOT NULL,
            expires_at {real},
            PRIMARY KEY (owner, digest)
        )
        """,
            """
        CREATE INDEX pactmw_authorization_details_expires
            ON pactmw_authorization_details (expires_at)
        """,
        ),
        # Version 4: personal agents added at runtime, on top of the configured ones. Whether
        # one may call stays in pactmw_agent_overrides, as for configured agents.
        types.fill(
            """
        CREATE TABLE pactmw_agents (
            issuer TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            jwks_uri TEXT NOT NULL,
            added_at {real} NOT NULL
        )
        """,
        ),
        # Version 5: rate-limit counters shared by every process on this store, one row per
        # counter key (a hash: no client address or user id at rest) holding its current window.
        types.fill(
            """
        CREATE TABLE pactmw_rate_counters (
            counter_key TEXT PRIMARY KEY,
            window_start {real} NOT NULL,
            window_end {real} NOT NULL,
            requests INTEGER NOT NULL
        )
        """,
            "CREATE INDEX pactmw_rate_counters_end ON pactmw_rate_counters (window_end)",
        ),
        # Version 6: Poppy Sessions (each with its one live Session Token hash) and Account
        # Tokens; store/_sql/ holds the statements, shared with the Django store.
        version_6,
        # Version 7: when a grant was last used (the connected agents page), written at most
        # once a minute per grant.
        types.fill("ALTER TABLE pactmw_grants ADD COLUMN last_used_at {real}"),
        # Version 8: the last answered turns of a context, straight from an index, newest first
        # (`history` reads `ORDER BY id DESC LIMIT 50`): no scan of the whole conversation and no
        # sort, so turn 1,000 costs what turn 2 does. Partial, as the query only wants answered
        # turns; unanswered claims and the other columns stay out of it.
        types.fill(
            """
        CREATE INDEX pactmw_messages_answered
            ON pactmw_messages (context_id, id) WHERE reply IS NOT NULL
        """,
        ),
        # Version 9: the sealed answer of the rotation that spent a refresh token, kept for the
        # reuse interval so a repeated refresh gets the same token pair (Rotation `repeated`).
        types.fill("ALTER TABLE pactmw_refresh_tokens ADD COLUMN successor {bytes}"),
        version_10,
    )


def _message_ids(types: ColumnTypes) -> tuple[str, ...]:
    """Version 12: the message ids each owner (brand, agent, user) holds across its
    conversations, and which conversation holds each (`claim_message_id`: a Poppy message
    id is the User's, PAP-7.3-01). A surrogate `id` keeps Django's model (one-column
    primary keys before Django 5.2) the same table; the unique key is the invariant.
    Filled from the Poppy conversations already stored (their `issuer` is "poppy " and the
    agent's client_id); an id that two of them hold (sent before this version) is recorded
    for one of them."""
    return types.fill(
        """
        CREATE TABLE pactmw_message_ids (
            id {serial_key},
            brand_id TEXT NOT NULL,
            issuer TEXT NOT NULL,
            sub TEXT NOT NULL,
            message_id TEXT NOT NULL,
            context_id TEXT NOT NULL,
            CONSTRAINT pactmw_message_ids_key UNIQUE (brand_id, issuer, sub, message_id)
        )
        """,
        # Cleanup deletes an idle conversation's ids with it.
        "CREATE INDEX pactmw_message_ids_context ON pactmw_message_ids (context_id)",
        MESSAGE_IDS_BACKFILL,
    )


#: Version 12's backfill, the same statement in the Django migration (0003).
MESSAGE_IDS_BACKFILL = """
        INSERT INTO pactmw_message_ids (brand_id, issuer, sub, message_id, context_id)
        SELECT c.brand_id, c.issuer, c.sub, m.message_id, MIN(m.context_id)
        FROM pactmw_messages m JOIN pactmw_conversations c ON c.context_id = m.context_id
        WHERE c.issuer LIKE 'poppy %'
        GROUP BY c.brand_id, c.issuer, c.sub, m.message_id
        """


SQLITE_MIGRATIONS = (
    *schema_migrations(
        SQLITE_COLUMNS,
        (*sessions.migration(SQLITE_COLUMNS), *account_tokens.migration(SQLITE_COLUMNS)),
        # sqlite cannot drop NOT NULL in place: the table is rebuilt (nothing references it) with
        # the same columns, keys and index.
        (
            *SQLITE_COLUMNS.fill(
                _DEVICE_TABLE, table="pactmw_device_authorizations_10", pa_sub="TEXT"
            ),
            """
        INSERT INTO pactmw_device_authorizations_10 (device_code_hash, user_code, brand_id,
            client_id, pa_sub, scopes, created_at, expires_at, interval_seconds,
            last_polled_at, status, account, granted_scopes, grant_id)
        SELECT device_code_hash, user_code, brand_id, client_id, pa_sub, scopes, created_at,
            expires_at, interval_seconds, last_polled_at, status, account, granted_scopes,
            grant_id
        FROM pactmw_device_authorizations
        """,
            "DROP TABLE pactmw_device_authorizations",
            "ALTER TABLE pactmw_device_authorizations_10 RENAME TO pactmw_device_authorizations",
            _DEVICE_EXPIRES_INDEX,
        ),
    ),
    # Version 11: Poppy operations (Operations v1) and API writes' Idempotency-Key answers.
    operations.migration(SQLITE_COLUMNS),
    _message_ids(SQLITE_COLUMNS),
)
POSTGRES_MIGRATIONS = (
    *schema_migrations(
        POSTGRES_COLUMNS,
        (*sessions.migration(POSTGRES_COLUMNS), *account_tokens.migration(POSTGRES_COLUMNS)),
        ("ALTER TABLE pactmw_device_authorizations ALTER COLUMN pa_sub DROP NOT NULL",),
    ),
    operations.migration(POSTGRES_COLUMNS),
    _message_ids(POSTGRES_COLUMNS),
)
