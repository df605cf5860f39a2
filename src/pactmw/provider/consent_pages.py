"""The consent pages a person sees (HTML). Subclass `ConsentPages` to dress them as the Brand.

Every value is HTML-escaped here; forms use absolute `action` URLs and hidden inputs written
`<input type="hidden" name="X" value="...">`, the shape the reference conformance suite
scrapes. The security headers are added by the Provider, not by these templates.
"""

from __future__ import annotations

import time
from html import escape

from attrs import frozen


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
    #: The page where the person sees and revokes their connected agents, if served.
    manage_url: str | None = None


@frozen
class ResultView:
    """What the page after a decision shows: what was decided and what the agent can do *now*.

    `can_now` is read from the live grant when the page is shown (id, description); it is
    empty when the agent cannot act for the person. `known` is False when the page was
    opened without a valid record of a decision (an old or edited link): then nothing is
    claimed either way.
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


def duration_text(seconds: float) -> str:
    """`2592000` -> "30 days": how long an approval lasts, in the largest whole unit."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = round(seconds / size)
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return "less than a minute"


def date_text(epoch: float) -> str:
    """`epoch` as a date a person reads ("2 January 2027", UTC)."""
    moment = time.gmtime(epoch)
    return f"{moment.tm_mday} {time.strftime('%B %Y', moment)}"


_STYLE = """
body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;
color:#1d2330;line-height:1.5}
h1{font-size:1.4rem}.muted{color:#5b6475}.scope{display:block;margin:.6rem 0}
button{font:inherit;font-size:1rem;padding:.5rem 1.2rem;margin-right:.6rem;border-radius:.4rem;
border:1px solid #8891a5;background:#fff}button.primary{background:#1f5eff;color:#fff;
border-color:#1f5eff}code{background:#eef1f6;padding:.1rem .3rem;border-radius:.2rem}
"""


def _conditions(view: ConsentView, scope: str) -> str:
    items = "".join(f"<li>{escape(text)}</li>" for of, text in view.conditions if of == scope)
    return f'<ul class="conditions" data-scope="{escape(scope)}">{items}</ul>' if items else ""


def _descriptions(scopes: tuple[tuple[str, str], ...]) -> str:
    items = "".join(f"<li>{escape(text)}</li>" for _scope, text in scopes)
    return f"<ul>{items}</ul>"


def _already(view: ConsentView) -> str:
    if not view.already:
        return ""
    return (
        f"<p>{escape(view.agent_name)} can already do this for you, and keeps it whatever"
        f" you choose here:</p>{_descriptions(view.already)}"
    )


def _revoke_hint(manage_url: str | None) -> str:
    if manage_url is None:
        return "You can revoke it at any time."
    return (
        "You can revoke it at any time on your"
        f' <a href="{escape(manage_url)}">connected agents page</a>.'
    )


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


class ConsentPages:
    """Default pages. Override any method; return a complete HTML document."""

    def consent(self, view: ConsentView) -> str:
        """The consent form: one pre-checked checkbox per requested scope, each with its
        conditions (authorization details) under it; Allow and Deny."""
        scopes = "".join(
            f'<label class="scope"><input type="checkbox" name="scope" value="{escape(scope)}"'
            f" checked> {escape(description)}</label>{_conditions(view, scope)}"
            for scope, description in view.scopes
        )
        return _page(
            f"Allow {view.agent_name}?",
            f'<form method="post" action="{escape(view.decision_url)}">'
            f'<input type="hidden" name="session" value="{escape(view.session)}">'
            f"<h1>{escape(view.agent_name)} wants to act for you at {escape(view.brand_name)}</h1>"
            f'<p class="muted">The personal agent from <code>{escape(view.agent_origin)}</code>'
            f" is asking. You are signed in to {escape(view.brand_name)} as"
            f" <strong>{escape(view.signed_in_as)}</strong>.</p>"
            f"{_already(view)}"
            f"<p>Untick anything you do not want to allow:</p>{scopes}"
            f"<p>This approval lasts {escape(duration_text(view.lasts))}."
            f" {_revoke_hint(view.manage_url)}</p>"
            '<p><button class="primary" type="submit" name="decision" value="allow">Allow'
            '</button><button type="submit" name="decision" value="deny">Deny</button></p>'
            "</form>",
        )

    def code_entry(self, action_url: str, error: str = "") -> str:
        """Where a person types the code their personal agent showed them."""
        problem = f'<p class="muted" role="alert">{escape(error)}</p>' if error else ""
        return _page(
            "Connect your personal agent",
            f'<form method="get" action="{escape(action_url)}">'
            "<h1>Connect your personal agent</h1>"
            f"{problem}<p>Enter the code your personal agent showed you.</p>"
            '<p><input name="user_code" autocomplete="off" autocapitalize="characters"'
            ' placeholder="XXXX-XXXX" required></p>'
            '<p><button class="primary" type="submit">Continue</button></p></form>',
        )

    def result(self, view: ResultView) -> str:
        """After the decision: what was decided, then what the agent can do now."""
        agent, brand = escape(view.agent_name), escape(view.brand_name)
        if not view.known:
            title = "Your choice"
            text = (
                "<p>This page no longer shows a decision. What your personal agents can do"
                f" at {brand} is what they were last allowed.</p>"
            )
        elif view.can_now:
            title = "Connected" if view.approved else "Nothing new allowed"
            decided = (
                f"<p>You allowed {agent} to act for you at {brand}.</p>"
                if view.approved
                else "<p>You did not allow anything new. An earlier approval is still live.</p>"
            )
            until = f" until {escape(date_text(view.until))}" if view.until is not None else ""
            text = (
                f"{decided}<p>{agent} can now do this for you at {brand}{until}:</p>"
                f"{_descriptions(view.can_now)}"
            )
        else:
            title = "Not connected"
            text = f"<p>Nothing was shared. {agent} cannot act for you at {brand}.</p>"
        return _page(
            f"Personal agent: {title.lower()}",
            f"<h1>{escape(title)}</h1>{text}<p>{_revoke_hint(view.manage_url)}</p>"
            '<p class="muted">You can close this page.</p>',
        )

    def error(self, title: str, message: str) -> str:
        """A refusal (expired code, reused link, bad assertion...)."""
        return _page(title, f"<h1>{escape(title)}</h1><p>{escape(message)}</p>")


__all__ = [
    "ConsentPages",
    "ConsentView",
    "ResultView",
    "date_text",
    "duration_text",
]
