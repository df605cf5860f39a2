"""The building blocks of pactmw's Django admin (`admin.py`): read-only admins, the state
admins that appear only where the site's store holds pactmw's state, the Django user behind a
same-app account, and the forms and admins whose changes go through the operators'
functions (`pactmw.provider.agent_admin`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from pactmw.adapters.django._admin_lists import (
    in_state_database,
)
from pactmw.adapters.django._config import (
    get_provider,
    state_in_site_database,
)
from pactmw.provider import agent_admin

if TYPE_CHECKING:  # a model: importing it needs django.contrib.admin installed and loaded
    from django.contrib.admin.models import LogEntry

__all__ = ["AccountUser", "AgentSwitches", "DecidedForm", "ReadOnly", "StateAdmin"]

#: Set on the request by `save_model` when the operators' function refused the change the
#: validated form asked for (another operator made or undid it in between), so the add view's
#: success message and history entry are left out.
_REFUSED_AT_SAVE = "_pactmw_refused_at_save"
#: Set on the request once the admin reported what an operators' function did (an add, a
#: switch, a removal), so Django's own success message does not say it a second time.
_REPORTED = "_pactmw_reported"


class ReadOnly:
    """Nothing is added, changed or deleted through the ORM (a mixin for admins and inlines)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StateAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
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


class AccountUser(StateAdmin):
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


class DecidedForm(forms.ModelForm):  # type: ignore[type-arg]
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


class AgentSwitches(StateAdmin):
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
