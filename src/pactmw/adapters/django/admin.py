"""The Django admin for pactmw's state (with `store = "django"`): registered agents, agent
access (block/allow), grants and conversations.

Every change goes through the operators' functions the commands use
(`pactmw.provider.agent_admin`, `pactmw.provider.grant_admin`) on the site's Provider, so
the admin follows the same rules (SSRF-safe JWKS URLs, configured agents cannot be removed)
and its revocations are the Provider's (`provider.revoke_grant`, audited as
`agent.grant_revoked`); the admin's own history records who did it. Rows are never edited
through the ORM. Conversations are read-only, and message text is shown only when
`PACTMW["admin_show_message_text"]` is True (it is personal data).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from pactmw.adapters.django._config import get_provider, raw_settings
from pactmw.adapters.django.models import (
    AgentOverride,
    Conversation,
    Grant,
    Message,
    RegisteredAgent,
)
from pactmw.provider import agent_admin, grant_admin
from pactmw.provider.grant_admin import TABLE_TIME, format_time

__all__ = [
    "SHOW_MESSAGE_TEXT",
    "AgentAccessAdmin",
    "AgentAccessForm",
    "ConversationAdmin",
    "GrantAdmin",
    "MessageInline",
    "RegisteredAgentAdmin",
    "RegisteredAgentForm",
    "show_message_text",
]

SHOW_MESSAGE_TEXT = "admin_show_message_text"


def show_message_text() -> bool:
    """Whether the admin shows what users and bots wrote (`PACTMW["admin_show_message_text"]`,
    default False)."""
    data = raw_settings()
    return isinstance(data, dict) and data.get(SHOW_MESSAGE_TEXT) is True


def _when(value: float | None) -> str:
    return format_time(value, TABLE_TIME) or "-"


class _ReadOnly(admin.ModelAdmin):  # type: ignore[type-arg]
    """Nothing is added, changed or deleted through the ORM."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# -- agents --------------------------------------------------------------------------------


class RegisteredAgentForm(forms.ModelForm):  # type: ignore[type-arg]
    """Add a personal agent: the store records it only if `agent_admin.add_agent` accepts it
    (the issuer, the JWKS URL under the configured agents' rules, the name)."""

    class Meta:
        model = RegisteredAgent
        fields = ("issuer", "jwks_uri", "name")
        widgets: ClassVar[dict[str, forms.Widget]] = {
            "issuer": forms.URLInput(attrs={"size": 60}),
            "jwks_uri": forms.URLInput(attrs={"size": 60}),
            "name": forms.TextInput(attrs={"size": 40}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].required = False
        self.outcome: agent_admin.Outcome | None = None

    def validate_unique(self) -> None:
        """The store decides (an issuer already added is refused with its date)."""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        outcome = agent_admin.add_agent(
            get_provider(),
            issuer=data.get("issuer", ""),
            jwks_uri=data.get("jwks_uri", ""),
            name=data.get("name") or "",
            now=time.time(),
        )
        if outcome.error is not None:
            raise forms.ValidationError(outcome.error)
        self.outcome = outcome
        return data


@admin.register(RegisteredAgent)
class RegisteredAgentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Agents added at runtime, on top of the configured ones: add, block, allow, remove."""

    form = RegisteredAgentForm
    list_display = ("issuer", "name", "jwks_uri", "access", "added")
    search_fields = ("issuer", "name")
    ordering = ("issuer",)
    actions = ("block_agents", "allow_agents")

    @admin.display(description="access")
    def access(self, obj: RegisteredAgent) -> str:
        enabled = get_provider().store.agent_enabled(obj.issuer)
        return "blocked" if enabled is False else "allowed"

    @admin.display(description="added", ordering="added_at")
    def added(self, obj: RegisteredAgent) -> str:
        return _when(obj.added_at)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # An agent's issuer and keys are its identity: remove it and add it again instead.
        return () if obj is None else ("issuer", "jwks_uri", "name", "added_at")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        # agent_admin.add_agent wrote the row while validating the form; say what it did.
        outcome = form.outcome
        for line in outcome.lines if outcome is not None else ():
            self.message_user(request, line, messages.SUCCESS)

    def delete_model(self, request: HttpRequest, obj: RegisteredAgent) -> None:
        self._report(request, agent_admin.remove_agent(get_provider(), obj.issuer))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RegisteredAgent]) -> None:
        provider = get_provider()
        for issuer in list(queryset.values_list("issuer", flat=True)):
            self._report(request, agent_admin.remove_agent(provider, issuer))

    def _report(self, request: HttpRequest, outcome: agent_admin.Outcome) -> None:
        if outcome.error is not None:
            self.message_user(request, outcome.error, messages.WARNING)
        for line in outcome.lines:
            self.message_user(request, line, messages.SUCCESS)

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[RegisteredAgent], enabled: bool
    ) -> None:
        provider = get_provider()
        for agent in queryset:
            outcome = agent_admin.set_enabled(provider, agent.issuer, enabled)
            self._report(request, outcome)
            if outcome.error is None:
                self.log_change(request, agent, "allowed" if enabled else "blocked")

    @admin.action(description="Block the selected agents")
    def block_agents(self, request: HttpRequest, queryset: QuerySet[RegisteredAgent]) -> None:
        self._set_enabled(request, queryset, False)

    @admin.action(description="Allow the selected agents")
    def allow_agents(self, request: HttpRequest, queryset: QuerySet[RegisteredAgent]) -> None:
        self._set_enabled(request, queryset, True)


class AgentAccessForm(forms.ModelForm):  # type: ignore[type-arg]
    """Block or allow any configured or added agent by issuer (`agent_admin.set_enabled`)."""

    class Meta:
        model = AgentOverride
        fields = ("issuer", "enabled")
        labels: ClassVar[dict[str, str]] = {"enabled": "Allowed (untick to block)"}

    def validate_unique(self) -> None:
        """Blocking an agent twice is fine: set_enabled says it already was."""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        outcome = agent_admin.set_enabled(
            get_provider(), data.get("issuer", ""), bool(data.get("enabled"))
        )
        if outcome.error is not None:
            raise forms.ValidationError(outcome.error)
        self.outcome = outcome
        return data


@admin.register(AgentOverride)
class AgentAccessAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Which agents are blocked or allowed, configured ones included."""

    form = AgentAccessForm
    list_display = ("issuer", "access", "source")
    ordering = ("issuer",)
    actions = ("block_agents", "allow_agents")

    @admin.display(description="access")
    def access(self, obj: AgentOverride) -> str:
        return "allowed" if obj.enabled else "blocked"

    @admin.display(description="source")
    def source(self, obj: AgentOverride) -> str:
        provider = get_provider()
        if any(agent.issuer == obj.issuer for agent in provider.verifier.registry):
            return "config"
        return "runtime" if provider.store.get_agent(obj.issuer) is not None else "-"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a block is lifted by allowing, which every process sees

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        for line in form.outcome.lines:  # set_enabled wrote it while validating the form
            self.message_user(request, line, messages.SUCCESS)

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[AgentOverride], enabled: bool
    ) -> None:
        provider = get_provider()
        for override in queryset:
            outcome = agent_admin.set_enabled(provider, override.issuer, enabled)
            if outcome.error is not None:
                self.message_user(request, outcome.error, messages.WARNING)
                continue
            self.log_change(request, override, "allowed" if enabled else "blocked")
            for line in outcome.lines:
                self.message_user(request, line, messages.SUCCESS)

    @admin.action(description="Block the selected agents")
    def block_agents(self, request: HttpRequest, queryset: QuerySet[AgentOverride]) -> None:
        self._set_enabled(request, queryset, False)

    @admin.action(description="Allow the selected agents")
    def allow_agents(self, request: HttpRequest, queryset: QuerySet[AgentOverride]) -> None:
        self._set_enabled(request, queryset, True)


# -- grants --------------------------------------------------------------------------------


@admin.register(Grant)
class GrantAdmin(_ReadOnly):
    """Delegation grants, filterable by account and agent; revoke as the Provider does."""

    list_display = (
        "grant_id",
        "brand_id",
        "account",
        "client_id",
        "pa_sub",
        "scope_list",
        "state",
        "created",
        "expires",
    )
    list_filter = ("brand_id", "client_id", "account")
    search_fields = ("=grant_id", "=account", "client_id")
    ordering = ("-created_at",)
    actions = ("revoke_grants",)

    @admin.display(description="scopes")
    def scope_list(self, obj: Grant) -> str:
        return " ".join(obj.scopes or ())

    @admin.display(description="status")
    def state(self, obj: Grant) -> str:
        stored = get_provider().store.get_grant(obj.grant_id)
        return grant_admin.status(stored, time.time()) if stored is not None else "-"

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Grant) -> str:
        return _when(obj.created_at)

    @admin.display(description="expires", ordering="expires_at")
    def expires(self, obj: Grant) -> str:
        return _when(obj.expires_at)

    @admin.action(description="Revoke the selected grants")
    def revoke_grants(self, request: HttpRequest, queryset: QuerySet[Grant]) -> None:
        provider = get_provider()
        for grant in queryset:
            done = grant_admin.revoke_one(provider, provider.store, grant.grant_id)
            if done.nothing is not None:
                self.message_user(request, done.nothing, messages.WARNING)
                continue
            # The Provider audits the revocation (agent.grant_revoked); this says who did it.
            self.log_change(request, grant, "revoked")
            for line in done.lines:
                self.message_user(request, line, messages.SUCCESS)


# -- conversations --------------------------------------------------------------------------


class MessageInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Message
    extra = 0
    can_delete = False
    ordering = ("id",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if show_message_text():
            return ("message_id", "text", "claimed", "reply_message_id", "reply_text", "replied")
        return ("message_id", "claimed", "reply_message_id", "replied")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self.get_fields(request, obj)

    @admin.display(description="received")
    def claimed(self, obj: Message) -> str:
        return _when(obj.claimed_at)

    @admin.display(description="answered")
    def replied(self, obj: Message) -> str:
        return _when(obj.replied_at)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(_ReadOnly):
    """Conversations, read-only; what was written only with `admin_show_message_text`."""

    list_display = ("context_id", "brand_id", "issuer", "sub", "account", "closed", "active")
    list_filter = ("brand_id", "issuer", "closed")
    search_fields = ("=context_id", "=account")
    ordering = ("-last_activity",)
    inlines = (MessageInline,)
    fields = ("context_id", "brand_id", "issuer", "sub", "account", "closed", "started", "active")
    readonly_fields = fields

    @admin.display(description="started", ordering="created_at")
    def started(self, obj: Conversation) -> str:
        return _when(obj.created_at)

    @admin.display(description="last activity", ordering="last_activity")
    def active(self, obj: Conversation) -> str:
        return _when(obj.last_activity)
