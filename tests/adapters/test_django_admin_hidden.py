"""pactmw's Django admin appears only where it manages something: `PACTMW` lists `brands`
and keeps the state in the site's database (`store = "django"` or `"django:ALIAS"`).

A fresh `django-admin startproject` site set up as docs/getting-started/django.md first
says (the app, the middleware, `PACTMW` without `brands`), or with the guide's `brands` but
the default store (a sqlite file of its own): the admin index has no pactmw section, and
every pactmw admin URL, read or posted, is Django's 403, never a 500 from a Provider that
does not exist. tests/adapters/test_django_admin_site.py shows the admin at work where the
state is in the site's database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.adapters.django_sites import guide_block, manage, new_site
from tests.support.samples import find_samples

#: The guide's first settings block ("Add the app and the middleware"), up to its views.
GUIDE_SAMPLE = "django"


def _middleware_only() -> str:
    """The guide's first settings, added to what startproject wrote (its `# ...` stands for
    the project's own apps and middleware)."""
    code = find_samples()[GUIDE_SAMPLE].code
    settings, views, _ = code.partition("# views.py")
    assert views, code
    guide: dict[str, Any] = {}
    exec(settings, guide)
    assert "brands" not in guide["PACTMW"], guide["PACTMW"]
    return (
        f"INSTALLED_APPS += {guide['INSTALLED_APPS']!r}\n"
        f"MIDDLEWARE += {guide['MIDDLEWARE']!r}\n"
        f"PACTMW = {guide['PACTMW']!r}\n"
    )


def _brands_default_store() -> str:
    """The guide's settings for the admin, without its `"store": "django"` line."""
    block = guide_block("the end of mysite/settings.py")
    kept = [line for line in block.splitlines() if not line.lstrip().startswith('"store":')]
    assert len(kept) == len(block.splitlines()) - 1, block
    return "\n".join(kept) + "\n"


@pytest.fixture(scope="module", params=["middleware only", "brands, default store"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("site")
    if request.param == "middleware only":
        env = new_site(root, _middleware_only(), "")
    else:
        env = new_site(root, _brands_default_store(), guide_block("the end of mysite/urls.py"))
    return root, env


#: The superuser reads and posts every pactmw admin page; a request that raises is printed
#: as its 500 rather than ending the shell.
VISIT = """
import re
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment

setup_test_environment()
client = Client(raise_request_exception=False)
client.force_login(get_user_model().objects.get(username="ops"))
index = client.get("/admin/")
links = sorted(set(re.findall(r'href="(/admin/[a-z]+/)', index.content.decode())))
print("index:", index.status_code, " ".join(links))
print("named:", "pactmw" in index.content.decode().lower())
form = {
    "issuer": "https://pa.example",
    "jwks_uri": "https://pa.example/.well-known/jwks.json",
    "enabled": "on",
    "_save": "Save",
    "action": "delete_selected",
    "_selected_action": ["https://pa.example"],
    "index": "0",
}
for model in ("registeredagent", "agentoverride", "grant", "conversation", "messageid"):
    for page in ("", "add/"):
        url = f"/admin/pactmw/{model}/{page}"
        print("answer:", url, client.get(url).status_code, client.post(url, form).status_code)
print("app:", client.get("/admin/pactmw/").status_code)

# A site's own admin for the agents, as the guide's sites subclass it, keeps the rule.
from django.contrib import admin
from pactmw.adapters.django.admin import RegisteredAgentAdmin, RegisteredAgentForm
from pactmw.adapters.django.models import RegisteredAgent

class SiteAgentForm(RegisteredAgentForm):
    pass

class SiteAgentAdmin(RegisteredAgentAdmin):
    form = SiteAgentForm

admin.site.unregister(RegisteredAgent)
admin.site.register(RegisteredAgent, SiteAgentAdmin)
url = "/admin/pactmw/registeredagent/add/"
print("subclass:", client.get(url).status_code, client.post(url, form).status_code)
"""


def test_the_admin_shows_nothing_of_pactmw(site: tuple[Path, dict[str, str]]) -> None:
    root, env = site
    out = manage(root, env, "shell", "-c", VISIT).splitlines()
    index = next(line for line in out if line.startswith("index:"))
    assert index == "index: 200 /admin/auth/", index  # the site's own apps, pactmw's not
    answers = [line for line in out if line.startswith("answer:")]
    assert answers == [
        f"answer: /admin/pactmw/{model}/{page} 403 403"
        for model in ("registeredagent", "agentoverride", "grant", "conversation", "messageid")
        for page in ("", "add/")
    ]
    assert "named: False" in out
    assert "app: 404" in out  # Django's page for an app with nothing the user may see
    assert "subclass: 403 403" in out


#: The rule reads `PACTMW` as written, at each request: the index of the same site under
#: other settings (`override_settings`, as a test or a settings change would).
RULE = """
import re
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.test.utils import setup_test_environment
from pactmw.adapters.django.admin import state_in_site_database

setup_test_environment()
client = Client(raise_request_exception=False)
client.force_login(get_user_model().objects.get(username="ops"))
BRANDS = {"shop": {"handler": "mysite.bot:support_bot"}}
BASE = {"base_url": "http://127.0.0.1:8000", "audience": "http://127.0.0.1:8000/a2a"}
CASES = {
    "django": {**BASE, "brands": BRANDS, "store": "django"},
    "django:ALIAS": {**BASE, "brands": BRANDS, "store": "django:default"},
    "no brands": {**BASE, "store": "django"},
    "brands not a table": {**BASE, "brands": "shop", "store": "django"},
    "default store": {**BASE, "brands": BRANDS},
    "sqlite file": {**BASE, "brands": BRANDS, "store": "sqlite:///pactmw.db"},
    "memory": {**BASE, "brands": BRANDS, "store": "memory://"},
    "postgresql": {**BASE, "brands": BRANDS, "store": "postgresql://db.example/pactmw"},
    "bad alias": {**BASE, "brands": BRANDS, "store": "django:not an alias"},
    "bad url": {**BASE, "brands": BRANDS, "store": "django://"},
    "not a string": {**BASE, "brands": BRANDS, "store": 42},
    "not a dict": ["django"],
}
for case, value in CASES.items():
    with override_settings(PACTMW=value):
        page = client.get("/admin/").content.decode()
        shown = "/admin/pactmw/grant/" in page
        print("rule:", case, state_in_site_database(), shown)
"""


def test_the_admin_appears_where_the_state_is_in_the_site_database(
    site: tuple[Path, dict[str, str]],
) -> None:
    root, env = site
    out = manage(root, env, "shell", "-c", RULE).splitlines()
    assert [line for line in out if line.startswith("rule:")] == [
        "rule: django True True",
        "rule: django:ALIAS True True",
        "rule: no brands False False",
        "rule: brands not a table False False",
        "rule: default store False False",
        "rule: sqlite file False False",
        "rule: memory False False",
        "rule: postgresql False False",
        "rule: bad alias False False",
        "rule: bad url False False",
        "rule: not a string False False",
        "rule: not a dict False False",
    ]


#: Under a server that runs no system checks (gunicorn, uvicorn), `PACTMW` may list brands
#: in the site's database and still not build. The
#: admin's pactmw pages then answer the 503 pactmw's own paths answer, never a 500.
#: Here the broken key is a typo, the first mistake `manage.py check` reports (pactmw.E001).
UNBUILT = """
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.test.utils import setup_test_environment
from pactmw.adapters.django._config import configured

setup_test_environment()
client = Client(raise_request_exception=False)
client.force_login(get_user_model().objects.get(username="ops"))
BROKEN = {
    "base_url": "http://127.0.0.1:8000",
    "audiance": "http://127.0.0.1:8000/a2a",
    "brands": {"shop": {"handler": "mysite.bot:support_bot"}},
    "store": "django",
}
FORM = {
    "issuer": "https://pa.example",
    "jwks_uri": "https://pa.example/.well-known/jwks.json",
    "enabled": "on",
    "_save": "Save",
}
with override_settings(PACTMW=BROKEN):
    print("index:", client.get("/admin/").status_code)
    for model in ("registeredagent", "agentoverride", "grant", "conversation", "messageid"):
        for page in ("", "add/"):
            url = f"/admin/pactmw/{model}/{page}"
            print("answer:", url, client.get(url).status_code, client.post(url, FORM).status_code)
    print("built:", type(configured.problem).__name__)
    print("site:", client.get("/admin/auth/user/").status_code)
"""


def test_the_admin_answers_503_while_the_settings_do_not_build(
    site: tuple[Path, dict[str, str]],
) -> None:
    root, env = site
    out = manage(root, env, "shell", "-c", UNBUILT).splitlines()
    assert "index: 200" in out
    assert "built: ConfigError" in out  # the settings were read, and do not build
    answers = [line for line in out if line.startswith("answer:")]
    # The lists are read from the database alone; adding an agent or an override asks the
    # Provider whether it may be added, and gets the 503.
    assert answers == [
        "answer: /admin/pactmw/registeredagent/ 200 200",
        "answer: /admin/pactmw/registeredagent/add/ 200 503",
        "answer: /admin/pactmw/agentoverride/ 200 200",
        "answer: /admin/pactmw/agentoverride/add/ 200 503",
        "answer: /admin/pactmw/grant/ 200 200",
        "answer: /admin/pactmw/grant/add/ 403 403",
        "answer: /admin/pactmw/conversation/ 200 200",
        "answer: /admin/pactmw/conversation/add/ 403 403",
        "answer: /admin/pactmw/messageid/ 200 200",
        "answer: /admin/pactmw/messageid/add/ 403 403",
    ], out
    assert "site: 200" in out  # the rest of the admin works on
