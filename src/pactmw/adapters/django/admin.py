"""The Django admin for pactmw's state (with `store = "django"`): registered agents, agent
access (block/allow), grants, conversations and the Poppy message ids they hold.

The admin appears only where it manages something: `PACTMW` lists `brands` (there is a
Provider) and its `store` is `"django"` or `"django:ALIAS"` (the state is in this site's
tables). Elsewhere every pactmw admin refuses every permission, so the index shows no pactmw
section and its URLs are Django's 403: its lists would show empty tables while the state
lives in another store, and its forms would need a Provider that does not exist.

Every change goes through the operators' functions the commands use
(`pactmw.provider.agent_admin`, `pactmw.provider.grant_admin`) on the site's Provider, so
the admin follows the same rules (SSRF-safe JWKS URLs, configured agents cannot be removed)
and its revocations are the Provider's (`provider.revoke_grant`, audited as
`agent.grant_revoked`); the admin's own history records who did it. Rows are never edited
through the ORM. Conversations and message ids are read-only, and message text is shown only when
`PACTMW["admin_show_message_text"]` is True (it is personal data).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.http import HttpRequest

from pactmw.adapters.django._admin_bases import (
    AccountUser,
    AgentSwitches,
    DecidedForm,
    ReadOnly,
    StateAdmin,
)
from pactmw.adapters.django._admin_lists import (
    LIST_MINUTE,
    GrantStatusFilter,
    brand_ids,
    conversation_agents,
    grant_agents,
    in_state_database,
    known,
    list_time_column,
    message_id_agents,
    recent,
    short_id,
    time_column,
    titled,
    titled_column,
)
from pactmw.adapters.django._config import (
    SHOW_MESSAGE_TEXT,
    get_provider,
    show_message_text,
    state_in_site_database,
)
from pactmw.adapters.django.models import (
    AgentOverride,
    Conversation,
    Grant,
    Message,
    MessageId,
    RegisteredAgent,
)
from pactmw.provider import agent_admin, grant_admin

if TYPE_CHECKING:  # a model: importing it needs django.contrib.admin installed and loaded
    pass

__all__ = [
    "SHOW_MESSAGE_TEXT",
    "AgentAccessAdmin",
    "AgentAccessForm",
    "ConversationAdmin",
    "GrantAdmin",
    "MessageIdAdmin",
    "MessageInline",
    "RegisteredAgentAdmin",
    "RegisteredAgentForm",
    "show_message_text",
    "state_in_site_database",
]


class RegisteredAgentForm(DecidedForm):
    """Add a personal agent: valid only if `agent_admin.add_agent` would accept it (the
    issuer, the JWKS URL under the configured agents' rules, the name); saved by it."""

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
        # An agent's own page shows its fields read-only, so its form has none of them.
        if "name" in self.fields:
            self.fields["name"].required = False

    def refusal(self, data: dict[str, Any]) -> agent_admin.Outcome | None:
        return agent_admin.add_refusal(
            get_provider(),
            issuer=data.get("issuer", ""),
            jwks_uri=data.get("jwks_uri", ""),
            name=data.get("name") or "",
        )

    def apply(self) -> agent_admin.Outcome:
        return agent_admin.add_agent(
            get_provider(),
            issuer=self.cleaned_data["issuer"],
            jwks_uri=self.cleaned_data["jwks_uri"],
            name=self.cleaned_data.get("name") or "",
            now=time.time(),
        )


@admin.register(RegisteredAgent)
class RegisteredAgentAdmin(AgentSwitches):
    """Agents added at runtime, on top of the configured ones: add, block, allow, remove."""

    form = RegisteredAgentForm
    # Whether an agent may act comes right after which one it is; its keys' URL last.
    list_display = ("agent", "access", "agent_name", "added_utc", "jwks")
    list_display_links = ("agent",)
    search_fields = ("issuer", "name")
    ordering = ("issuer",)
    added = time_column("added_at", "added")
    added_utc = list_time_column("added_at", "added")
    agent = titled_column("issuer", "issuer")
    agent_name = titled_column("name", "name")
    jwks = titled_column("jwks_uri", "JWKS URL")

    def get_queryset(self, request: HttpRequest) -> QuerySet[RegisteredAgent]:
        # Each agent's block/allow switch comes with the list: one query, not one a row.
        switch = AgentOverride.objects.filter(issuer=OuterRef("issuer")).values("enabled")[:1]
        return super().get_queryset(request).annotate(switch=Subquery(switch))

    @admin.display(description="access")
    def access(self, obj: RegisteredAgent) -> str:
        # As the store's agent_enabled rules: enabled unless an override says otherwise.
        switch = obj.switch  # type: ignore[attr-defined]  # annotated by get_queryset
        return "blocked" if switch is False else "allowed"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # An agent's issuer and keys are its identity: remove it and add it again instead.
        return () if obj is None else ("issuer", "jwks_uri", "name", "added")

    def delete_model(self, request: HttpRequest, obj: RegisteredAgent) -> None:
        self._report(request, agent_admin.remove_agent(get_provider(), obj.issuer))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RegisteredAgent]) -> None:
        provider = get_provider()
        for issuer in list(queryset.values_list("issuer", flat=True)):
            self._report(request, agent_admin.remove_agent(provider, issuer))


class AgentAccessForm(DecidedForm):
    """Block or allow any configured or added agent by issuer (`agent_admin.set_enabled`)."""

    class Meta:
        model = AgentOverride
        fields = ("issuer", "enabled")
        labels: ClassVar[dict[str, str]] = {"enabled": "Allowed (untick to block)"}
        # One line, as on the agents' add form (the model's text column would be a textarea).
        widgets: ClassVar[dict[str, forms.Widget]] = {
            "issuer": forms.URLInput(attrs={"size": 60}),
        }

    def refusal(self, data: dict[str, Any]) -> agent_admin.Outcome | None:
        return agent_admin.switch_refusal(
            get_provider(), data.get("issuer", ""), bool(data.get("enabled"))
        )

    def apply(self) -> agent_admin.Outcome:
        data = self.cleaned_data
        return agent_admin.set_enabled(get_provider(), data["issuer"], bool(data.get("enabled")))


@admin.register(AgentOverride)
class AgentAccessAdmin(AgentSwitches):
    """Which agents are blocked or allowed, configured ones included."""

    form = AgentAccessForm
    list_display = ("agent", "access", "source")
    list_display_links = ("agent",)
    ordering = ("issuer",)
    agent = titled_column("issuer", "issuer")

    @admin.display(description="access")
    def access(self, obj: AgentOverride) -> str:
        return "allowed" if obj.enabled else "blocked"

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentOverride]:
        # Whether each issuer was added at runtime comes with the list, not a query a row.
        added = RegisteredAgent.objects.filter(issuer=OuterRef("issuer"))
        return super().get_queryset(request).annotate(added=Exists(added))

    @admin.display(description="source")
    def source(self, obj: AgentOverride) -> str:
        if any(agent.issuer == obj.issuer for agent in get_provider().verifier.registry):
            return "config"
        return "runtime" if obj.added else "-"  # type: ignore[attr-defined]  # see get_queryset

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a block is lifted by allowing, which every process sees


# -- grants --------------------------------------------------------------------------------


@admin.register(Grant)
class GrantAdmin(ReadOnly, AccountUser):
    """Delegation grants, filterable by status, Brand and agent, found by account; revoke as
    the Provider does."""

    # What an operator decides on, on one line a grant: beside Django's navigation and the
    # filters a 1024 px window leaves some 440 px for the table (600 px at 1280). The scopes
    # (cut to a word or two at those widths), the agent's user (`pa_sub`), the creation time
    # and the Brand (a filter) are on each grant's page.
    list_display = ("grant", "account_text", "agent", "state", "expires_utc")
    list_display_links = ("grant",)
    # Not `account` among the filters: the sidebar would list every account that ever
    # delegated (a DISTINCT over the table on each page). Search finds one (`=account`), and
    # `?account=...` filters as before.
    list_filter = (
        GrantStatusFilter,
        known("brand_id", "brand", brand_ids),
        known("client_id", "agent", grant_agents),
        recent("created_at", "created"),
    )
    search_fields = ("=grant_id", "=account", "client_id")
    ordering = ("-created_at",)
    actions = ("revoke_grants",)
    # A grant's page: its times as the list and the commands show them, not epoch seconds.
    fields = (
        "grant_id",
        "brand_id",
        "account",
        "user",
        "client_id",
        "pa_sub",
        "scope_list",
        "state",
        "created",
        "updated",
        "expires",
        "revoked",
        "last_used",
    )
    readonly_fields = fields
    created = time_column("created_at", "created")
    updated = time_column("updated_at", "updated")
    expires = time_column("expires_at", "expires")
    revoked = time_column("revoked_at", "revoked")
    last_used = time_column("last_used_at", "last used")
    expires_utc = list_time_column("expires_at", "expires")
    account_text = titled_column("account", "account")
    agent = titled_column("client_id", "agent", url=True)

    @admin.display(description="grant id", ordering="grant_id")
    def grant(self, obj: Grant) -> str:
        return short_id(obj.grant_id)

    @admin.display(description="scopes")
    def scope_list(self, obj: Grant) -> str:
        return titled(", ".join(obj.scopes or ()))

    @admin.display(description="status")
    def state(self, obj: Grant) -> str:
        return grant_admin.status(obj.as_stored(), time.time())

    @admin.action(description="Revoke the selected grants", permissions=["change_model"])
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


class MessageInline(ReadOnly, admin.TabularInline):  # type: ignore[type-arg]
    """A conversation's turns, oldest first (`ConversationAdmin` shows the last of them)."""

    model = Message
    extra = 0
    can_delete = False
    ordering = ("id",)
    claimed = time_column("claimed_at", "received", sortable=False)
    replied = time_column("replied_at", "answered", sortable=False)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if show_message_text():
            return ("message_id", "text", "claimed", "reply_message_id", "reply_text", "replied")
        return ("message_id", "claimed", "reply_message_id", "replied")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self.get_fields(request, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        # The stored reply (the whole A2A response, kilobytes a turn) is never shown, and the
        # texts only when the operator opted in: none of it is read for nothing.
        hidden = ("reply",) if show_message_text() else ("reply", "text", "reply_text")
        return in_state_database(super().get_queryset(request)).defer(*hidden)


@admin.register(Conversation)
class ConversationAdmin(ReadOnly, AccountUser):
    """Conversations, read-only; what was written only with `admin_show_message_text`.

    A conversation's page shows its last `turns_shown` turns (a site's subclass may change
    it) and how many there are, so a long conversation's page stays small.
    """

    # One line a conversation, as the grants: the agent's user (`sub`), the start and the
    # Brand (a filter) are on each conversation's page.
    list_display = ("conversation", "account_text", "agent", "active_utc", "closed")
    list_display_links = ("conversation",)
    list_filter = (
        known("brand_id", "brand", brand_ids),
        known("issuer", "agent", conversation_agents),
        recent("last_activity", "last activity"),
        "closed",
    )
    search_fields = ("=context_id", "=account")
    ordering = ("-last_activity",)
    inlines = (MessageInline,)
    fields = (
        "context_id",
        "brand_id",
        "issuer",
        "sub",
        "account",
        "user",
        "closed",
        "started",
        "active",
        "turns",
    )
    readonly_fields = fields
    #: As many turns as the bot is given by default (`Store.history`).
    turns_shown: ClassVar[int] = 50
    started = time_column("created_at", "started")
    active = time_column("last_activity", "last activity")
    active_utc = list_time_column("last_activity", "last activity", LIST_MINUTE)
    account_text = titled_column("account", "account")
    agent = titled_column("issuer", "agent", url=True)

    @admin.display(description="context id", ordering="context_id")
    def conversation(self, conversation: Conversation) -> str:
        return short_id(conversation.context_id)

    @admin.display(description="turns")
    def turns(self, conversation: Conversation) -> str:
        total = in_state_database(Message.objects.filter(conversation=conversation)).count()
        shown = self.turns_shown
        return f"{total} (the last {shown} below)" if total > shown else str(total)

    def get_formset_kwargs(
        self, request: HttpRequest, obj: Any, inline: Any, prefix: str
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = super().get_formset_kwargs(request, obj, inline, prefix)
        if isinstance(inline, MessageInline) and obj is not None:
            turns = inline.get_queryset(request).filter(conversation=obj)
            last = turns.order_by("-id").values_list("id", flat=True)[: self.turns_shown]
            kwargs["queryset"] = turns.filter(id__in=list(last))
        return kwargs


@admin.register(MessageId)
class MessageIdAdmin(ReadOnly, StateAdmin):
    """Which conversation holds each Poppy message id of a User (an id names one message of
    the User across conversations, PAP-7.3-01), read-only: where support looks when an agent
    is told `409 message_id_conflict`."""

    # One line a row, as the conversations: the Brand (a filter) and the agent are on each
    # row's page. Newest first by the row's serial id (the order ids were recorded): sorting
    # by the time, looked up a row, would look it up for every row of the table.
    list_display = ("message", "user", "conversation", "received_utc")
    list_display_links = ("message",)
    list_filter = (
        known("brand_id", "brand", brand_ids),
        known("issuer", "agent", message_id_agents),
    )
    search_fields = ("=message_id", "=sub", "=context_id")
    ordering = ("-id",)
    fields = ("message_id", "brand_id", "issuer", "sub", "context_id", "received")
    readonly_fields = fields
    received = time_column("received_at", "received", sortable=False)
    received_utc = list_time_column("received_at", "received", LIST_MINUTE, sortable=False)
    message = titled_column("message_id", "message id")
    user = titled_column("sub", "user")

    @admin.display(description="context id", ordering="context_id")
    def conversation(self, obj: MessageId) -> str:
        return short_id(obj.context_id)

    def get_queryset(self, request: HttpRequest) -> QuerySet[MessageId]:
        # When the conversation received the message (its turn's claim) comes with the list:
        # one lookup a row on the turns' (context_id, message_id) key. None while no turn
        # holds it yet.
        turn = Message.objects.filter(
            conversation_id=OuterRef("context_id"), message_id=OuterRef("message_id")
        )
        received = Subquery(turn.values("claimed_at")[:1])
        return super().get_queryset(request).annotate(received_at=received)
