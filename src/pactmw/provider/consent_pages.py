"""The consent pages a person sees (HTML). Subclass `ConsentPages` to dress them as the Brand.

Every value is HTML-escaped here; forms use absolute `action` URLs and hidden inputs written
`<input type="hidden" name="X" value="...">`, the shape the reference conformance suite
scrapes. The security headers are added by the Provider, not by these templates.
"""

from __future__ import annotations

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
            f"<p>Untick anything you do not want to allow:</p>{scopes}"
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

    def result(self, approved: bool, brand_name: str, scopes: tuple[str, ...]) -> str:
        """After the decision."""
        if approved:
            listed = ", ".join(f"<code>{escape(scope)}</code>" for scope in scopes)
            text = f"Done. Your personal agent may now use {listed} at {escape(brand_name)}."
        else:
            text = (
                "Nothing was shared. Your personal agent cannot act for you at "
                f"{escape(brand_name)}."
            )
        return _page(
            "Personal agent " + ("connected" if approved else "not connected"),
            f"<h1>{'Connected' if approved else 'Not connected'}</h1><p>{text}</p>"
            '<p class="muted">You can close this page.</p>',
        )

    def error(self, title: str, message: str) -> str:
        """A refusal (expired code, reused link, bad assertion...)."""
        return _page(title, f"<h1>{escape(title)}</h1><p>{escape(message)}</p>")


__all__ = [
    "ConsentPages",
    "ConsentView",
]
