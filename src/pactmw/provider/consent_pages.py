"""The pages a person sees (HTML): code entry, consent, result, connected agents, errors.

They render from Jinja2 templates named `pactmw/<page>.html`, all extending
`pactmw/base.html`, with autoescaping on. A Brand dresses them without subclassing: put its own
`pactmw/base.html` (or any page) in a template folder searched first, through
`ConsentPages(templates=...)`, the `templates` setting, Flask's template loader or Django's
template directories (the adapters pass those in). The text is translatable: give
`translations` (a `gettext.GNUTranslations`, from Babel-style `.po`/`.mo` catalogs); English
is the source language. Subclassing and overriding a method still works.

Forms use absolute `action` URLs and hidden inputs written
`<input type="hidden" name="X" value="...">`, the shape the reference conformance suite
scrapes. The security headers are added by the Provider, not by these templates.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any, Literal

from attrs import field, frozen

from pactmw.core.encoding import bidi_controls_shown


@frozen
class ConsentView:
    """What the consent page shows: who asks, who is signed in, which scopes."""

    brand_name: str
    agent_name: str
    agent_origin: str
    signed_in_as: str
    scopes: tuple[tuple[str, str], ...]  # (id, description), requested ones only
    decision_url: str
    session: str
    #: RFC 9396 authorization details as (scope id, the entry's rendering): the conditions
    #: that come with that scope, declined with it.
    conditions: tuple[tuple[str, str], ...] = ()
    #: How long an approval lasts (seconds): the grant's lifetime.
    lasts: float = 30 * 24 * 3600.0
    #: What this agent may already do for this person (id, description): a step-up widens it.
    already: tuple[tuple[str, str], ...] = ()
    #: The authorization details it already holds, as `conditions` are (scope id, rendering).
    already_conditions: tuple[tuple[str, str], ...] = ()
    #: The page where the person sees and revokes their connected agents, if served.
    manage_url: str | None = None
    #: The user code of the request (RFC 8628), shown for the person to compare with the
    #: code their agent shows: a link can carry it, so they may never have typed it. Empty:
    #: not shown.
    user_code: str = ""


@frozen
class ResultView:
    """What the page after a decision shows: what was decided and what the agent can do *now*.

    `can_now` is read from the live grant when the page is shown (id, description); it is
    empty when the agent cannot act for the person. `known` is False when the page was
    opened without a valid record of a decision (an old or edited link): then nothing is
    claimed either way. `again` is True when the person answered a request they had already
    answered (Allow pressed twice, a form sent again after Back): the first answer stands.
    """

    brand_name: str
    agent_name: str
    agent_origin: str
    approved: bool
    granted: tuple[tuple[str, str], ...]
    can_now: tuple[tuple[str, str], ...]
    until: float | None
    manage_url: str | None = None
    known: bool = True
    again: bool = False
    #: RFC 9396 authorization details the agent holds, as (scope id, the entry's rendering):
    #: the conditions of `can_now`'s scopes.
    conditions: tuple[tuple[str, str], ...] = ()


@frozen
class ConnectedAgent:
    """One agent that can act for the person at this Brand: one live grant.

    Protocol-neutral: an agent's display name and origin, the person's user id there, what
    it may do (id, description), since when, when it was last used (None: not recorded or
    never) and when it expires.
    """

    grant_id: str
    agent_name: str
    agent_origin: str
    scopes: tuple[tuple[str, str], ...]
    since: float
    last_used: float | None
    expires_at: float
    #: RFC 9396 authorization details the grant holds, as (scope id, the entry's rendering).
    conditions: tuple[tuple[str, str], ...] = ()
    #: The person's user id at the agent (PACT's `pa_sub`): one agent used by two of its
    #: users is two grants, and this is what tells their cards apart ("" when unknown). The
    #: agent chose it, so its bidirectional controls are shown, never obeyed.
    agent_user: str = field(default="", converter=bidi_controls_shown)


@frozen
class ConnectedAgentsView:
    """The person's connected agents page: every agent that can act for them, each with a
    Revoke button posting `grant` and the page's `session` to `action_url`."""

    brand_name: str
    signed_in_as: str
    agents: tuple[ConnectedAgent, ...]
    action_url: str
    session: str
    #: The display name of the agent the person just revoked ("" when none), so the page can
    #: say, in its own words, that it can no longer act for them.
    revoked: str = ""


def date_text(epoch: float) -> str:
    """`epoch` as a date a person reads ("2 January 2027", UTC)."""
    moment = time.gmtime(epoch)
    return f"{moment.tm_mday} {time.strftime('%B %Y', moment)}"


def isodate(epoch: float) -> str:
    """`epoch` as an ISO 8601 UTC timestamp (a `<time datetime>` value)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def isolated(text: str) -> str:
    """`text` between FIRST STRONG ISOLATE and POP DIRECTIONAL ISOLATE: `<bdi>` where no
    markup can be (a page's `<title>`), so a name there cannot reorder the words around it."""
    return f"\u2068{text}\u2069"


#: The languages written right to left when their tag names no script: those of CLDR 49
#: (Babel 2.19's `Locale.text_direction`) whose default script is right to left.
_RIGHT_TO_LEFT_LANGUAGES = frozenset(
    {
        "apc", "ar", "ary", "bal", "bgn", "bqi", "brh", "ckb", "dv", "fa", "he", "ks", "lrc",
        "mzn", "nqo", "ps", "rhg", "sd", "sdh", "skr", "syr", "trw", "ug", "ur", "yi",
    }
)  # fmt: skip
#: The right-to-left scripts of CLDR 49's locales (ISO 15924): a tag's script subtag decides
#: (pa-Arab is right to left, sd-Deva left to right).
_RIGHT_TO_LEFT_SCRIPTS = frozenset({"adlm", "arab", "hebr", "nkoo", "rohg", "syrc", "thaa"})


def text_direction(language: str) -> Literal["ltr", "rtl"]:
    """The direction the language tag `language` ("ar", "he-IL", "pa_Arab") is written in:
    from its script subtag when it has one, else from its language.

    The pages take their direction from the language the catalog declares (its msgid "en"),
    as Django's LANGUAGE_BIDI does from the active language, rather than from a second
    "ltr"/"rtl" msgid a translator must also know to translate: one tag sets both `lang` and
    `dir`, so they cannot disagree. Babel knows the direction too, but is no runtime
    dependency; hence the tables above."""
    subtags = language.strip().lower().replace("_", "-").split("-")
    if len(subtags) > 1 and len(subtags[1]) == 4 and subtags[1].isalpha():
        return "rtl" if subtags[1] in _RIGHT_TO_LEFT_SCRIPTS else "ltr"
    return "rtl" if subtags[0] in _RIGHT_TO_LEFT_LANGUAGES else "ltr"


TemplateFolders = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


class ConsentPages:
    """Default pages, rendered from templates. Override a template, or a method returning a
    complete HTML document.

    `templates`: folders searched before the built-in templates (each holding
    `pactmw/consent.html` and so on). `loader`: a Jinja2 loader searched first of all (Flask's
    `app.jinja_loader`, for one). `translations`: a gettext translations object; English when
    None. Raises `MissingExtra` when Jinja2 is not installed.
    """

    def __init__(
        self,
        templates: TemplateFolders | None = None,
        *,
        loader: Any = None,
        translations: Any = None,
    ) -> None:
        from pactmw.provider._templates import PageTemplates

        if templates is None:
            folders: tuple[str, ...] = ()
        elif isinstance(templates, (str, os.PathLike)):
            folders = (os.fspath(templates),)
        else:
            folders = tuple(os.fspath(folder) for folder in templates)
        self.templates = PageTemplates(
            folders=folders,
            loader=loader,
            translations=translations,
            filters={
                "date": date_text,
                "isodate": isodate,
                "isolated": isolated,
                "direction": text_direction,
            },
        )

    def translate(self, message: str, **params: object) -> str:
        """`message` in the pages' language (the `translations` catalog; as it is without
        one), its `%(name)s` placeholders filled from `params`: the words pactmw passes to
        `error` and `code_entry` (the catalog template, pactmw.pot, lists them)."""
        text: str = self.templates.translations.gettext(message)
        return text % params if params else text

    def render(self, name: str, **context: Any) -> str:
        """Render the template `pactmw/{name}.html` with `context`."""
        return self.templates.render(f"pactmw/{name}.html", context)

    def consent(self, view: ConsentView) -> str:
        """The consent form: one pre-checked checkbox per requested scope, each with its
        conditions (authorization details) under it; Allow and Deny."""
        return self.render("consent", view=view)

    def code_entry(self, action_url: str, error: str = "", code: str = "") -> str:
        """Where a person types the code their personal agent showed them; after a code that
        did not work, `error` says why and `code` is what they sent, to correct."""
        return self.render("code_entry", action_url=action_url, error=error, code=code)

    def result(self, view: ResultView) -> str:
        """After the decision: what was decided, then what the agent can do now."""
        return self.render("result", view=view)

    def connected_agents(self, view: ConnectedAgentsView) -> str:
        """The agents that can act for the signed-in person, each with a Revoke button."""
        return self.render("connected_agents", view=view)

    def error(
        self,
        title: str,
        message: str,
        *,
        code_entry_url: str | None = None,
        manage_url: str | None = None,
    ) -> str:
        """A refusal (expired code, reused link, bad assertion...), with a link on to the
        code entry page (`code_entry_url`) or the connected agents page (`manage_url`) when
        given: the page the person was on, or where its flow starts again."""
        return self.render(
            "error",
            title=title,
            message=message,
            code_entry_url=code_entry_url,
            manage_url=manage_url,
        )


__all__ = [
    "ConnectedAgent",
    "ConnectedAgentsView",
    "ConsentPages",
    "ConsentView",
    "ResultView",
    "TemplateFolders",
    "date_text",
    "isodate",
    "isolated",
    "text_direction",
]
