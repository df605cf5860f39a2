"""The SQL of the delegation operations (device authorizations, grants, refresh tokens and
single-use values), built once per dialect; part of `Statements` (statements.py)."""

from __future__ import annotations

from pactmw.store._sql.dialect import Dialect, statement_builder
from pactmw.store._sql.rows import DEVICE_ROW, GRANT_ROW

__all__ = ["DelegationStatements"]

# What `SqlCore._device` and `SqlCore._grant` read.
_DEVICE_COLUMNS = DEVICE_ROW.columns(interval="interval_seconds")
_GRANT_COLUMNS = GRANT_ROW.columns()


class DelegationStatements:
    """The delegation statements in one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        q = statement_builder(
            dialect,
            device_columns=_DEVICE_COLUMNS,
            # Constants only, so not an injection (S608).
            select_device=f"SELECT {_DEVICE_COLUMNS} FROM pactmw_device_authorizations",  # noqa: S608
            select_grant=f"SELECT {_GRANT_COLUMNS} FROM pactmw_grants",  # noqa: S608
            grant_key="brand_id = ? AND account = ? AND client_id = ? AND pa_sub = ?",
            grant_order=f" ORDER BY created_at DESC, grant_id{dialect.collate_c} DESC",
            live_of_account=(
                " WHERE account = ? AND revoked_at IS NULL AND expires_at > ?"
                f" AND ({dialect.nullable_text} IS NULL OR brand_id = ?)"
            ),
        )

        # --- device authorizations -------------------------------------------------------------
        self.user_code_holder = q(
            "SELECT device_code_hash, expires_at FROM pactmw_device_authorizations"
            " WHERE user_code = ?{lock}"
        )
        self.delete_device = q(
            "DELETE FROM pactmw_device_authorizations WHERE device_code_hash = ?"
        )
        # DO NOTHING: PostgreSQL waits for a concurrent insert of the same code or hash to
        # settle, so a racing creator cannot slip past the holder check.
        self.insert_device = q(
            "INSERT INTO pactmw_device_authorizations (device_code_hash, user_code, brand_id,"
            " client_id, pa_sub, scopes, created_at, expires_at, interval_seconds,"
            " last_polled_at, status, account, granted_scopes, grant_id)"
            " VALUES (?, ?, ?, ?, ?, {scopes}, ?, ?, ?, NULL, 'pending', NULL, {no_scopes}, NULL)"
            " ON CONFLICT DO NOTHING"
        )
        self.device_hash_taken = q(
            "SELECT 1 FROM pactmw_device_authorizations WHERE device_code_hash = ?"
        )
        self.device_by_user_code = q("{select_device} WHERE user_code = ?")
        self.lock_device_by_user_code = q("{select_device} WHERE user_code = ?{lock}")
        self.lock_device_by_hash = q("{select_device} WHERE device_code_hash = ?{lock}")
        self.deny_device = q(
            "UPDATE pactmw_device_authorizations SET status = 'denied', account = ?"
            " WHERE device_code_hash = ?"
        )
        self.deny_pending_returning = q(
            "UPDATE pactmw_device_authorizations SET status = 'denied', account = ?"
            " WHERE user_code = ? AND status = 'pending' AND expires_at > ?"
            " RETURNING {device_columns}"
        )
        self.approve_device = q(
            "UPDATE pactmw_device_authorizations"
            " SET status = 'approved', account = ?, granted_scopes = {scopes}, grant_id = ?"
            " WHERE device_code_hash = ?"
        )
        self.touch_device = q(
            "UPDATE pactmw_device_authorizations SET last_polled_at = ? WHERE device_code_hash = ?"
        )
        self.consume_device = q(
            "UPDATE pactmw_device_authorizations SET status = 'consumed' WHERE device_code_hash = ?"
        )
        # A Poppy authorization approved without a user: the poll binds its user and grant.
        self.bind_device = q(
            "UPDATE pactmw_device_authorizations SET status = 'consumed', pa_sub = ?,"
            " grant_id = ? WHERE device_code_hash = ?"
        )

        # --- grants ----------------------------------------------------------------------------
        self.grant = q("{select_grant} WHERE grant_id = ?")
        self.lock_grant = q("{select_grant} WHERE grant_id = ?{lock_no_key}")
        self.lock_unrevoked_grant_of_key = q(
            "{select_grant} WHERE {grant_key} AND revoked_at IS NULL{lock_no_key}"
        )
        self.live_grant_of_key = q(
            "{select_grant} WHERE {grant_key} AND revoked_at IS NULL AND expires_at > ?"
        )
        self.grant_id_taken = q("SELECT 1 FROM pactmw_grants WHERE grant_id = ?")
        self.insert_grant = q(
            "INSERT INTO pactmw_grants (grant_id, brand_id, account, client_id, pa_sub, scopes,"
            " created_at, updated_at, expires_at, revoked_at)"
            " VALUES (?, ?, ?, ?, ?, {scopes}, ?, ?, ?, NULL)"
        )
        self.widen_grant = q(
            "UPDATE pactmw_grants SET scopes = {scopes}, expires_at = ?, updated_at = ?"
            " WHERE grant_id = ?"
        )
        self.revoke_grant = q("UPDATE pactmw_grants SET revoked_at = ? WHERE grant_id = ?")
        self.record_grant_use = q(
            "UPDATE pactmw_grants SET last_used_at = ?"
            " WHERE grant_id = ? AND (last_used_at IS NULL OR last_used_at <= ?)"
        )
        self.revoke_live_grant = q(
            "UPDATE pactmw_grants SET revoked_at = ?"
            " WHERE grant_id = ? AND revoked_at IS NULL AND expires_at > ?"
        )
        self.live_grant_ids_of_account = q(
            "SELECT grant_id FROM pactmw_grants{live_of_account}{grant_order}"
        )
        self.revoke_grants_of_account = q(
            "UPDATE pactmw_grants SET revoked_at = ?{live_of_account}"
        )
        self.revoke_grants_of_account_returning = q(
            "WITH revoked AS (UPDATE pactmw_grants SET revoked_at = ?{live_of_account}"
            " RETURNING grant_id, created_at) SELECT grant_id FROM revoked{grant_order}"
        )
        self.list_grants = q(
            "{select_grant} WHERE ({nullable_text} IS NULL OR brand_id = ?)"
            " AND ({nullable_text} IS NULL OR account = ?)"
            " AND (? OR (revoked_at IS NULL AND expires_at > ?)){grant_order}"
        )

        # --- refresh tokens and single-use values ----------------------------------------------
        self.insert_refresh_token = q(
            "INSERT INTO pactmw_refresh_tokens"
            " (token_hash, grant_id, client_id, brand_id, created_at, expires_at, used_at)"
            " VALUES (?, ?, ?, ?, ?, ?, NULL) ON CONFLICT DO NOTHING"
        )
        # A token's agent user is its grant's (the grant key never changes), so it is read
        # through the join rather than stored twice.
        self.lock_refresh_token = q(
            "SELECT t.grant_id, t.client_id, t.brand_id, g.pa_sub, t.expires_at, t.used_at,"
            " t.successor FROM pactmw_refresh_tokens AS t JOIN pactmw_grants AS g USING (grant_id)"
            " WHERE t.token_hash = ?{lock_refresh}"
        )
        self.spend_refresh_token = q(
            "UPDATE pactmw_refresh_tokens SET used_at = ? WHERE token_hash = ?"
        )
        self.seal_rotation = q(
            "UPDATE pactmw_refresh_tokens SET successor = ?"
            " WHERE token_hash = ? AND used_at IS NOT NULL AND successor IS NULL"
        )
        # Sealed answers are kept for the reuse interval only (the grant index finds them).
        self.clear_successors = q(
            "UPDATE pactmw_refresh_tokens SET successor = NULL"
            " WHERE grant_id = ? AND successor IS NOT NULL AND used_at <= ?"
        )
        # One statement: it changes a row when it inserts, or renews an expired record; a
        # concurrent duplicate waits for the winner (PostgreSQL) and then changes none.
        self.use_once = q(
            "INSERT INTO pactmw_used_values (namespace, value, expires_at) VALUES (?, ?, ?)"
            " ON CONFLICT (namespace, value) DO UPDATE SET expires_at = excluded.expires_at"
            " WHERE pactmw_used_values.expires_at <= ?"
        )
        self.used_until = q(
            "SELECT expires_at FROM pactmw_used_values WHERE namespace = ? AND value = ?"
        )
