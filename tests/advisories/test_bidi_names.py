"""Agent names that reorder the page around them ("Trojan Source" spoofing, CVE-2021-42574's
characters on a consent page).

A name is chosen by the agent (Poppy's `client_name`) or by the operator (a PACT agent's
`name`). Escaping keeps markup out, not Unicode's bidirectional controls: an unclosed
RIGHT-TO-LEFT OVERRIDE in a name turned "wants to act for you at Acme" around it backwards.
Every page shows a name isolated (`<bdi>`; U+2068..U+2069 where no markup can be, the
`<title>`), so a right-to-left name stays readable and cannot move the words around it; and
since a stray POP DIRECTIONAL ISOLATE inside a `<bdi>` closes it early in Chromium, a name
holding the explicit controls is refused where it is verified; so are RFC 9396
authorization details, whose agent-chosen values the consent page shows too. The browser half
is tests/browser/test_bidi_names.py.
"""

from __future__ import annotations

import re
from html import escape

import pytest

from pactmw.brand_login import BrandUser, DevelopmentBrandLogin
from pactmw.core.client_metadata import ClientMetadataError, parse_client_metadata
from pactmw.core.encoding import bidi_controls_shown, json_dumps
from pactmw.provider.authorization_details import (
    AuthorizationDetailType,
    InvalidAuthorizationDetails,
    read_authorization_details,
)
from pactmw.provider.consent_pages import (
    ConnectedAgent,
    ConnectedAgentsView,
    ConsentPages,
    ConsentView,
    ResultView,
)

#: Reads "Back Finance" on screen; the override is closed inside the name.
CLOSED_OVERRIDE = "\u202eecnaniF kcaB\u202c"
#: Never closed: without isolation it reverses the rest of the sentence.
OPEN_OVERRIDE = "Helper \u202eot sseccA"
ARABIC = "مساعد شخصي"
NAMES = (CLOSED_OVERRIDE, OPEN_OVERRIDE, ARABIC)
SCOPES = (("orders:read", "Look up your orders"),)
#: The explicit formatting characters: embeddings, overrides, isolates and their ends.
EXPLICIT_CONTROLS = (*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)))


def consent(
    name: str,
    already: tuple[tuple[str, str], ...] = (),
    *,
    brand: str = "Acme",
    who: str = "jane@example.com",
) -> str:
    return ConsentPages().consent(
        ConsentView(
            brand_name=brand,
            agent_name=name,
            agent_origin="https://pa.example",
            signed_in_as=who,
            scopes=SCOPES,
            decision_url="https://shop.example/a2a/acme/oauth/consent/decision",
            session="s-1",
            already=already,
        )
    )


def result(
    name: str,
    *,
    approved: bool,
    can_now: tuple[tuple[str, str], ...],
    brand: str = "Acme",
    known: bool = True,
) -> str:
    return ConsentPages().result(
        ResultView(
            brand_name=brand,
            agent_name=name,
            agent_origin="https://pa.example",
            approved=approved,
            granted=SCOPES if approved else (),
            can_now=can_now,
            until=1_800_000_000.0 if can_now else None,
            known=known,
        )
    )


def connected(
    name: str,
    revoked: str = "",
    *,
    brand: str = "Acme",
    who: str = "jane@example.com",
    agents: bool = True,
    agent_user: str = "pa-user-1",
) -> str:
    agent = ConnectedAgent(
        grant_id="g-1",
        agent_name=name,
        agent_origin="https://pa.example",
        scopes=SCOPES,
        since=1_790_000_000.0,
        last_used=None,
        expires_at=1_800_000_000.0,
        agent_user=agent_user,
    )
    return ConsentPages().connected_agents(
        ConnectedAgentsView(
            brand_name=brand,
            signed_in_as=who,
            agents=(agent,) if agents else (),
            action_url="https://shop.example/a2a/acme/oauth/agents",
            session="s-1",
            revoked=revoked,
        )
    )


def body_of(html: str) -> str:
    return html.split("<body>", 1)[1]


def title_of(html: str) -> str:
    found = re.search(r"<title>(.*?)</title>", html, re.DOTALL)
    assert found is not None
    return found.group(1)


def isolated_everywhere(html: str, name: str, shown: int) -> None:
    """`name` shows `shown` times in the page's body, each time as the whole of a `<bdi>`."""
    body = body_of(html)
    assert body.count(escape(name)) == shown, body
    assert body.count(f"<bdi>{escape(name)}</bdi>") == shown, body


@pytest.mark.parametrize("name", NAMES)
def test_the_consent_page_isolates_the_name(name: str) -> None:
    page = consent(name)
    isolated_everywhere(page, name, 1)  # the heading
    # No markup in a title: the Unicode isolates (FIRST STRONG ISOLATE .. POP) do the same.
    assert title_of(page) == f"Allow \u2068{escape(name)}\u2069?"


@pytest.mark.parametrize("name", NAMES)
def test_the_step_up_consent_page_isolates_the_name_in_what_it_already_can_do(name: str) -> None:
    page = consent(name, already=(("orders:track", "Follow your deliveries"),))
    isolated_everywhere(page, name, 2)  # the heading and "... can already do this for you"
    assert f"<bdi>{escape(name)}</bdi> can already do this for you" in page


@pytest.mark.parametrize("name", NAMES)
def test_the_result_pages_isolate_the_name(name: str) -> None:
    allowed = result(name, approved=True, can_now=SCOPES)
    isolated_everywhere(allowed, name, 2)  # "You allowed ..." and "... can now do this"
    assert f"You allowed <bdi>{escape(name)}</bdi> to act for you at <bdi>Acme</bdi>." in allowed
    kept = result(name, approved=False, can_now=SCOPES)
    isolated_everywhere(kept, name, 1)
    nothing = result(name, approved=False, can_now=())
    isolated_everywhere(nothing, name, 1)
    assert f"Nothing was shared. <bdi>{escape(name)}</bdi> cannot act for you" in nothing


@pytest.mark.parametrize("name", NAMES)
def test_the_connected_agents_page_isolates_the_name(name: str) -> None:
    page = connected(name)
    isolated_everywhere(page, name, 2)  # its heading and its Revoke button
    assert f"Revoke <bdi>{escape(name)}</bdi></button>" in page
    after_revoke = connected(name, revoked=name)
    isolated_everywhere(after_revoke, name, 3)
    assert f"<bdi>{escape(name)}</bdi> can no longer act for you." in after_revoke


@pytest.mark.parametrize("name", NAMES)
def test_the_connected_agents_page_isolates_the_persons_user_id_at_the_agent(name: str) -> None:
    # The agent chose it (its token's `sub`): shown once, in its card's row, isolated.
    # Its bidirectional controls are shown as code points (the test below), then isolated.
    isolated_everywhere(connected("Demo PA", agent_user=name), bidi_controls_shown(name), 1)


@pytest.mark.parametrize("name", NAMES)
def test_the_brand_name_is_isolated_on_every_page(name: str) -> None:
    # Reported: the Brand's display name went into the sentences bare, so an Arabic name (or
    # an operator's stray override) reordered "wants to act for you at ..." around it.
    page = consent("Helper", brand=name)
    isolated_everywhere(page, name, 2)  # the heading and "You are signed in to ..."
    assert f"wants to act for you at <bdi>{escape(name)}</bdi></h1>" in page
    allowed = result("Helper", approved=True, can_now=SCOPES, brand=name)
    isolated_everywhere(allowed, name, 2)  # "You allowed ..." and "... can now do this"
    isolated_everywhere(result("Helper", approved=False, can_now=(), brand=name), name, 1)
    isolated_everywhere(
        result("Helper", approved=False, can_now=(), brand=name, known=False), name, 1
    )
    listed = connected("Helper", brand=name)
    isolated_everywhere(listed, name, 2)  # the heading and "You are signed in to ..."
    assert title_of(listed) == f"Agents connected to \u2068{escape(name)}\u2069"
    isolated_everywhere(connected("Helper", brand=name, agents=False), name, 3)


@pytest.mark.parametrize("name", NAMES)
def test_the_signed_in_label_is_isolated(name: str) -> None:
    # The account label comes from the Brand's sign-in (an email, a display name): in
    # "You are signed in to Acme as ...", it is a name like any other.
    for page in (consent("Helper", who=name), connected("Helper", who=name)):
        isolated_everywhere(page, name, 1)
        assert f"as <strong><bdi>{escape(name)}</bdi></strong>." in page


@pytest.mark.parametrize("name", NAMES)
def test_the_development_brand_login_isolates_the_brand_and_the_person(name: str) -> None:
    # The brand-mode sign-in pages a Brand runs in development show the same two names.
    user = BrandUser(username="jane", password="pw", account="acct-1", email=name)
    with DevelopmentBrandLogin(
        consent_url="https://shop.example/a2a/acme/oauth/consent", users=[user], brand_name=name
    ) as login:
        sign_in = login.login_page(login.consent_url, "")
        handoff = login.handoff_page(user, "x.y.z")
    isolated_everywhere(sign_in, name, 1)
    assert f"<h1>Sign in to <bdi>{escape(name)}</bdi></h1>" in sign_in
    assert title_of(sign_in) == f"Sign in to \u2068{escape(name)}\u2069"
    isolated_everywhere(handoff, name, 1)  # the person (the Brand is in the title only)
    assert f"Signed in as <strong><bdi>{escape(name)}</bdi></strong>." in handoff
    assert title_of(handoff) == f"Signed in to \u2068{escape(name)}\u2069"


def metadata(client_name: str) -> bytes:
    return json_dumps(
        {
            "client_id": "https://pa.example/client.json",
            "client_name": client_name,
            "jwks_uri": "https://pa.example/jwks.json",
        }
    )


@pytest.mark.parametrize("control", EXPLICIT_CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_a_poppy_client_name_with_an_explicit_bidi_control_is_refused(control: str) -> None:
    # U+2069 alone is why: inside a <bdi> it closes the isolate, and an override after it
    # reorders the page again. The others need no place in a label the page isolates.
    with pytest.raises(ClientMetadataError) as refused:
        parse_client_metadata(
            "https://pa.example/client.json", metadata(f"Helper{control}X"), "application/json"
        )
    assert refused.value.code == "invalid_client_metadata"
    assert f"U+{ord(control):04X}" in str(refused.value)


@pytest.mark.parametrize(
    "name",
    [
        ARABIC,
        "עוזר אישי",
        "ACME \u200fעוזר",  # RIGHT-TO-LEFT MARK: no state, stays inside the isolate
        "\u0645\u0633\u0627\u0639\u062f\u061c 2",  # ARABIC LETTER MARK, likewise
        "\u06a9\u0627\u0631\u200c\u06af\u0632\u0627\u0631",  # Persian needs ZWNJ (Cf)
        "Dev \U0001f469\u200d\U0001f4bb",  # a ZWJ emoji sequence
    ],
)
def test_a_poppy_client_name_in_any_script_is_kept(name: str) -> None:
    verified = parse_client_metadata(
        "https://pa.example/client.json", metadata(name), "application/json"
    )
    assert verified.client_name == name


PAYMENT = AuthorizationDetailType(
    type="https://shop.example/payment",
    scope="orders:pay",
    schema={"type": "object", "properties": {"type": {"type": "string"}}},
)


@pytest.mark.parametrize(
    "entry",
    [
        {"payee": "\u202eBob", "amount": 51},  # the page would show "15 :tnuoma ;boB"
        {"payees": ["Ann", {"name": "Bob\u2069\u202e"}]},
        {"\u2067note": "x"},
    ],
)
def test_authorization_details_with_a_bidi_control_anywhere_are_refused(
    entry: dict[str, object],
) -> None:
    # An entry's values are agent-chosen text on the consent page too.
    raw = json_dumps([{"type": PAYMENT.type, **entry}]).decode()
    with pytest.raises(InvalidAuthorizationDetails) as refused:
        read_authorization_details(raw, [PAYMENT], ["orders:pay"])
    assert "authorization_details[0] must not hold bidirectional controls (U+" in str(refused.value)
    kept = json_dumps([{"type": PAYMENT.type, "payee": "مساعد \u200f2", "amount": 51}]).decode()
    assert (
        read_authorization_details(kept, [PAYMENT], ["orders:pay"])[0]["payee"] == "مساعد \u200f2"
    )


@pytest.mark.parametrize("sub", ["\u2069\u202eX", "user\u202e1", "\u2066a\u2069"])
def test_bidi_controls_in_the_persons_user_id_at_the_agent_are_shown_not_obeyed(sub: str) -> None:
    """The agent chose the id (its token's `sub`), and nothing refused controls in it: a POP
    DIRECTIONAL ISOLATE ends the `<bdi>` early in Chromium, and an override after it would
    reorder the card's words. Each control is shown as its code point instead, as code
    review tools show hidden characters."""
    page = body_of(connected("Demo PA", agent_user=sub))  # the title isolates names itself
    assert not any(control in page for control in EXPLICIT_CONTROLS)
    shown = "".join(f"[U+{ord(c):04X}]" if c in "\u202e\u2066\u2069" else c for c in sub)
    assert f"<bdi>{escape(shown)}</bdi>" in page
