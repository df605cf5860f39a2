"""The SQL of the SQL stores, written once and built once per dialect.

Statements are written with `?` placeholders and `{...}` fields for what the dialects spell
differently (see dialect.py). `Statements(dialect)` fills them in once, when a backend
module is imported, so no operation builds SQL. The delegation statements live apart
(delegation_statements.py); `Statements` holds them too.
"""

from __future__ import annotations

from pactmw.store._sql.delegation_statements import DelegationStatements
from pactmw.store._sql.dialect import Dialect, statement_builder

__all__ = ["Statements"]

# Column order is what store/_sql/agents.py reads.
_AGENT_COLUMNS = "issuer, name, jwks_uri, added_at"


class Statements(DelegationStatements):
    """Every statement of the SQL stores, in one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        q = statement_builder(dialect, agent_columns=_AGENT_COLUMNS)
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
            "DELETE FROM pactmw_messages"
            " WHERE context_id = ? AND message_id = ? AND claimed_at = ? AND reply IS NULL"
        )
        # An owner's message ids across conversations (`claim_message_id`): the unique key
        # lets exactly one of concurrent inserts record an id; the read then names its holder.
        self.insert_message_id = q(
            "INSERT INTO pactmw_message_ids (brand_id, issuer, sub, message_id, context_id)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (brand_id, issuer, sub, message_id) DO NOTHING"
        )
        self.message_id_holder = q(
            "SELECT context_id FROM pactmw_message_ids"
            " WHERE brand_id = ? AND issuer = ? AND sub = ? AND message_id = ?"
        )
        # Only while the conversation holds no turn of the message (claimed or answered).
        self.release_message_id = q(
            "DELETE FROM pactmw_message_ids"
            " WHERE brand_id = ? AND issuer = ? AND sub = ? AND message_id = ? AND context_id = ?"
            " AND NOT EXISTS (SELECT 1 FROM pactmw_messages m"
            " WHERE m.context_id = pactmw_message_ids.context_id"
            " AND m.message_id = pactmw_message_ids.message_id)"
        )
        self.start_conversation = q(
            "INSERT INTO pactmw_conversations"
            " (context_id, brand_id, issuer, sub, created_at, last_activity, closed, account)"
            " VALUES (?, ?, ?, ?, ?, ?, {false}, ?)"
        )
        # Statements made of the ones above (pieces already in the dialect).
        on = statement_builder(dialect, reply=self.store_reply, start=self.start_conversation)
        # A derived id: a concurrent start of the same conversation inserts nothing.
        self.start_conversation_with_id = on("{start} ON CONFLICT (context_id) DO NOTHING")
        # The reply of a turn in one statement when nothing stands in its way: the message is
        # claimed, unanswered, and the reply id is free in the conversation. When it changes
        # no row, the operation looks at why.
        self.store_free_reply = on(
            "{reply} AND reply IS NULL AND NOT EXISTS"
            " (SELECT 1 FROM pactmw_messages WHERE context_id = ? AND reply_message_id = ?)"
        )
        # Where a data-modifying WITH runs (PostgreSQL): that reply and the conversation's
        # touch in one statement; a new conversation and the claim of its first message in
        # one statement, atomic by itself (nothing is claimed when a derived id is taken).
        on = statement_builder(
            dialect,
            free_reply=self.store_free_reply,
            start=self.start_conversation,
            start_with_id=self.start_conversation_with_id,
            claim_first="INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at)",
        )
        # The conversation's row lock comes first, as in every turn write (no deadlock with
        # a claim or a renewal of the same message), so the statement is the whole reply.
        self.store_free_reply_touching = on(
            "WITH locked AS (SELECT context_id FROM pactmw_conversations"
            " WHERE context_id = ?{lock}),"
            " replied AS ({free_reply} AND context_id = (SELECT context_id FROM locked)"
            " RETURNING context_id)"
            " UPDATE pactmw_conversations SET last_activity = ?"
            " WHERE context_id IN (SELECT context_id FROM replied)"
        )
        self.start_turn = on(
            "WITH started AS ({start} RETURNING context_id)"
            " {claim_first} SELECT context_id, ?, ?, ? FROM started"
        )
        self.start_turn_with_id = on(
            "WITH started AS ({start_with_id} RETURNING context_id)"
            " {claim_first} SELECT context_id, ?, ?, ? FROM started"
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
        # A conversation whose first message was given up (`delete_empty_conversation`).
        self.delete_empty_conversation = q(
            "DELETE FROM pactmw_conversations WHERE context_id = ?"
            " AND NOT EXISTS (SELECT 1 FROM pactmw_messages WHERE context_id = ?)"
        )
        self.delete_message_ids_of = q("DELETE FROM pactmw_message_ids WHERE context_id = ?")
        self.delete_idle_messages = q(
            "DELETE FROM pactmw_messages WHERE context_id IN"
            " (SELECT context_id FROM pactmw_conversations WHERE last_activity < ?)"
        )
        self.delete_idle_message_ids = q(
            "DELETE FROM pactmw_message_ids WHERE context_id IN"
            " (SELECT context_id FROM pactmw_conversations WHERE last_activity < ?)"
        )
        self.delete_idle_conversations = q(
            "DELETE FROM pactmw_conversations WHERE last_activity < ?"
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
