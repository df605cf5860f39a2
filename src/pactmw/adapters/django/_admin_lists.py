"""What pactmw's Django admin lists show: compact columns (short ids and times, long text
cut by the lists' stylesheet with the whole value in its title), the list filters on what
the Provider knows and on how recent a row is. The admins themselves are in `admin.py`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from pactmw.adapters.django._config import get_provider, raw_settings, state_database
from pactmw.adapters.django.models import Grant, RegisteredAgent
from pactmw.core.errors import RequestRefused
from pactmw.provider import agent_admin
from pactmw.provider.grant_admin import TABLE_TIME, format_time

__all__ = [
    "LIST_DAY",
    "LIST_MINUTE",
    "RECENT",
    "GrantStatusFilter",
    "agent_issuers",
    "brand_ids",
    "conversation_agents",
    "grant_agents",
    "in_state_database",
    "known",
    "list_time_column",
    "message_id_agents",
    "recent",
    "short_id",
    "time_column",
    "titled",
    "titled_column",
    "when",
]


def in_state_database(queryset: QuerySet[Any]) -> QuerySet[Any]:
    """`queryset` read from the database the store writes (`"django:ALIAS"`), not from the
    one Django's router would pick: the admin shows what the store holds."""
    return queryset.using(state_database())


def when(value: float | None) -> str:
    return format_time(value, TABLE_TIME) or "-"


def time_column(
    field: str, description: str, *, sortable: bool = True
) -> Callable[[Any, Any], str]:
    """A list or detail column showing the time in `field` as the commands' tables do;
    `sortable` columns sort by that field."""

    @admin.display(description=description, ordering=field if sortable else None)
    def column(admin_view: Any, obj: Any) -> str:
        return when(getattr(obj, field))

    return column


#: A list's times: the day (UTC), or the minute where it matters (a conversation's last
#: activity); the whole time, as the commands show it, in the cell's title and on the page.
LIST_DAY = "%Y-%m-%d"
LIST_MINUTE = "%Y-%m-%d %H:%M"


def list_time_column(
    field: str, description: str, pattern: str = LIST_DAY, *, sortable: bool = True
) -> Callable[[Any, Any], str]:
    """A list column showing the time in `field` compactly (`pattern`, UTC); `sortable`
    columns sort by that field."""

    @admin.display(description=description, ordering=field if sortable else None)
    def column(admin_view: Any, obj: Any) -> str:
        value = getattr(obj, field)
        if value is None:
            return "-"
        return format_html('<span title="{}">{}</span>', when(value), format_time(value, pattern))

    return column


#: An id longer than this is shown in a list by its last `_ID_TAIL` characters.
_ID_SHOWN = 16
_ID_TAIL = 8


def short_id(value: str) -> str:
    """A list's text for a long id: its tail, which tells apart the ids pactmw mints (grant
    ids and UUIDv7 context ids start with their time, the same for a day's), the whole id in
    its title and on its page."""
    if len(value) <= _ID_SHOWN:
        return value
    return format_html('<span title="{}">\u2026{}</span>', value, value[-_ID_TAIL:])


def titled(text: str, shown: str | None = None) -> str:
    """A list cell's text (`shown`, the text itself by default) with the whole text as its
    title: the lists' CSS cuts a long cell to its width with an ellipsis."""
    return format_html('<span title="{}">{}</span>', text, text if shown is None else shown)


def titled_column(
    field: str, description: str, *, url: bool = False
) -> Callable[[Any, Any], str | None]:
    """A list column showing the text in `field` with its title (`_titled`), sorted by it.
    A `url` column leaves out "https://", the scheme every agent's URL has (an http URL, for
    a test on loopback, is shown whole)."""

    @admin.display(description=description, ordering=field, empty_value="-")
    def column(admin_view: Any, obj: Any) -> str | None:
        value = getattr(obj, field)
        if not value:
            return None  # Django's "-"
        return titled(value, value.removeprefix("https://") if url else value)

    return column


def known(field: str, title: str, choices: Callable[[], Iterable[str]]) -> type[Any]:
    """A list filter on `field` offering `choices()`: what the Provider knows (its Brands, its
    configured and added agents), not Django's `DISTINCT` over the table, which reads every
    row on every page (0.25 s of a 0.39 s conversations page at 300,000 conversations). The
    `?field=` of any value filters, a value no longer known included."""

    class KnownValues(admin.SimpleListFilter):
        parameter_name = field

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            return [(value, value) for value in sorted(set(choices()))]

        def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
            value = self.value()
            return queryset if value is None else queryset.filter(**{field: value})

    KnownValues.title = title
    return KnownValues


# The lists answer while `PACTMW` does not build (the pages that need the Provider answer
# 503): their filters read the settings as written, and the agents the database holds.


def brand_ids() -> Iterable[str]:
    brands = raw_settings().get("brands")  # a mapping where the admin shows at all
    return [brand for brand in brands if isinstance(brand, str)]


def agent_issuers() -> Iterable[str]:
    configured: list[str] = []
    with contextlib.suppress(RequestRefused):  # then only the added agents are known
        configured = [agent.issuer for agent in get_provider().verifier.registry]
    added = in_state_database(RegisteredAgent.objects.values_list("issuer", flat=True))
    return [*configured, *added]


def _poppy_agent_ids() -> tuple[str, ...]:
    # The Poppy agents `pactmw agents list` lists; none while `PACTMW` does not build.
    with contextlib.suppress(RequestRefused):
        return agent_admin.poppy_agent_ids(get_provider())
    return ()


def grant_agents() -> Iterable[str]:
    """The agents a grant may hold (`client_id`): the PACT agents' issuers and the Poppy
    agents' `client_id`s."""
    return [*agent_issuers(), *_poppy_agent_ids()]


def conversation_agents() -> Iterable[str]:
    """The agents a conversation may hold (`issuer`): the PACT agents' issuers and the Poppy
    agents' owners ("poppy " and the `client_id`, as the agent column shows them)."""
    return [*agent_issuers(), *map(agent_admin.poppy_owner, _poppy_agent_ids())]


def message_id_agents() -> Iterable[str]:
    """The agents a message id may hold (`issuer`): the Poppy agents' owners, as their
    conversations hold them. Only Poppy records message ids (PAP-7.3-01), so the PACT
    agents' issuers, which no row holds, are not offered."""
    return [agent_admin.poppy_owner(client_id) for client_id in _poppy_agent_ids()]


#: What a list's time filter offers: each choice's value in the URL, its label and how far
#: back it reaches, in seconds.
RECENT: tuple[tuple[str, str, float], ...] = (
    ("1d", "past 24 hours", agent_admin.DAY),
    ("7d", "past 7 days", 7 * agent_admin.DAY),
    ("30d", "past 30 days", 30 * agent_admin.DAY),
    ("365d", "past year", 365 * agent_admin.DAY),
)


def recent(field: str, title: str) -> type[Any]:
    """A list filter on how recent the time in `field` is (`RECENT`), where Django's
    `date_hierarchy` cannot go: it needs a DateField (admin.E128), and pactmw's tables are
    the store's, whose times are epoch seconds. The window is reckoned here, in seconds, so no
    database time-zone function runs (sqlite with `USE_TZ` and PostgreSQL alike) and no
    `TIME_ZONE` moves it."""
    reaches = {value: seconds for value, _, seconds in RECENT}

    class Recent(admin.SimpleListFilter):
        parameter_name = f"{field}_within"

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            return [(value, label) for value, label, _ in RECENT]

        def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
            seconds = reaches.get(self.value() or "")
            if seconds is None:
                return queryset  # no choice, or one no list offers: every row
            return queryset.filter(**{f"{field}__gte": time.time() - seconds})

    Recent.title = title
    return Recent


class GrantStatusFilter(admin.SimpleListFilter):
    """Live, revoked or expired, as the status column and `pactmw grants list` tell them
    (`grant_admin.status`): the filter an operator looking for what to revoke wants."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> tuple[tuple[str, str], ...]:
        return (("live", "live"), ("revoked", "revoked"), ("expired", "expired"))

    def queryset(self, request: HttpRequest, queryset: QuerySet[Grant]) -> QuerySet[Grant]:
        # The store's rule (`store.Grant.is_live`) in the ORM's terms: live while unrevoked
        # and `now < expires_at`.
        now = time.time()
        unrevoked = queryset.filter(revoked_at__isnull=True)
        if self.value() == "live":
            return unrevoked.filter(expires_at__gt=now)
        if self.value() == "expired":
            return unrevoked.filter(expires_at__lte=now)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset
