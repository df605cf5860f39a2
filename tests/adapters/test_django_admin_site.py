"""A fresh `django-admin startproject` site follows docs/getting-started/django.md ("Keep
pactmw's state in your database") to admin-managed agents and grants, on sqlite and on
PostgreSQL: the page's own blocks (signing key, bot, settings, urls) written into the site,
`manage.py migrate`, a superuser who logs in to the admin of a real `runserver` over HTTP,
`manage.py pactmw` in other processes seeing each change, and the agent the admin adds,
blocks and allows answered accordingly by the site at its next request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from tests.adapters.django_admin_scripts import (
    ALIAS_STATE,
    CONVERSATION_PAGES,
    LIST_QUERIES,
    LOST_RACE,
    NUL_VALUES,
    PERMISSIONS,
    SITE_RULE,
)
from tests.adapters.django_sites import (
    PASSWORD,
    TEST_SETTINGS,
    guide_block,
    manage,
    new_site,
    runserver,
    shell,
)
from tests.support.agent import identity_token, user_message
from tests.support.jwks_server import JwksServer
from tests.support.net import loopback_client
from tests.support.parties import ISSUER
from tests.support.pg import PostgresServer, postgres_server_fixture

# Each test here starts Django processes one after another (startproject, migrate,
# createsuperuser, runserver, a dozen `manage.py` runs): 145 to 155 s with its setup on a
# 2-core machine with one other test run beside it, past the suite's 180 s when more share
# it. Every step has its own bound (120 s a command, 30 s a request, 60 s for the server to
# listen), so a hang fails there; the whole test's budget only has to cover a loaded machine.
pytestmark = pytest.mark.timeout(600)

postgres_server = postgres_server_fixture(scope="module")

SECRET_TEXT = "my card number is in this order note"


@pytest.fixture(params=["sqlite", "postgres"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    settings_tail = guide_block("the end of mysite/settings.py") + TEST_SETTINGS
    server: PostgresServer | None = None
    dbname = ""
    if request.param == "postgres":
        from psycopg.conninfo import conninfo_to_dict

        server = request.getfixturevalue("postgres_server")
        dsn = server.create_database()
        params = conninfo_to_dict(dsn)
        dbname = str(params["dbname"])
        database = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": dbname,
            "USER": params.get("user", ""),
            "HOST": params.get("host", ""),
            "PORT": params.get("port", ""),
        }
        settings_tail += f"DATABASES = {{'default': {database!r}}}\n"
    env = new_site(tmp_path, settings_tail, guide_block("the end of mysite/urls.py"))
    try:
        yield tmp_path, env
    finally:
        if server is not None:
            server.drop_database(dbname)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found, page[:2000]
    return found.group(1)


def _login(base: str) -> httpx.Client:
    client = loopback_client(base_url=base, timeout=30)
    page = client.get("/admin/login/")
    answer = client.post(
        "/admin/login/?next=/admin/",
        data={
            "csrfmiddlewaretoken": _csrf(page.text),
            "username": "ops",
            "password": PASSWORD,
            "next": "/admin/",
        },
    )
    assert answer.status_code == 302, answer.text[:2000]
    assert answer.headers["location"] == "/admin/"
    return client


def _messages(page: str) -> list[tuple[str, str]]:
    """The messages a page shows: (level, text) each, in order (Django capitalizes them)."""
    shown = re.search(r'<ul class="messagelist">(.*?)</ul>', page, re.S)
    found = re.findall(r'<li class="([^"]*)">(.*?)</li>', shown.group(1) if shown else "", re.S)
    return [(level, text.strip()) for level, text in found]


def _action(client: httpx.Client, changelist: str, action: str, *selected: str) -> str:
    page = client.get(changelist)
    answer = client.post(
        changelist,
        data={
            "csrfmiddlewaretoken": _csrf(page.text),
            "action": action,
            "_selected_action": list(selected),
            "index": "0",
        },
        follow_redirects=True,
    )
    assert answer.status_code == 200, answer.text[:2000]
    return answer.text.lower()  # the admin capitalizes messages ("Blocked ...")


def _record_page(client: httpx.Client, model: str, key: str) -> str:
    """The admin's page of one row (reached from its list, as a person would): shown, and
    with times as the lists show them, never as epoch seconds."""
    listed = client.get(f"/admin/pactmw/{model}/").text
    links = re.findall(
        rf'href="(/admin/pactmw/{model}/[^"]+/change/)[^"]*">'
        r'(?:<span title="[^"]*">)?([^<]+)(?:</span>)?</a>',
        listed,
    )
    (link,) = [href for href, text in links if text == key]
    page = client.get(link)
    assert page.status_code == 200, page.text[:3000]
    assert not re.search(r"\b1\d{9}\.\d+\b", page.text), "a time shown as epoch seconds"
    return page.text


def _a_failed_validation_writes_nothing(site: Path, env: dict[str, str]) -> list[str]:
    # The last lines: Django 5.2's shell first says what it imported.
    return shell(site, env, SITE_RULE).splitlines()[-4:]


def _the_lists_queries(site: Path, env: dict[str, str]) -> list[str]:
    return shell(site, env, LIST_QUERIES).splitlines()[-8:]


def _a_lost_race_only_warns(site: Path, env: dict[str, str]) -> list[str]:
    return [
        line
        for line in shell(site, env, LOST_RACE).splitlines()
        if line.startswith(("message:", "status:", "logged:", "theirs:"))
    ]


def _answer(base: str, key: PrivateJWK) -> int:
    """What the site answers the runtime agent's `message:send` (200 from the guide's bot,
    or 401 with PACT's challenge)."""
    token = identity_token(key, ISSUER, "http://127.0.0.1:8000/a2a", sub="user-1")
    with loopback_client(base_url=base, timeout=30) as agent:
        response = agent.post(
            "/a2a/shop/message:send",
            json={"message": user_message("Where is my order?")},
            headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
        )
    if response.status_code == 200:
        reply = response.json()["message"]
        assert reply["parts"][0]["text"] == "You asked: Where is my order?", reply
    else:
        assert response.headers["www-authenticate"] == 'Bearer realm="a2a"', response.text
    return response.status_code


def test_agents_and_grants_are_managed_in_the_admin(site: tuple[Path, dict[str, str]]) -> None:
    root, env = site
    key = generate_private_jwk("ES256", kid="runtime-1")
    port, server = runserver(root, env, "runserver")
    base = f"http://127.0.0.1:{port}"
    with server, JwksServer(public_key_set([key])) as jwks:
        client = _login(base)
        assert _answer(base, key) == 401  # not configured, not added yet

        # Add an agent at runtime. A JWKS URL the key fetcher may never reach is refused
        # with the same words as `pactmw agents add`, and nothing is written.
        add = "/admin/pactmw/registeredagent/add/"
        form = client.get(add).text
        assert '<label class="required" for="id_jwks_uri">JWKS URL:</label>' in form
        refused = client.post(
            add,
            data={
                "csrfmiddlewaretoken": _csrf(form),
                "issuer": "https://evil.example",
                "jwks_uri": "http://169.254.169.254/latest/keys",
                "name": "Metadata",
                "_save": "Save",
            },
        )
        assert refused.status_code == 200
        assert "nothing added: " in refused.text
        assert "must be https" in refused.text
        assert _a_failed_validation_writes_nothing(root, env) == [
            "refused", "not-stored", "valid", "not-stored"
        ]  # fmt: skip
        lost, status, logged, theirs = _a_lost_race_only_warns(root, env)
        assert lost.startswith(
            "message: warning | Nothing added: https://raced.example was already added on "
        ), lost
        assert status == "status: 200 [('/admin/pactmw/registeredagent/', 302)]"
        assert (logged, theirs) == ("logged: 0", "theirs: theirs")
        added = client.post(
            add,
            data={
                "csrfmiddlewaretoken": _csrf(client.get(add).text),
                "issuer": ISSUER,
                "jwks_uri": jwks.url,
                "name": "Personal agent",
                "_save": "Save",
            },
        )
        assert added.status_code == 302, added.text[:3000]
        # What the add did, in the commands' words, and only that: no "was added
        # successfully" repeating it.
        assert _messages(client.get(added.headers["location"]).text) == [
            ("success", f"Added {ISSUER} (keys from {jwks.url})")
        ]
        listed = json.loads(manage(root, env, "pactmw", "agents", "list", "--json"))
        assert [(a["issuer"], a["source"], a["status"]) for a in listed] == [
            (ISSUER, "runtime", "allowed")
        ]
        assert _answer(base, key) == 200  # verified like a configured agent, keys fetched

        # Block it: every process sees it at once (here, another manage.py).
        page = _action(client, "/admin/pactmw/registeredagent/", "block_agents", ISSUER)
        assert f"blocked {ISSUER}" in page
        listed = json.loads(manage(root, env, "pactmw", "agents", "list", "--json"))
        assert [(a["issuer"], a["status"]) for a in listed] == [(ISSUER, "blocked")]
        assert _answer(base, key) == 401  # the site's next request sees the block
        page = _action(client, "/admin/pactmw/registeredagent/", "allow_agents", ISSUER)
        assert f"allowed {ISSUER}" in page
        listed = json.loads(manage(root, env, "pactmw", "agents", "list", "--json"))
        assert [(a["issuer"], a["status"]) for a in listed] == [(ISSUER, "allowed")]
        assert _answer(base, key) == 200
        # The agent's own page and its switch's: read-only, the time as the list shows it.
        for model in ("registeredagent", "agentoverride"):
            assert _record_page(client, model, ISSUER).count("UTC") == (
                1 if model == "registeredagent" else 0
            )

        # Agent overrides: block any configured or added issuer by name; an issuer nobody
        # configured or added is refused, in the commands' words.
        access = "/admin/pactmw/agentoverride/add/"
        # The issuer is one line, as on the agents' add form, not a multi-line text box.
        assert '<input type="url" name="issuer"' in client.get(access).text
        unknown = client.post(
            access,
            data={
                "csrfmiddlewaretoken": _csrf(client.get(access).text),
                "issuer": "https://stranger.example",
                "_save": "Save",
            },
        )
        assert unknown.status_code == 200
        assert "nothing blocked: no agent https://stranger.example" in unknown.text
        blocked = client.post(
            access,
            data={
                "csrfmiddlewaretoken": _csrf(client.get(access).text),
                "issuer": ISSUER,
                "_save": "Save",
            },  # "enabled" unticked: block
        )
        assert blocked.status_code == 302, blocked.text[:3000]
        assert _messages(client.get(blocked.headers["location"]).text) == [
            ("success", f"Blocked {ISSUER}")
        ]
        listed = json.loads(manage(root, env, "pactmw", "agents", "list", "--json"))
        assert [(a["issuer"], a["status"]) for a in listed] == [(ISSUER, "blocked")]
        page = _action(client, "/admin/pactmw/agentoverride/", "allow_agents", ISSUER)
        assert f"allowed {ISSUER}" in page
        listed = json.loads(manage(root, env, "pactmw", "agents", "list", "--json"))
        assert [(a["issuer"], a["status"]) for a in listed] == [(ISSUER, "allowed")]

        # Remove it (Django's delete, confirmed): agent_admin.remove_agent forgets it.
        changelist = "/admin/pactmw/registeredagent/"
        confirm = client.post(
            changelist,
            data={
                "csrfmiddlewaretoken": _csrf(client.get(changelist).text),
                "action": "delete_selected",
                "_selected_action": [ISSUER],
                "index": "0",
            },
        )
        assert confirm.status_code == 200
        assert "Are you sure" in confirm.text
        removed = client.post(
            changelist,
            data={
                "csrfmiddlewaretoken": _csrf(confirm.text),
                "action": "delete_selected",
                "_selected_action": [ISSUER],
                "post": "yes",
            },
            follow_redirects=True,
        )
        assert _messages(removed.text) == [("success", f"Removed {ISSUER}")]
        assert json.loads(manage(root, env, "pactmw", "agents", "list", "--json")) == []
        assert _answer(base, key) == 401

        # Grants of two accounts; the admin lists one account's, and revokes through the
        # Provider (audited), which manage.py pactmw grants then reports.
        shell(
            root,
            env,
            "for n in ('1', '2'):\n"
            "    store.upsert_grant(grant_id='g-' + n, brand_id='shop', account='acct-' + n,"
            f" client_id={ISSUER!r}, pa_sub='u', scopes=('orders:read',), now=now,"
            " expires_at=now + 3600)\n",
        )
        mine = client.get("/admin/pactmw/grant/", params={"account": "acct-1"})
        assert mine.status_code == 200
        assert "g-1" in mine.text
        assert "g-2" not in mine.text
        page = _action(client, "/admin/pactmw/grant/?account=acct-1", "revoke_grants", "g-1")
        assert "revoked g-1 (brand shop, account acct-1" in page
        grants = json.loads(manage(root, env, "pactmw", "grants", "list", "--all", "--json"))
        assert {g["grant_id"]: g["status"] for g in grants} == {"g-1": "revoked", "g-2": "live"}
        revoked = _record_page(client, "grant", "g-1")
        assert re.search(r"<label>Status:</label>\s*<div class=\"readonly\">revoked</div>", revoked)
        assert revoked.count("UTC") == 4  # created, updated, expires, revoked; never used
        # The Provider's own audit event, as provider.revoke_grant emits it.
        audited = (root / "runserver.log").read_text()
        assert f"agent.grant_revoked brand=shop issuer={ISSUER} grant=g-1" in audited
        history = shell(
            root,
            env,
            "from django.contrib.admin.models import LogEntry\n"
            "print([(e.user.username, e.object_id, e.get_change_message())"
            " for e in LogEntry.objects.filter(object_id='g-1')])",
        )
        assert "('ops', 'g-1', 'revoked')" in history
        # The lists' computed columns rule on what the list read: the queries a page costs do
        # not grow with its rows (they asked the store again for each row). The grants list
        # filters by status as the status column tells it.
        assert _the_lists_queries(root, env) == [
            "registeredagent: queries 5 5; access: allowed 5, blocked 5",
            "agentoverride: queries 5 5; source: - 1, runtime 10",
            "grant: queries 6 6; state: expired 1, live 11, revoked 1",
            "filters: status brand agent created",
            "found: g-old",
            "live: 11",
            "revoked: g-1",
            "expired: g-old",
        ]

        # Conversations are read-only and keep what was written out of sight.
        shell(
            root,
            env,
            f"ctx = store.create_conversation(brand_id='shop', issuer={ISSUER!r}, sub='u',"
            " now=now)\n"
            f"store.claim_message(context_id=ctx, message_id='m-1', text={SECRET_TEXT!r},"
            " now=now, lease_seconds=30)\n",
        )
        conversations = client.get("/admin/pactmw/conversation/")
        link = re.search(
            r'href="(/admin/pactmw/conversation/[^"]+/change/[^"]*)"', conversations.text
        )
        assert link, conversations.text[:3000]
        detail = client.get(link.group(1))
        assert detail.status_code == 200
        assert "m-1" in detail.text
        assert "Message object" not in detail.text  # each turn is captioned by its message id
        assert SECRET_TEXT not in detail.text
        assert 'name="_save"' not in detail.text  # nothing to change
        change_url = link.group(1)
        # Revoking, blocking and allowing need Django's "Can change" permission.
        assert shell(root, env, PERMISSIONS).splitlines()[-2:] == [
            "viewer: offered [False, False, False], revoked False, allowed False",
            "operator: offered [True, True, True], revoked True, allowed True",
        ]
        # Unknown ids, filters and searches are Django's answers, never a 500 (PostgreSQL).
        assert shell(root, env, NUL_VALUES).splitlines()[-5:] == [
            f"{model}: {' '.join(['302'] * count)} {{'/admin/pactmw/{model}/?e=1'}} {{'/admin/'}}"
            for model, count in (
                ("conversation", 6), ("messageid", 5), ("grant", 8), ("registeredagent", 4),
                ("agentoverride", 4),
            )
        ]  # fmt: skip
        # A long conversation's page shows its last turns and says how many there are: the
        # page and its queries do not grow with the conversation (they held every turn, and
        # read each stored reply although none is shown).
        assert shell(root, env, CONVERSATION_PAGES).splitlines()[-6:] == [
            "3: 200, queries 6, turns '3', shown 3 m-0..m-2, replies read False",
            "60: 200, queries 6, turns '60 (the last 50 below)', shown 50 m-10..m-59,"
            " replies read False",
            "brand: All shop",
            # The agents LIST_QUERIES added, and the conversations' own.
            "agent: All " + " ".join([*(f"https://pa-{n}.example" for n in range(10)), ISSUER]),
            "distinct: []",
            "counts: shop (5) https://pa.example (5)",  # with the three made before
        ]

    # The operator opts in: the same page now shows the text.
    port, server = runserver(root, {**env, "SHOW_TEXT": "1"}, "runserver-text")
    with server:
        client = _login(f"http://127.0.0.1:{port}")
        assert SECRET_TEXT in client.get(change_url).text


def test_the_admin_shows_the_state_where_a_django_alias_store_keeps_it(tmp_path: Path) -> None:
    """`store = "django:pactmw"`: the admin read the default database (empty lists and pages
    that were not found) while the store wrote to the other."""
    settings_tail = (
        guide_block("the end of mysite/settings.py").replace(
            '"store": "django",', '"store": "django:pactmw",'
        )
        + TEST_SETTINGS
        + "DATABASES['pactmw'] = {'ENGINE': 'django.db.backends.sqlite3',"
        " 'NAME': BASE_DIR / 'pactmw.sqlite3'}\n"
    )
    assert '"store": "django:pactmw",' in settings_tail
    env = new_site(tmp_path, settings_tail, guide_block("the end of mysite/urls.py"))
    manage(tmp_path, env, "migrate", "pactmw", "--database", "pactmw", "--verbosity", "0")
    found = "message id found: ['message', 'user', 'conversation', 'received_utc'] 1 1"
    assert shell(tmp_path, env, ALIAS_STATE).splitlines()[-13:] == [
        "store: pactmw",
        "registeredagent: ['1']",
        "agentoverride: ['1']",
        "grant: ['1']",
        "conversation: ['1']",
        "messageid: ['1']",
        found,
        found,
        found,
        "message id found: [] 0 0",
        "conversation page: ['m-1']",
        "revoked: True",
        "removed: True",
    ]
