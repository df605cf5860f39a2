"""Issue 15 point 3: the person's pages render from templates a Brand overrides without
subclassing, autoescaped, accessible and translatable.
"""

from __future__ import annotations

import gettext
import io
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo

from pactmw.config import ConfigError
from pactmw.provider.consent_pages import ConsentPages, ConsentView, ResultView
from pactmw.provider.delegated import ConsentRefused
from pactmw.provider.errors import error_response
from pactmw.provider.settings import ProviderSettings
from tests.support.catalog import POT, extracted_pot
from tests.support.hidden import env_without
from tests.support.page_sites import ADAPTERS, BRAND, page_site, site_settings
from tests.support.translations import catalog_for

HOSTILE_AGENT = "\"><script>alert('pa')</script><img src=x onerror=alert(1)>"
HOSTILE_SCOPE = "</label><svg/onload=alert(2)>"
#: A Brand's own base template, written from scratch: its look, pactmw's blocks.
BRAND_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{% block title %}{% endblock %}</title>
<style>body{background:#fef6e4;font-family:Georgia,serif}</style></head>
<body class="brand-acme"><header id="brand-header">Acme Outdoor, since 1962</header>
<main>{% block content %}{% endblock %}</main></body></html>
"""


def view(**changes: object) -> ConsentView:
    fields: dict[str, object] = {
        "brand_name": "Acme",
        "agent_name": "Demo PA",
        "agent_origin": "https://pa.example",
        "signed_in_as": "jane@example.com",
        "scopes": (("orders:read", "Look up your orders"), ("orders:cancel", "Cancel an order")),
        "decision_url": "https://shop.example/a2a/acme/oauth/consent/decision",
        "session": "s-1",
        "manage_url": "https://shop.example/a2a/acme/oauth/agents",
    }
    fields.update(changes)
    return ConsentView(**fields)  # type: ignore[arg-type]


@pytest.fixture
def brand_templates(tmp_path: Path) -> Path:
    folder = tmp_path / "brand-templates"
    (folder / "pactmw").mkdir(parents=True)
    (folder / "pactmw" / "base.html").write_text(BRAND_BASE)
    return folder


# -- overriding ---------------------------------------------------------------------------------


def test_a_template_folder_dresses_every_page(brand_templates: Path) -> None:
    pages = ConsentPages(templates=brand_templates)
    for html in (
        pages.consent(view()),
        pages.code_entry("https://shop.example/consent"),
        pages.error("Expired", "Start again."),
    ):
        assert '<header id="brand-header">Acme Outdoor, since 1962</header>' in html
        assert "font-family:system-ui" not in html  # the default look is gone
    # The page's own content still comes from pactmw's template.
    assert '<input type="hidden" name="session" value="s-1">' in pages.consent(view())
    assert "font-family:system-ui" in ConsentPages().consent(view())


def test_a_brand_template_is_autoescaped_too(tmp_path: Path) -> None:
    (tmp_path / "pactmw").mkdir()
    (tmp_path / "pactmw" / "consent.html").write_text(
        "<h1>{{ view.agent_name }}</h1>{% for id, text in view.scopes %}<p>{{ text }}</p>"
        "{% endfor %}"
    )
    hostile = view(agent_name=HOSTILE_AGENT, scopes=(("orders:read", HOSTILE_SCOPE),))
    for html in (
        ConsentPages(templates=tmp_path).consent(hostile),
        ConsentPages().consent(hostile),
    ):
        for text in (HOSTILE_AGENT, HOSTILE_SCOPE):
            assert text not in html
        for tag in ("<script", "<svg", "<img"):
            assert tag not in html
        assert "&lt;script&gt;alert(&#39;pa&#39;)&lt;/script&gt;" in html


def test_the_templates_setting_reaches_every_delegating_brand(
    tmp_path: Path, brand_templates: Path
) -> None:
    settings = site_settings(tmp_path, "https://shop.example")
    built = ProviderSettings.from_mapping({**settings, "templates": str(brand_templates)})
    config = built.brands[0].delegation
    assert config is not None
    assert "brand-header" in config.pages.code_entry("x")
    # The delegation table's own folder wins over the top-level one.
    own = tmp_path / "own"
    (own / "pactmw").mkdir(parents=True)
    (own / "pactmw" / "base.html").write_text("OWN {% block content %}{% endblock %}")
    settings["brands"][BRAND]["delegation"]["templates"] = [str(own)]
    built = ProviderSettings.from_mapping({**settings, "templates": str(brand_templates)})
    config = built.brands[0].delegation
    assert config is not None
    assert config.pages.code_entry("x").startswith("OWN ")


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("top", 42, "templates must be a folder, a list of folders or a Jinja2 loader"),
        ("brand", [""], "brands.acme.delegation.templates must be a folder"),
        ("both", "x", "brands.acme.delegation: give pages or templates, not both"),
    ],
)
def test_a_bad_templates_setting_is_named(
    tmp_path: Path, where: str, value: object, message: str
) -> None:
    settings = site_settings(tmp_path, "https://shop.example")
    delegation = settings["brands"][BRAND]["delegation"]
    if where == "top":
        settings["templates"] = value
    else:
        delegation["templates"] = value
    if where == "both":
        delegation["pages"] = "pactmw.provider.consent_pages:ConsentPages"
    with pytest.raises(ConfigError, match=message):
        ProviderSettings.from_mapping(settings)


def test_without_jinja2_the_pages_name_their_extra(tmp_path: Path) -> None:
    code = (
        "from pactmw import MissingExtra\n"
        "from pactmw.provider.consent_pages import ConsentPages\n"
        "try:\n"
        "    ConsentPages()\n"
        "except MissingExtra as exc:\n"
        "    print(exc.extra, exc, sep='|')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env_without(tmp_path, ["jinja2"]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    # "pages needs" was how it read until a custom-server trial.
    assert result.stdout.startswith("pages|rendering pactmw's consent pages needs Jinja2"), (
        result.stdout
    )


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_each_framework_finds_the_brand_templates_its_own_way(
    adapter: str, tmp_path: Path, brand_templates: Path
) -> None:
    """ASGI/WSGI: the `templates` setting; Flask: the app's template folder; Django: the
    project's TEMPLATES directories. A real server each."""
    with page_site(adapter, tmp_path, brand_templates) as (base, _):
        page = httpx.get(f"{base}/a2a/{BRAND}/oauth/consent", timeout=20)
    assert page.status_code == 200, page.text
    assert page.headers["x-frame-options"] == "DENY"
    assert '<header id="brand-header">Acme Outdoor, since 1962</header>' in page.text
    assert 'name="user_code"' in page.text


# -- translation --------------------------------------------------------------------------------


def french() -> gettext.GNUTranslations:
    """A French catalog compiled with Babel (.po entries -> .mo), as a Brand ships one."""
    catalog = Catalog(locale="fr", domain="pactmw")
    catalog.add("Connect your personal agent", "Connectez votre agent personnel")
    catalog.add("Allow", "Autoriser")
    # CLDR's French has three plural forms (one, many, other).
    catalog.add(
        ("%(num)d day", "%(num)d days"), ("%(num)d jour", "%(num)d de jours", "%(num)d jours")
    )
    catalog.add("This approval lasts %(lasts)s.", "Cette autorisation dure %(lasts)s.")
    catalog.add("That did not work", "Cela n'a pas marché")
    catalog.add(
        "This code is unknown, expired or already used.",
        "Ce code est inconnu, expiré ou déjà utilisé.",
    )
    catalog.add(
        "Too many requests came from your network. Please try again in %(minutes)s minutes.",
        "Trop de demandes venues de votre réseau. Réessayez dans %(minutes)s minutes.",
    )
    catalog.add("Enter a code", "Saisir un code")
    catalog.add("en", "fr")
    buffer = io.BytesIO()
    write_mo(buffer, catalog)
    buffer.seek(0)
    return gettext.GNUTranslations(buffer)


def test_a_catalog_translates_the_refusals_too() -> None:
    """The words of an error page come from Python (`ConsentRefused`): translated before the
    page shows them, placeholders filled after; without a catalog, English."""
    fr = ConsentPages(translations=french())
    unusable = error_response(ConsentRefused.unusable_code(), pages=fr)
    assert unusable.status == 400
    assert "<h1>Cela n&#39;a pas marché</h1>" in unusable.body.decode()
    assert "<p>Ce code est inconnu, expiré ou déjà utilisé.</p>" in unusable.body.decode()
    onward = error_response(ConsentRefused.unusable_code(), pages=fr, code_entry_url="/c")
    assert '<a href="/c">Saisir un code</a>' in onward.body.decode()
    limited = error_response(ConsentRefused.rate_limited(600), pages=fr)
    assert (limited.status, ("Retry-After", "600") in limited.headers) == (429, True)
    assert "Réessayez dans 10 minutes." in limited.body.decode()
    english = error_response(ConsentRefused.rate_limited(600))
    assert "Please try again in 10 minutes." in english.body.decode()
    assert fr.translate("Not in the catalog, %(n)s", n=1) == "Not in the catalog, 1"


def test_a_catalog_translates_the_pages() -> None:
    pages = ConsentPages(translations=french())
    entry = pages.code_entry("https://shop.example/consent")
    assert "<h1>Connectez votre agent personnel</h1>" in entry
    assert '<html lang="fr">' in entry
    consent = pages.consent(view())
    assert "Cette autorisation dure 30 jours." in consent
    assert ">Autoriser</button>" in consent
    # English is the source language: no catalog, English text.
    assert "This approval lasts 30 days." in ConsentPages().consent(view())
    assert "Look up your orders" in consent  # the Brand's own words stay as configured


#: Written right to left (CLDR's right-to-left locales): a language subtag, in any case, with a
#: region in either spelling, or an Arabic script subtag (Panjabi as written in Pakistan).
RIGHT_TO_LEFT = ("ar", "he", "fa", "ur", "ps", "yi", "dv", "ckb", "ar-EG", "ar_EG", "AR", "pa-Arab")
#: Written left to right: English and French, Hausa (Latin in CLDR; Arabic only as ha-Arab),
#: Sindhi in Devanagari (a right-to-left language in another script), Panjabi (Gurmukhi).
LEFT_TO_RIGHT = ("en", "fr", "ha", "sd-Deva", "pa")


@pytest.mark.parametrize("language", RIGHT_TO_LEFT)
def test_a_right_to_left_catalog_sets_the_pages_direction(language: str) -> None:
    """`<html dir="rtl">` when the catalog's language is written right to left: the browser
    then lays the page out from the right, punctuation included, on every page."""
    pages = ConsentPages(translations=catalog_for(language))
    for page in (
        pages.code_entry("https://shop.example/consent"),
        pages.consent(view()),
        pages.error("That did not work", "Try again."),
    ):
        assert f'<html lang="{language}" dir="rtl">' in page


@pytest.mark.parametrize("language", LEFT_TO_RIGHT)
def test_a_left_to_right_catalog_leaves_the_direction_alone(language: str) -> None:
    page = ConsentPages(translations=catalog_for(language)).consent(view())
    assert f'<html lang="{language}">' in page
    assert ' dir="rtl"' not in page


def test_a_brand_page_that_sets_its_own_language_gets_its_direction(tmp_path: Path) -> None:
    """A Brand page overriding the `lang` block (a Hebrew page without a catalog) is laid out
    right to left too: the direction follows the block, not only the catalog."""
    folder = tmp_path / "brand-templates"
    (folder / "pactmw").mkdir(parents=True)
    (folder / "pactmw" / "error.html").write_text(
        '{% extends "pactmw/base.html" %}{% block lang %}he{% endblock %}'
        "{% block content %}<h1>{{ title }}</h1>{% endblock %}"
    )
    page = ConsentPages(folder).error("שגיאה", "")
    assert '<html lang="he" dir="rtl">' in page


def test_the_user_code_stays_left_to_right_on_a_right_to_left_page() -> None:
    """The code a person types is written left to right in every language. (An origin's
    `<code>` is made left to right by the pages' style: it is inside translated sentences,
    whose msgids stay as they are; tests/browser/test_right_to_left.py checks it.)"""
    pages = ConsentPages(translations=catalog_for("ar"))
    entry = pages.code_entry("https://shop.example/consent", code="ABCD-EFGH")
    assert '<input id="user_code" dir="ltr"' in entry
    assert "اربط وكيلك الشخصي" in entry


# -- accessibility of the default templates -----------------------------------------------------


def test_default_pages_label_every_control_and_keep_a_heading() -> None:
    pages = ConsentPages()
    consent = pages.consent(view())
    assert consent.count("<h1>") == 1
    assert "<fieldset><legend>" in consent
    # Each checkbox sits inside its label, so the description is its accessible name.
    assert consent.count('<label class="scope"><input type="checkbox"') == 2
    entry = pages.code_entry("https://shop.example/consent", "That is not a valid code.")
    assert '<label for="user_code">' in entry
    assert 'id="user_code"' in entry
    assert 'aria-describedby="code-error code-help"' in entry
    assert 'role="alert" id="code-error"' in entry
    retyped = pages.code_entry("https://shop.example/consent", "Unknown.", '"><b>x</b>')
    assert 'value="&#34;&gt;&lt;b&gt;x&lt;/b&gt;"' in retyped  # the typed code, escaped
    result = pages.result(
        ResultView(
            brand_name="Acme",
            agent_name="Demo PA",
            agent_origin="https://pa.example",
            approved=True,
            granted=(("orders:read", "Look up your orders"),),
            can_now=(("orders:read", "Look up your orders"),),
            until=1_800_000_000.0,
        )
    )
    assert '<time datetime="2027-01-15T08:00:00Z" dir="auto">15 January 2027</time>' in result
    assert result.count("<h1>") == 1


def test_a_scopes_conditions_describe_its_checkbox() -> None:
    """The conditions listed under a scope are its checkbox's description (aria-describedby),
    so a screen reader says them with the checkbox; a scope without any has none."""
    consent = ConsentPages().consent(view(conditions=(("orders:cancel", "Only order A-1001"),)))
    assert 'value="orders:read" checked>' in consent
    assert 'value="orders:cancel" checked aria-describedby="conditions-2">' in consent
    assert '<ul class="conditions" id="conditions-2" data-scope="orders:cancel">' in consent
    assert consent.count("aria-describedby") == 1


def test_the_shipped_catalog_template_lists_every_string() -> None:
    """src/pactmw/provider/locale/pactmw.pot is what translators start from; refresh it with
    `python -m tests.support.catalog` after changing a template's text."""
    assert POT.read_text() == extracted_pot()
    assert 'msgid "Connect your personal agent"' in POT.read_text()
