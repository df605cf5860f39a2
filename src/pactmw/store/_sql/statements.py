"""The SQL of the SQL stores, written once and built once per dialect.

Statements are written with `?` placeholders and `{...}` fields for what the dialects spell
differently (row locks, the scope column's type, a few literals). `Statements(dialect)`
fills them in once, when a backend module is imported, so no operation builds SQL.
"""

from __future__ import annotations

from attrs import asdict, frozen

__all__ = ["Dialect", "Statements"]


@frozen
class Dialect:
    """What differs in the SQL text between the backends."""

    placeholder: str  # "?" or "%s"
    lock: str  # appended to a SELECT whose row the transaction decides on
    lock_no_key: str  # the same for a grant row (whose key never changes)
    lock_refresh: str  # the same for the refresh-token row (t) of a token-grant join
    scopes: str  # a scope-list parameter (its cast, where the column needs one)
    no_scopes: str  # the empty scope list, as a literal
    nullable_text: str  # a text parameter compared with IS NULL (typed, where needed)
    collate_c: str  # after grant_id in ORDER BY: compare ids by code point
    true: str
    false: str


# Column order is what SqlCore._device and SqlCore._grant read.
_DEVICE_COLUMNS = (
    "device_code_hash, user_code, brand_id, client_id, pa_sub, scopes, created_at,"
    " expires_at, interval_seconds, last_polled_at, status, account, granted_scopes, grant_id"
)
_GRANT_COLUMNS = (
    "grant_id, brand_id, account, client_id, pa_sub, scopes, created_at, updated_at,"
    " expires_at, revoked_at, last_used_at"
)
# Column order is what store/_sql/agents.py reads.
_AGENT_COLUMNS = "issuer, name, jwks_uri, added_at"


class Statements:
    """Every statement of the SQL stores, in one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        fields = asdict(dialect)
        # Shared pieces, as further fields (already in the dialect: format does not nest).
        fields["device_columns"] = _DEVICE_COLUMNS
        fields["agent_columns"] = _AGENT_COLUMNS
        # Constants only, so not an injection (S608).
        fields["select_device"] = f"SELECT {_DEVICE_COLUMNS} FROM pactmw_device_authorizations"  # noqa: S608
        fields["select_grant"] = f"SELECT {_GRANT_COLUMNS} FROM pactmw_grants"  # noqa: S608
        fields["grant_key"] = "brand_id = ? AND account = ? AND client_id = ? AND pa_sub = ?"
        fields["grant_order"] = f" ORDER BY created_at DESC, grant_id{dialect.collate_c} DESC"
        fields["live_of_account"] = (
            " WHERE account = ? AND revoked_at IS NULL AND expires_at > ?"
            f" AND ({dialect.nullable_text} IS NULL OR brand_id = ?)"
        )

        def q(template: str) -> str:
            # `?` and `%` appear in no statement but as the placeholder.
            assert "%" not in template
            return template.format(**fields).replace("?", dialect.placeholder)

        self.set_schema_version = q("UPDATE pactmw_schema SET version = ?")

        # --- conversations and turns ---------------------------------------------------------
        self.insert_conversation = q(
            "INSERT INTO pactmw_conversations"
            " (context_id, brand_id, issuer, sub, created_at, last_activity, closed, account)"
            " VALUES (?, ?, ?, ?, ?, ?, {false}, NULL)"
        )
        self.conversation = q(
            "SELECT context_id, brand_id, issuer, sub, created_at, last_activity, closed,"
            " account FROM pactmw_conversations WHERE context_id = ?"
        )
        self.close_conversation = q(
            "UPDATE pactmw_conversations SET closed = {true} WHERE context_id = ?"
        )
        self.bind_account = q(
            "UPDATE pactmw_conversations SET account = ? WHERE context_id = ? AND account IS NULL"
        )
        self.bound_account = q("SELECT account FROM pactmw_conversations WHERE context_id = ?")
        self.bind_account_returning = q(
            "UPDATE pactmw_conversations SET account = COALESCE(account, ?)"
            " WHERE context_id = ? RETURNING account"
        )
        self.lock_conversation = q("SELECT 1 FROM pactmw_conversations WHERE context_id = ?{lock}")
        self.touch_conversation = q(
            "UPDATE pactmw_conversations SET last_activity = ? WHERE context_id = ?"
        )
        self.is_reply_id = q(
            "SELECT 1 FROM pactmw_messages WHERE context_id = ? AND reply_message_id = ?"
        )
        self.claim = q(
            "SELECT claimed_at, reply FROM pactmw_messages WHERE context_id = ? AND message_id = ?"
        )
        self.insert_claim = q(
            "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (context_id, message_id) DO NOTHING"
        )
        self.take_over_claim = q(
            "UPDATE pactmw_messages SET text = ?, claimed_at = ?"
            " WHERE context_id = ? AND message_id = ?"
        )
        # Only the holder renews: its lease still starts where it last set it.
        self.renew_claim = q(
            "UPDATE pactmw_messages SET claimed_at = ?"
            " WHERE context_id = ? AND message_id = ? AND claimed_at = ? AND reply IS NULL"
        )
        self.is_replied = q(
            "SELECT reply IS NOT NULL FROM pactmw_messages WHERE context_id = ? AND message_id = ?"
        )
        self.store_reply = q(
            "UPDATE pactmw_messages"
            " SET reply_message_id = ?, reply_text = ?, reply = ?, replied_at = ?"
            " WHERE context_id = ? AND message_id = ?"
        )
        self.release_claim = q(
            "DELETE FROM pactmw_messages WHERE context_id = ? AND message_id = ? AND reply IS NULL"
        )
        self.start_conversation = q(
            "INSERT INTO pactmw_conversations"
            " (context_id, brand_id, issuer, sub, created_at, last_activity, closed, account)"
            " VALUES (?, ?, ?, ?, ?, ?, {false}, ?)"
        )
        # A derived id: a concurrent start of the same conversation inserts nothing.
        self.start_conversation_with_id = q(
            "INSERT INTO pactmw_conversations"
            " (context_id, brand_id, issuer, sub, created_at, last_activity, closed, account)"
            " VALUES (?, ?, ?, ?, ?, ?, {false}, ?) ON CONFLICT (context_id) DO NOTHING"
        )
        self.replies = q(
            "SELECT message_id, reply FROM pactmw_messages"
            " WHERE context_id = ? AND reply IS NOT NULL ORDER BY id LIMIT ?"
        )
        # Newest first, so the answered-turns index (schema version 8) serves the ORDER BY
        # and the LIMIT directly; the caller reverses the rows (no sort in the database).
        self.history = q(
            "SELECT message_id, text, reply_message_id, reply_text"
            " FROM pactmw_messages WHERE context_id = ? AND reply IS NOT NULL"
            " ORDER BY id DESC LIMIT ?"
        )

        # --- agents: the runtime registry and the overrides ------------------------------------
        self.set_agent_enabled = q(
            "INSERT INTO pactmw_agent_overrides (issuer, enabled) VALUES (?, ?)"
            " ON CONFLICT (issuer) DO UPDATE SET enabled = excluded.enabled"
        )
        self.agent_enabled = q("SELECT enabled FROM pactmw_agent_overrides WHERE issuer = ?")
        # DO NOTHING: PostgreSQL waits for a concurrent insert of the issuer to settle, so
        # of two adds exactly one inserts a row.
        self.insert_agent = q(
            "INSERT INTO pactmw_agents ({agent_columns}) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (issuer) DO NOTHING"
        )
        self.delete_agent = q("DELETE FROM pactmw_agents WHERE issuer = ?")
        self.agent = q("SELECT {agent_columns} FROM pactmw_agents WHERE issuer = ?")
        self.list_agents = q("SELECT {agent_columns} FROM pactmw_agents ORDER BY issuer{collate_c}")
        # One row whatever is stored: the runtime agent's columns (NULL when none) and the
        # override (NULL when none), so a request asks both questions in one round trip.
        self.lookup_agent = q(
            "SELECT a.issuer, a.name, a.jwks_uri, a.added_at, o.enabled"
            " FROM (SELECT CAST(? AS TEXT) AS issuer) AS wanted"
            " LEFT JOIN pactmw_agents AS a ON a.issuer = wanted.issuer"
            " LEFT JOIN pactmw_agent_overrides AS o ON o.issuer = wanted.issuer"
        )

        # --- the opportunistic purge -----------------------------------------------------------
        self.purge_used_values = q("DELETE FROM pactmw_used_values WHERE expires_at <= ?")
        self.purge_devices = q("DELETE FROM pactmw_device_authorizations WHERE expires_at <= ?")
        self.purge_refresh_tokens = q("DELETE FROM pactmw_refresh_tokens WHERE expires_at <= ?")
        self.purge_successors = q(
            "UPDATE pactmw_refresh_tokens SET successor = NULL"
            " WHERE successor IS NOT NULL AND used_at <= ?"
        )

        # --- the operator's cleanup (store/_sql/retention.py) ----------------------------------
        # A spent token of a live grant stays: replaying it is how a theft is detected.
        self.cleanup_refresh_tokens = q(
            "DELETE FROM pactmw_refresh_tokens WHERE (used_at IS NULL AND expires_at <= ?)"
            " OR grant_id IN (SELECT grant_id FROM pactmw_grants"
            " WHERE revoked_at IS NOT NULL OR expires_at <= ?)"
        )
        self.lock_idle_conversations = q(
            "SELECT context_id FROM pactmw_conversations WHERE last_activity < ?{lock}"
        )
        self.delete_idle_messages = q(
            "DELETE FROM pactmw_messages WHERE context_id IN"
            " (SELECT context_id FROM pactmw_conversations WHERE last_activity < ?)"
        )
        self.delete_idle_conversations = q(
            "DELETE FROM pactmw_conversations WHERE last_activity < ?"
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
            "SELECT t.grant_id, t.client_id, t.brand_id, t.expires_at, t.used_at, g.pa_sub,"
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

        # --- rate-limit counters (store/_sql/ratelimits.py) ---------------------------------
        # Changes one row (inserts it, or counts into it) while the request is admitted, and
        # none once the window holds `limit` requests. A later window restarts the count; a
        # call with an older window (another process's clock lags) counts into the current.
        # SET reads the row as it was before the update in both dialects.
        self.count_request = q(
            "INSERT INTO pactmw_rate_counters (counter_key, window_start, window_end, requests)"
            " VALUES (?, ?, ?, 1) ON CONFLICT (counter_key) DO UPDATE SET"
            " requests = CASE WHEN pactmw_rate_counters.window_start < excluded.window_start"
            " THEN 1 ELSE pactmw_rate_counters.requests + 1 END,"
            " window_end = CASE WHEN pactmw_rate_counters.window_start < excluded.window_start"
            " THEN excluded.window_end ELSE pactmw_rate_counters.window_end END,"
            " window_start = CASE WHEN pactmw_rate_counters.window_start < excluded.window_start"
            " THEN excluded.window_start ELSE pactmw_rate_counters.window_start END"
            " WHERE pactmw_rate_counters.window_start < excluded.window_start"
            " OR pactmw_rate_counters.requests < ?"
        )
        self.drop_ended_rate_counters = q("DELETE FROM pactmw_rate_counters WHERE window_end <= ?")

        # --- authorization details (RFC 9396) ----------------------------------------------
        self.drop_expired_details = q(
            "DELETE FROM pactmw_authorization_details"
            " WHERE expires_at IS NOT NULL AND expires_at <= ?"
        )
        self.last_detail_position = q(
            "SELECT MAX(position) FROM pactmw_authorization_details WHERE owner = ?"
        )
        self.insert_detail = q(
            "INSERT INTO pactmw_authorization_details"
            " (owner, digest, position, entry, expires_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (owner, digest) DO NOTHING"
        )
        self.details_of = q(
            "SELECT entry FROM pactmw_authorization_details WHERE owner = ?"
            " ORDER BY position, digest"
        )
