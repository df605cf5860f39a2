"""The tables of pactmw's SQL store as Django models, for `store = "django"`.

The models exist so that Django's migrations create the tables the store's one SQL
implementation (pactmw/store/_sql) reads and writes, in the site's own database, and so the
admin can show them. Table and column names are the store's: the SQL runs unchanged. The
store's code never goes through these models; the admin does, read-only except where it
calls the store (see admin.py).

Two differences from the sqlite/PostgreSQL stores' own schema, both because Django (before
5.2) wants a one-column primary key: `pactmw_used_values` and `pactmw_authorization_details`
get a surrogate `id`, and their composite keys become unique constraints, which the store's
`ON CONFLICT (...)` clauses use just the same. tests/store/test_django_schema.py holds the
Django-migrated schema to the stores' own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import django
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Q

from pactmw.store import base as store_base

__all__ = [
    "DEVICE_STATUSES",
    "AgentOverride",
    "AuthorizationDetail",
    "Conversation",
    "DeviceAuthorization",
    "Grant",
    "Message",
    "MessageId",
    "PoppyAccountToken",
    "PoppyIdempotentAnswer",
    "PoppyOperation",
    "PoppySession",
    "RateCounter",
    "RefreshToken",
    "RegisteredAgent",
    "ScopeListField",
    "UsedValue",
    "device_status_check",
]

DEVICE_STATUSES = ("pending", "approved", "denied", "consumed")


def device_status_check() -> models.CheckConstraint:
    """The device authorizations' status CHECK, spelled for the running Django (5.1 renamed
    `check=` to `condition=`, and 6.0 drops `check=`), so one migration serves 4.2 and up."""
    keyword = "condition" if django.VERSION >= (5, 1) else "check"
    condition: dict[str, Any] = {keyword: Q(status__in=DEVICE_STATUSES)}
    return models.CheckConstraint(name="pactmw_device_authorizations_status", **condition)


if TYPE_CHECKING:
    _ListField = models.Field[list[str], list[str]]
else:  # Django's Field is generic only in its type stubs
    _ListField = models.Field


if TYPE_CHECKING:
    # The column kinds of the store's tables, as django-stubs types them (Django's fields are
    # generic only in the stubs, so these names exist for the type checker alone).
    _Text = models.TextField[str, str]
    _OptionalText = models.TextField[str | None, str | None]
    _Float = models.FloatField[float, float]
    _OptionalFloat = models.FloatField[float | None, float | None]
    _Serial = models.BigAutoField[int, int]


def _optional_text() -> models.TextField[str | None, str | None]:
    """A text column that may be NULL (and left blank in forms)."""
    return models.TextField(null=True, blank=True)


def _optional_float() -> models.FloatField[float | None, float | None]:
    """A time or number column that may be NULL (and left blank in forms)."""
    return models.FloatField(null=True, blank=True)


def _surrogate_id() -> models.BigAutoField[int, int]:
    """The `id` Django (before 5.2) wants where the store's key spans several columns."""
    return models.BigAutoField(primary_key=True)


def _grant_key(*, null: bool) -> models.ForeignKey[Any, Any]:
    """The `grant_id` column that points at a grant. db_index=False: the store's schema
    indexes it only where it reads by grant, and those tables name that index in their Meta."""
    return models.ForeignKey(
        "Grant", models.PROTECT, db_column="grant_id", db_index=False, null=null, blank=null
    )


class ScopeListField(_ListField):
    """A scope list stored as the store's dialect stores it: `text[]` on PostgreSQL, a JSON
    array of strings in a text column elsewhere. Reads as a list of strings."""

    description = "A list of OAuth scopes"

    def db_type(self, connection: BaseDatabaseWrapper) -> str:
        return "text[]" if connection.vendor == "postgresql" else "text"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> list[str] | None:
        if value is None:
            return None
        if isinstance(value, str):
            return [str(item) for item in json.loads(value)]
        return [str(item) for item in value]

    def get_db_prep_value(
        self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False
    ) -> Any:
        if value is None:
            return None
        scopes = [str(item) for item in value]
        if connection.vendor == "postgresql":
            return scopes
        return json.dumps(scopes, ensure_ascii=False)


class Conversation(models.Model):
    """A conversation (`contextId`) between a personal agent and a brand's bot."""

    context_id: _Text = models.TextField(primary_key=True)
    # The admin's labels are the commands' words (AGENT), not Django's from the column names.
    brand_id: _Text = models.TextField(verbose_name="brand")
    issuer: _Text = models.TextField(verbose_name="agent")
    sub: _Text = models.TextField(verbose_name="agent's user (sub)")
    created_at: _Float = models.FloatField()
    last_activity: _Float = models.FloatField()
    closed: models.BooleanField[bool, bool] = models.BooleanField(default=False)
    account: _OptionalText = _optional_text()

    class Meta:
        db_table = "pactmw_conversations"

    def __str__(self) -> str:
        return self.context_id


class Message(models.Model):
    """One user message of a conversation and, once the bot answered, its reply."""

    id: _Serial = models.BigAutoField(primary_key=True)
    # db_index=False: the (context_id, message_id) unique constraint already indexes it.
    conversation: models.ForeignKey[Conversation, Conversation] = models.ForeignKey(
        Conversation, models.CASCADE, db_column="context_id", db_index=False
    )
    message_id: _Text = models.TextField()
    text: _Text = models.TextField()
    claimed_at: _Float = models.FloatField()
    reply_message_id: _OptionalText = _optional_text()
    reply_text: _OptionalText = _optional_text()
    reply: models.BinaryField[bytes | None, bytes | None] = models.BinaryField(
        null=True, blank=True
    )
    replied_at: _OptionalFloat = _optional_float()

    class Meta:
        db_table = "pactmw_messages"
        constraints = (
            models.UniqueConstraint(
                fields=["conversation", "message_id"], name="pactmw_messages_user_key"
            ),
            models.UniqueConstraint(
                fields=["conversation", "reply_message_id"], name="pactmw_messages_agent_key"
            ),
        )
        # The last answered turns of a conversation, newest first, straight from the index
        # (schema version 8 of the sqlite and PostgreSQL stores).
        indexes = (
            models.Index(
                fields=["conversation", "id"],
                name="pactmw_messages_answered",
                condition=models.Q(reply__isnull=False),
            ),
        )

    def __str__(self) -> str:
        return self.message_id  # the admin's caption of a turn (Django's: "Message object (7)")


class MessageId(models.Model):
    """A message id of one owner (brand, agent, user) and the conversation holding it: a
    Poppy message id is the User's across conversations (PAP-7.3-01)."""

    id: _Serial = _surrogate_id()
    brand_id: _Text = models.TextField(verbose_name="brand")
    issuer: _Text = models.TextField(verbose_name="agent")
    sub: _Text = models.TextField(verbose_name="agent's user (sub)")
    message_id: _Text = models.TextField()
    context_id: _Text = models.TextField()

    class Meta:
        db_table = "pactmw_message_ids"
        constraints = (
            models.UniqueConstraint(
                fields=["brand_id", "issuer", "sub", "message_id"], name="pactmw_message_ids_key"
            ),
        )
        indexes = (models.Index(fields=["context_id"], name="pactmw_message_ids_context"),)

    def __str__(self) -> str:
        return self.message_id


class AgentOverride(models.Model):
    """Whether an agent (configured or registered) may call: the block/allow switch."""

    issuer: _Text = models.TextField(primary_key=True)
    enabled: models.BooleanField[bool, bool] = models.BooleanField()

    class Meta:
        db_table = "pactmw_agent_overrides"


class RegisteredAgent(models.Model):
    """A personal agent added at runtime, on top of the configured ones."""

    issuer: _Text = models.TextField(primary_key=True)
    name: _Text = models.TextField()
    jwks_uri: _Text = models.TextField(verbose_name="JWKS URL")  # not Django's "Jwks uri"
    added_at: _Float = models.FloatField()

    class Meta:
        db_table = "pactmw_agents"
        verbose_name = "registered agent"

    def __str__(self) -> str:
        return self.issuer


class Grant(models.Model):
    """What an account delegated to a personal agent (PACT Delegated)."""

    grant_id: _Text = models.TextField(primary_key=True)
    brand_id: _Text = models.TextField(verbose_name="brand")
    account: _Text = models.TextField()
    client_id: _Text = models.TextField(verbose_name="agent")
    pa_sub: _Text = models.TextField(verbose_name="agent's user (pa_sub)")
    scopes: ScopeListField = ScopeListField()
    created_at: _Float = models.FloatField()
    updated_at: _Float = models.FloatField()
    expires_at: _Float = models.FloatField()
    revoked_at: _OptionalFloat = _optional_float()
    #: When a request last used it, to the minute (the connected agents page's "last used").
    last_used_at: _OptionalFloat = _optional_float()

    class Meta:
        db_table = "pactmw_grants"
        constraints = (
            # One unrevoked grant per key: the invariant behind upsert_grant.
            models.UniqueConstraint(
                fields=["brand_id", "account", "client_id", "pa_sub"],
                condition=Q(revoked_at__isnull=True),
                name="pactmw_grants_one_live",
            ),
        )
        indexes = (models.Index(fields=["account", "brand_id"], name="pactmw_grants_account"),)

    def __str__(self) -> str:
        return self.grant_id

    def as_stored(self) -> store_base.Grant:
        """This row as the store would read it: the admin's status column rules on the row
        it already has, instead of asking the store again for every row of a list."""
        return store_base.Grant(
            grant_id=self.grant_id,
            brand_id=self.brand_id,
            account=self.account,
            client_id=self.client_id,
            pa_sub=self.pa_sub,
            scopes=tuple(self.scopes or ()),
            created_at=self.created_at,
            updated_at=self.updated_at,
            expires_at=self.expires_at,
            revoked_at=self.revoked_at,
            last_used_at=self.last_used_at,
        )


class DeviceAuthorization(models.Model):
    """A pending, approved, denied or consumed device-code authorization (RFC 8628)."""

    device_code_hash: _Text = models.TextField(primary_key=True)
    user_code: _Text = models.TextField(unique=True)
    brand_id: _Text = models.TextField()
    client_id: _Text = models.TextField()
    #: None while a Poppy authorization waits for the poll that binds its user.
    pa_sub: _OptionalText = _optional_text()
    scopes: ScopeListField = ScopeListField()
    created_at: _Float = models.FloatField()
    expires_at: _Float = models.FloatField()
    interval_seconds: _Float = models.FloatField()
    last_polled_at: _OptionalFloat = _optional_float()
    status: _Text = models.TextField()
    account: _OptionalText = _optional_text()
    granted_scopes: ScopeListField = ScopeListField()
    grant: models.ForeignKey[Grant | None, Grant | None] = _grant_key(null=True)

    class Meta:
        db_table = "pactmw_device_authorizations"
        constraints = (device_status_check(),)
        indexes = (models.Index(fields=["expires_at"], name="pactmw_device_auth_expires"),)


class RefreshToken(models.Model):
    """A refresh token of a grant, kept as a hash; spent ones stay to detect reuse."""

    token_hash: _Text = models.TextField(primary_key=True)
    grant: models.ForeignKey[Grant, Grant] = _grant_key(null=False)
    client_id: _Text = models.TextField()
    brand_id: _Text = models.TextField()
    created_at: _Float = models.FloatField()
    expires_at: _Float = models.FloatField()
    used_at: _OptionalFloat = _optional_float()
    #: The sealed answer of the rotation that spent it, kept for the reuse interval only.
    successor: models.BinaryField[bytes | None, bytes | None] = models.BinaryField(
        null=True, blank=True, editable=False
    )

    class Meta:
        db_table = "pactmw_refresh_tokens"
        indexes = (
            models.Index(fields=["grant"], name="pactmw_refresh_tokens_grant"),
            models.Index(fields=["expires_at"], name="pactmw_refresh_tokens_expires"),
        )


class UsedValue(models.Model):
    """A single-use value (assertion jti, DPoP proof) remembered until it expires."""

    id: _Serial = _surrogate_id()
    namespace: _Text = models.TextField()
    value: _Text = models.TextField()
    expires_at: _Float = models.FloatField()

    class Meta:
        db_table = "pactmw_used_values"
        constraints = (
            models.UniqueConstraint(fields=["namespace", "value"], name="pactmw_used_values_key"),
        )
        indexes = (models.Index(fields=["expires_at"], name="pactmw_used_values_expires"),)


class AuthorizationDetail(models.Model):
    """One RFC 9396 authorization details entry of a device authorization or a grant."""

    id: _Serial = _surrogate_id()
    owner: _Text = models.TextField()
    digest: _Text = models.TextField()
    position: models.IntegerField[int, int] = models.IntegerField()
    entry: _Text = models.TextField()
    expires_at: _OptionalFloat = _optional_float()

    class Meta:
        db_table = "pactmw_authorization_details"
        constraints = (
            models.UniqueConstraint(
                fields=["owner", "digest"], name="pactmw_authorization_details_key"
            ),
        )
        indexes = (models.Index(fields=["expires_at"], name="pactmw_auth_details_expires"),)


class RateCounter(models.Model):
    """A rate-limit counter shared by every process on the store: its current window.

    The key is a hash, so no client address or user id is kept at rest."""

    counter_key: _Text = models.TextField(primary_key=True)
    window_start: _Float = models.FloatField()
    window_end: _Float = models.FloatField()
    requests: models.IntegerField[int, int] = models.IntegerField()

    class Meta:
        db_table = "pactmw_rate_counters"
        indexes = (models.Index(fields=["window_end"], name="pactmw_rate_counters_end"),)


class PoppySession(models.Model):
    """A Poppy Session with the hash of its one live Session Token (store/_sql/sessions.py).

    `account` is None while signed out; `ever_account` keeps the account it was first signed
    in to, after sign-out too (a Session never signs in to another account)."""

    session_id: _Text = models.TextField(primary_key=True)
    brand_id: _Text = models.TextField()
    client_id: _Text = models.TextField()
    user_id: _Text = models.TextField()
    jkt: _Text = models.TextField()
    token_hash: _Text = models.TextField(unique=True)
    token_expires_at: _Float = models.FloatField()
    created_at: _Float = models.FloatField()
    account: _OptionalText = _optional_text()
    grant_id: _OptionalText = _optional_text()
    scopes: ScopeListField = ScopeListField()
    ever_account: _OptionalText = _optional_text()
    signed_in_at: _OptionalFloat = _optional_float()

    class Meta:
        db_table = "pactmw_poppy_sessions"
        indexes = (models.Index(fields=["grant_id"], name="pactmw_poppy_sessions_grant"),)


class PoppyAccountToken(models.Model):
    """A Poppy Account Token of a grant, kept as a hash (store/_sql/account_tokens.py);
    rotated-away ones stay, marked `used_at`."""

    token_hash: _Text = models.TextField(primary_key=True)
    grant: models.ForeignKey[Grant, Grant] = _grant_key(null=False)
    brand_id: _Text = models.TextField()
    client_id: _Text = models.TextField()
    scopes: ScopeListField = ScopeListField()
    created_at: _Float = models.FloatField()
    expires_at: _Float = models.FloatField()
    used_at: _OptionalFloat = _optional_float()

    class Meta:
        db_table = "pactmw_poppy_account_tokens"
        indexes = (models.Index(fields=["grant"], name="pactmw_poppy_act_tokens_grant"),)


class PoppyOperation(models.Model):
    """A Poppy operation (Operations v1), its latest revision (store/_sql/operations.py).
    `open_key` is set while it is open: its unique index makes one action one operation."""

    operation_id: models.TextField[str, str] = models.TextField(primary_key=True)
    brand_id: models.TextField[str, str] = models.TextField()
    client_id: models.TextField[str, str] = models.TextField()
    user_id: models.TextField[str, str] = models.TextField()
    account: models.TextField[str | None, str | None] = models.TextField(null=True, blank=True)
    action: models.TextField[str, str] = models.TextField()
    revision: models.IntegerField[int, int] = models.IntegerField()
    state: models.TextField[str, str] = models.TextField()
    summary: models.TextField[str, str] = models.TextField()
    terms: models.TextField[str | None, str | None] = models.TextField(null=True, blank=True)
    scopes: ScopeListField = ScopeListField()
    user_approval_required: models.IntegerField[int, int] = models.IntegerField()
    url: models.TextField[str | None, str | None] = models.TextField(null=True, blank=True)
    open_key: models.TextField[str | None, str | None] = models.TextField(null=True, blank=True)
    created_at: models.FloatField[float, float] = models.FloatField()
    updated_at: models.FloatField[float, float] = models.FloatField()
    expires_at: models.FloatField[float, float] = models.FloatField()
    confirmed_revision: models.IntegerField[int | None, int | None] = models.IntegerField(
        null=True, blank=True
    )
    approved_by: models.TextField[str | None, str | None] = models.TextField(null=True, blank=True)
    confirmed_at: models.FloatField[float | None, float | None] = models.FloatField(
        null=True, blank=True
    )
    result_summary: models.TextField[str | None, str | None] = models.TextField(
        null=True, blank=True
    )
    result_data: models.TextField[str | None, str | None] = models.TextField(null=True, blank=True)

    class Meta:
        db_table = "pactmw_poppy_operations"
        constraints = (
            models.UniqueConstraint(fields=["open_key"], name="pactmw_poppy_operations_open"),
        )


class PoppyIdempotentAnswer(models.Model):
    """An API write's answer under its Idempotency-Key (store/_sql/operations.py)."""

    record_key: models.TextField[str, str] = models.TextField(primary_key=True)
    fingerprint: models.TextField[str, str] = models.TextField()
    status: models.IntegerField[int, int] = models.IntegerField()
    body: models.TextField[str, str] = models.TextField()
    expires_at: models.FloatField[float, float] = models.FloatField()

    class Meta:
        db_table = "pactmw_poppy_idempotency"
