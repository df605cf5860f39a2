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
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

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
    from django.contrib.admin.models import LogEntry

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

#: Set on the request by `save_model` when the operators' function refused the change the
#: validated form asked for (another operator made or undid it in between), so the add view's
#: success message and history entry are left out.
_REFUSED_AT_SAVE = "_pactmw_refused_at_save"
#: Set on the request once the admin reported what an operators' function did (an add, a
#: switch, a removal), so Django's own success message does not say it a second time.
_REPORTED = "_pactmw_reported"


class _ReadOnly:
    """Nothing is added, changed or deleted through the ORM (a mixin for admins and inlines)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class _StateAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The base of pactmw's admins (a site's subclass included): no permission at all where
    the state is not in this site's database (`state_in_site_database`), so Django hides the
    section and answers its URLs 403; Django's own rules where it is. Inlines follow their
    parent, whose pages they are shown on."""

    class Media:
        # One line a row, inside the page at a laptop's width (see the file).
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": ("pactmw/admin/lists.css",)}

    def has_module_permission(self, request: HttpRequest) -> bool:
        return state_in_site_database() and super().has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return state_in_site_database() and super().has_view_permission(request, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return in_state_database(super().get_queryset(request))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return state_in_site_database() and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return state_in_site_database() and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return state_in_site_database() and super().has_delete_permission(request, obj)

    def has_change_model_permission(self, request: HttpRequest) -> bool:
        """Whether the user holds Django's "Can change" permission of this admin's model: what
        pactmw's actions (revoke, block, allow) need, since no row is ever edited (the
        admin's own change permission is False) and viewing must not be enough."""
        return state_in_site_database() and admin.ModelAdmin.has_change_permission(self, request)

    # PostgreSQL answers a NUL character in a text value with an error, which Django lets
    # through as a 500. pactmw's stores refuse NULs, so no key or value holds one: an id with
    # one names nothing, and a filter or search with one is a lookup Django cannot run.

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        if "\x00" in object_id:
            return None  # Django's "doesn't exist. Perhaps it was deleted?"
        return super().get_object(request, object_id, from_field)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        if any("\x00" in key + "".join(values) for key, values in request.GET.lists()):
            raise IncorrectLookupParameters("a NUL character")  # Django: the unfiltered list
        return super().get_changelist_instance(request)


#: A row page's value for "no such user": Django shows a read-only method's None as "None".
_NO_USER = "-"


class _AccountUser(_StateAdmin):
    """A grant's or a conversation's page names the Django user its account is (`user`),
    linked to the user's admin page where this admin site has one: a same-app Brand's
    account is `str(user.pk)` (`a2a_view`). Never for a Brand whose people sign in at its
    own login (`login = "brand"`), whose accounts are its own and no pk of this site. On
    the row's page only, so the lists make no query a row."""

    @admin.display(description="user")
    def user(self, obj: Any) -> str:
        brand = get_provider().brands.get(obj.brand_id)
        if not obj.account or brand is None or brand.delegation is None:
            return _NO_USER
        if brand.delegation.mode != "same-app":
            return _NO_USER
        users = get_user_model()
        try:
            person = users._default_manager.filter(pk=obj.account).first()
        except (ValueError, TypeError, ValidationError):  # not a pk of this site's users
            return _NO_USER
        if person is None:
            return _NO_USER  # deleted since (its grants were revoked then)
        name = person.get_username()
        if not self.admin_site.is_registered(users):
            return str(name)
        meta = users._meta
        try:
            url = reverse(
                f"{self.admin_site.name}:{meta.app_label}_{meta.model_name}_change",
                args=(quote(person.pk),),
            )
        except NoReverseMatch:
            return str(name)
        return format_html('<a href="{}">{}</a>', url, name)


class _DecidedForm(forms.ModelForm):  # type: ignore[type-arg]
    """A form whose change is one of the operators' functions (`agent_admin`). Validating
    asks that function's refusal (`refusal`), so the form's error is in the commands' words,
    and writes nothing: the admin's `save_model` makes the change (`apply`), once every
    validation (a site's own `clean` included) has passed, as Django's admin expects. A
    refusal that concerns one input (`Outcome.field`) is that field's error, shown beside
    it as Django's own validation does; any other is the form's."""

    def refusal(self, data: dict[str, Any]) -> agent_admin.Outcome | None:
        raise NotImplementedError

    def apply(self) -> agent_admin.Outcome:
        """Make the change the validated form asks for."""
        raise NotImplementedError

    def validate_unique(self) -> None:
        """The operators' function decides (an issuer already added is refused with its
        date; blocking an agent twice says it already was)."""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        refused = self.refusal(data)
        if refused is not None and refused.error is not None:
            if refused.field in self.fields:
                self.add_error(refused.field, refused.error)  # drops it from cleaned_data
            else:
                raise forms.ValidationError(refused.error)
        return data


class _AgentSwitches(_StateAdmin):
    """Block or allow the selected agents (`agent_admin.set_enabled`, which every process
    sees), and report what the operators' functions did; rows are never edited."""

    actions = ("block_agents", "allow_agents")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        # The operators' function writes the row (never the ORM), and says what it did; one
        # that lost a race since the form validated says so as a warning.
        outcome = form.apply()
        if outcome.error is not None:
            setattr(request, _REFUSED_AT_SAVE, True)
        self._report(request, outcome)

    def message_user(
        self,
        request: HttpRequest,
        message: Any,  # a str or a lazy translation, as Django passes it
        level: int | str = messages.INFO,
        extra_tags: str = "",
        fail_silently: bool = False,
    ) -> None:
        # After the operators' function's report ("added X (keys from Y)", "blocked X",
        # "removed X"), Django's own success message ("The agent override “X” was added
        # successfully.", "Successfully deleted 1 registered agent.") would repeat it in vaguer
        # words, or contradict a refusal; its other messages pass.
        if level == messages.SUCCESS and getattr(request, _REPORTED, False):
            return
        super().message_user(request, message, level, extra_tags, fail_silently)

    def log_addition(  # type: ignore[override]  # Django's add view ignores what it returns
        self, request: HttpRequest, obj: Any, message: Any
    ) -> LogEntry | None:
        # The history says what this operator did: nothing, when another one won the race.
        if getattr(request, _REFUSED_AT_SAVE, False):
            return None
        return super().log_addition(request, obj, message)

    def response_add(
        self, request: HttpRequest, obj: Any, post_url_continue: str | None = None
    ) -> HttpResponse:
        # Django's "was added successfully" would contradict the warning save_model left: the
        # warning alone, on the list that shows what the other operator added.
        if getattr(request, _REFUSED_AT_SAVE, False):
            return self.response_post_save_add(request, obj)
        return super().response_add(request, obj, post_url_continue)

    def _report(self, request: HttpRequest, outcome: agent_admin.Outcome) -> None:
        setattr(request, _REPORTED, True)
        if outcome.error is not None:
            messages.warning(request, outcome.error)
        for line in outcome.lines:
            messages.success(request, line)

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[Any], enabled: bool) -> None:
        provider = get_provider()
        for row in queryset:
            outcome = agent_admin.set_enabled(provider, row.issuer, enabled)
            self._report(request, outcome)
            if outcome.error is None:
                self.log_change(request, row, "allowed" if enabled else "blocked")

    @admin.action(description="Block the selected agents", permissions=["change_model"])
    def block_agents(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._set_enabled(request, queryset, False)

    @admin.action(description="Allow the selected agents", permissions=["change_model"])
    def allow_agents(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._set_enabled(request, queryset, True)


# -- agents --------------------------------------------------------------------------------


class RegisteredAgentForm(_DecidedForm):
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
class RegisteredAgentAdmin(_AgentSwitches):
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


class AgentAccessForm(_DecidedForm):
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
class AgentAccessAdmin(_AgentSwitches):
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
class GrantAdmin(_ReadOnly, _AccountUser):
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


class MessageInline(_ReadOnly, admin.TabularInline):  # type: ignore[type-arg]
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
class ConversationAdmin(_ReadOnly, _AccountUser):
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
class MessageIdAdmin(_ReadOnly, _StateAdmin):
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
