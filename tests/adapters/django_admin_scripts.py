"""The Django shell scripts tests/adapters/test_django_admin_site.py runs in its
startproject site (`manage.py shell -c`, after a prelude that binds `store` and `now`): each
drives the admin through Django's test client and prints what the test compares."""

from __future__ import annotations

__all__ = [
    "ALIAS_STATE",
    "CONVERSATION_PAGES",
    "LIST_QUERIES",
    "LOST_RACE",
    "NUL_VALUES",
    "PERMISSIONS",
    "POPPY_AND_TIME_FILTERS",
    "SITE_RULE",
]


#: What every script starts with: Django's test environment, and `logged_in(username)`, a
#: test client with that staff user logged in (the test's superuser "ops" by default).
_OPERATOR = """
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment

setup_test_environment()

def logged_in(username="ops", **options):
    client = Client(**options)
    client.force_login(get_user_model().objects.get(username=username))
    return client
"""

#: A site's own rule on the "add agent" form, checked after pactmw's (which passes): the real
#: admin refuses the POST, and the agent is not in the store; validating pactmw's form alone
#: writes nothing either (the admin's save_model writes, after every validation).
SITE_RULE = (
    _OPERATOR
    + """
from django import forms
from django.contrib import admin
from pactmw.adapters.django.admin import RegisteredAgentAdmin, RegisteredAgentForm
from pactmw.adapters.django.models import RegisteredAgent

class LegalApprovedForm(RegisteredAgentForm):
    def clean(self):
        data = super().clean()
        raise forms.ValidationError("only agents the legal team approved")

class SiteAgentAdmin(RegisteredAgentAdmin):
    form = LegalApprovedForm

admin.site.unregister(RegisteredAgent)
admin.site.register(RegisteredAgent, SiteAgentAdmin)
client = logged_in()
values = {"issuer": "https://vetted.example", "jwks_uri": "https://vetted.example/jwks.json"}
page = client.post("/admin/pactmw/registeredagent/add/", {**values, "_save": "Save"})
refused = page.status_code == 200 and "legal team approved" in page.content.decode()
print("refused" if refused else f"answered {page.status_code}")
print("stored" if store.get_agent("https://vetted.example") else "not-stored")
print("valid" if RegisteredAgentForm(data=values).is_valid() else "invalid")
print("stored" if store.get_agent("https://vetted.example") else "not-stored")
"""
)


#: Another operator adds the same agent once this form has validated, before the admin's
#: save_model: the add then loses the race, and the admin says so as its only message (no
#: "was added successfully" after it) and records no addition in its history.
LOST_RACE = (
    _OPERATOR
    + """
import re
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from pactmw.adapters.django.admin import RegisteredAgentAdmin, RegisteredAgentForm
from pactmw.adapters.django.models import RegisteredAgent

RACED = "https://raced.example"

class OutrunForm(RegisteredAgentForm):
    def clean(self):
        data = super().clean()
        store.add_agent(issuer=RACED, name="theirs", jwks_uri=data["jwks_uri"], now=now)
        return data

class OutrunAdmin(RegisteredAgentAdmin):
    form = OutrunForm

admin.site.unregister(RegisteredAgent)
admin.site.register(RegisteredAgent, OutrunAdmin)
client = logged_in()
values = {"issuer": RACED, "jwks_uri": "https://raced.example/jwks.json", "_save": "Save"}
page = client.post("/admin/pactmw/registeredagent/add/", values, follow=True)
shown = re.search(r'<ul class="messagelist">(.*?)</ul>', page.content.decode(), re.S)
for level, text in re.findall(r'<li class="([^"]*)">(.*?)</li>', shown.group(1) if shown else ""):
    print("message:", level, "|", text.strip())
print("status:", page.status_code, page.redirect_chain)
print("logged:", LogEntry.objects.filter(object_id=RACED).count())
print("theirs:", store.get_agent(RACED).name)
store.remove_agent(RACED)
"""
)


#: The admin's three lists, each with the rows the test made so far, then with ten more (and an
#: expired grant): the queries each list costs, what its computed columns show, and the grants
#: the status filter shows for each status.
LIST_QUERIES = (
    _OPERATOR
    + """
import re
from django.db import connection
from django.test.utils import CaptureQueriesContext

client = logged_in()
PAGES = {"registeredagent": "access", "agentoverride": "source", "grant": "state"}

def listed(model):
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/admin/pactmw/{model}/")
    assert page.status_code == 200, page.status_code
    return len(queries), page.content.decode()

before = {model: listed(model)[0] for model in PAGES}
for n in range(10):
    store.upsert_grant(grant_id=f"g-many-{n}", brand_id="shop", account="acct-many",
        client_id="https://pa.example", pa_sub=f"u{n}", scopes=("orders:read",), now=now,
        expires_at=now + 3600)
    issuer = f"https://pa-{n}.example"
    store.add_agent(issuer=issuer, name=f"PA {n}", jwks_uri=issuer + "/jwks.json", now=now)
    store.set_agent_enabled(issuer, n % 2 == 0)
store.upsert_grant(grant_id="g-old", brand_id="shop", account="acct-old",
    client_id="https://pa.example", pa_sub="u", scopes=("orders:read",), now=now - 7200,
    expires_at=now - 3600)
for model, column in PAGES.items():
    queries, text = listed(model)
    shown = re.findall(f'<td class="field-{column}">([a-z-]+)</td>', text)
    counts = ", ".join(f"{value} {shown.count(value)}" for value in sorted(set(shown)))
    print(f"{model}: queries {before[model]} {queries}; {column}: {counts}")
# The filters: status, Brand, agent and creation; not every account that ever delegated
# (searched).
text = client.get("/admin/pactmw/grant/").content.decode()
print("filters:", " ".join(re.findall(r'<details data-filter-title="([^"]+)"', text)))
found = client.get("/admin/pactmw/grant/", {"q": "acct-old"}).content.decode()
print("found:", " ".join(re.findall(r'<th class="field-grant"><a [^>]*>([^<]+)</a>', found)))
# The status filter, as `pactmw grants list` tells them apart.
for status in ("live", "revoked", "expired"):
    text = client.get("/admin/pactmw/grant/", {"status": status}).content.decode()
    ids = sorted(re.findall(r'<th class="field-grant"><a [^>]*>([^<]+)</a>', text))
    print(f"{status}: {' '.join(ids) if len(ids) < 3 else len(ids)}")
"""
)


#: Two conversations, of 3 and of 60 answered turns: what each page shows, what it costs in
#: queries, and whether any query reads the stored replies (never shown).
CONVERSATION_PAGES = (
    _OPERATOR
    + """
import re
from django.db import connection, reset_queries
from django.test.utils import CaptureQueriesContext

client = logged_in()
for turns in (3, 60):
    ctx = store.create_conversation(brand_id="shop", issuer="https://pa.example", sub="u", now=now)
    for n in range(turns):
        store.claim_message(context_id=ctx, message_id=f"m-{n}", text="hi", now=now,
            lease_seconds=30)
        store.store_reply(context_id=ctx, message_id=f"m-{n}", reply_message_id=f"r-{n}",
            reply_text="hello", reply=b"{}", now=now)
    url = f"/admin/pactmw/conversation/{ctx}/change/"
    client.get(url)  # a first page also fills the session's and Django's caches
    reset_queries()  # the store's statements filled Django's query log
    with CaptureQueriesContext(connection) as queries:
        page = client.get(url)
    text = page.content.decode()
    shown = re.findall(r'<td class="field-message_id">\\s*<p>([^<]+)</p>', text)
    told = re.findall(r'<label>Turns:</label>\\s*<div class="readonly">([^<]+)</div>', text)
    told = " ".join(told) or "not told"
    replies = any('."reply"' in query["sql"] for query in queries.captured_queries)
    print(f"{turns}: {page.status_code}, queries {len(queries)}, turns {told!r},"
          f" shown {len(shown)} {shown[0]}..{shown[-1]}, replies read {replies}")
# The list's filters offer the Provider's Brands and agents, read without a DISTINCT over the
# conversations (which reads every row on every page).
store.add_agent(issuer="https://pa.example", name="PA", jwks_uri="https://pa.example/jwks",
    now=now)
reset_queries()
with CaptureQueriesContext(connection) as queries:
    page = client.get("/admin/pactmw/conversation/")
text = page.content.decode()
for title in ("brand", "agent"):
    block = " ".join(re.findall(f'<details data-filter-title="{title}".*?</details>', text, re.S))
    print(f"{title}:", " ".join(re.findall(r'<a href="[^"]*">([^<]+)</a>', block)) or "none")
print("distinct:", [q["sql"][:60] for q in queries.captured_queries if "DISTINCT" in q["sql"]])
# Django 5's "Show counts" counts each choice through the filters' own queryset.
counts = client.get("/admin/pactmw/conversation/", {"_facets": "True"}).content.decode()
print("counts:", " ".join(re.findall(r'>((?:shop|https://pa.example) [(][0-9]+[)])<', counts)))
store.remove_agent("https://pa.example")
"""
)


#: A NUL character in an object's id, a filter's or a search's value or a parameter's name:
#: PostgreSQL refuses it in a text value with an error that Django let through as a 500.
NUL_VALUES = (
    _OPERATOR
    + """

client = logged_in(raise_request_exception=False)
NUL = chr(0)
PARAMETERS = {
    "conversation": ("brand_id", "issuer", "q"),
    "messageid": ("brand_id", "q"),
    "grant": ("brand_id", "client_id", "status", "account", "q"),
    "registeredagent": ("q",),
    "agentoverride": ("q",),
}
for model, names in PARAMETERS.items():
    lists = [client.get(f"/admin/pactmw/{model}/", {name: f"a{NUL}b"}) for name in names]
    lists.append(client.get(f"/admin/pactmw/{model}/", {f"a{NUL}": "b"}))
    pages = [client.get(f"/admin/pactmw/{model}/a%00b/{view}/") for view in ("change", "history")]
    print(f"{model}:", " ".join(str(page.status_code) for page in lists + pages),
          {page.get("Location") for page in lists}, {page.get("Location") for page in pages})
"""
)


#: Two staff users: one that may only view pactmw's models, one that may also change them.
#: Revoking a grant and blocking or allowing an agent need Django's "Can change" permission of
#: the list's model (the rows themselves are never edited): viewing is not enough.
PERMISSIONS = (
    _OPERATOR
    + """
from django.contrib.auth.models import Permission

MODELS = ("grant", "registeredagent", "agentoverride")
ACTIONS = {"grant": "revoke_grants", "registeredagent": "block_agents",
    "agentoverride": "allow_agents"}
PA = "https://perms.example"
store.add_agent(issuer=PA, name="PA", jwks_uri=PA + "/jwks.json", now=now)
store.set_agent_enabled(PA, False)
for role, verbs in (("viewer", ("view",)), ("operator", ("view", "change"))):
    user = get_user_model().objects.create_user(role, password="pw", is_staff=True)
    codenames = [f"{verb}_{model}" for verb in verbs for model in MODELS]
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = logged_in(role)
    store.upsert_grant(grant_id=f"g-{role}", brand_id="shop", account="a", client_id=PA,
        pa_sub=role, scopes=("orders:read",), now=now, expires_at=now + 3600)
    offered = []
    for model, action in ACTIONS.items():
        listed = client.get(f"/admin/pactmw/{model}/").content.decode()
        offered.append(f'value="{action}"' in listed)
    # Posted anyway, as a hand-made request would.
    client.post("/admin/pactmw/grant/", {"action": "revoke_grants",
        "_selected_action": [f"g-{role}"], "index": "0"})
    client.post("/admin/pactmw/registeredagent/", {"action": "allow_agents",
        "_selected_action": [PA], "index": "0"})
    revoked = store.get_grant(f"g-{role}").revoked_at is not None
    print(f"{role}: offered {offered}, revoked {revoked}, allowed {store.agent_enabled(PA)}")
store.remove_agent(PA)
"""
)


#: The admin on a site whose store is another entry of DATABASES: every list and page shows
#: the state the store holds there, and the actions change it there.
ALIAS_STATE = (
    _OPERATOR
    + """
import re

client = logged_in(raise_request_exception=False)
print("store:", store.alias)
store.add_agent(issuer="https://pa.example", name="PA", jwks_uri="https://pa.example/jwks.json",
    now=now)
store.set_agent_enabled("https://pa.example", True)
store.upsert_grant(grant_id="g-1", brand_id="shop", account="acct", client_id="https://pa.example",
    pa_sub="u", scopes=("orders:read",), now=now, expires_at=now + 3600)
ctx = store.create_conversation(brand_id="shop", issuer="https://pa.example", sub="u", now=now)
store.claim_message(context_id=ctx, message_id="m-1", text="hi", now=now, lease_seconds=30)
store.claim_message_id(brand_id="shop", issuer="poppy https://pa.example", sub="u",
    message_id="m-1", context_id=ctx)
for model in ("registeredagent", "agentoverride", "grant", "conversation", "messageid"):
    text = client.get(f"/admin/pactmw/{model}/").content.decode()
    print(f"{model}:", re.findall(r'<p class="paginator">\\s*(\\d+)', text))
# A message id is found by the id, the agent's user or the conversation, each a column, with
# the time its conversation received it.
for q in ("m-1", "u", ctx, "m-2"):
    text = client.get("/admin/pactmw/messageid/", {"q": q}).content.decode()
    cells = re.findall(r'<t[hd] class="field-([a-z_]+)">', text)
    timed = len(re.findall(r'<td class="field-received_utc"><span title="[^"]+">', text))
    print("message id found:", cells, text.count(f'title="{ctx}"'), timed)
page = client.get(f"/admin/pactmw/conversation/{ctx}/change/").content.decode()
print("conversation page:", re.findall(r'<td class="field-message_id">\\s*<p>([^<]+)</p>', page))
client.post("/admin/pactmw/grant/", {"action": "revoke_grants", "_selected_action": ["g-1"],
    "index": "0"})
print("revoked:", store.get_grant("g-1").revoked_at is not None)
client.post("/admin/pactmw/registeredagent/", {"action": "delete_selected",
    "_selected_action": ["https://pa.example"], "post": "yes"})
print("removed:", store.get_agent("https://pa.example") is None)
"""
)


#: A PACT agent's grant and conversation at the Brand "shop", a Poppy agent's at the Poppy
#: Brand "salon" (its conversations' agent is "poppy " + its client_id, as Poppy stores them),
#: each made some days ago, and message ids of that Poppy agent and of another: what each
#: list filter of the grants, the conversations and the message ids offers, and the rows
#: each of its choices shows.
POPPY_AND_TIME_FILTERS = (
    _OPERATOR
    + """
import re

client = logged_in()
DAY = 86400
PACT = "https://pa.example"
POPPY = "https://atlas.example/agent.json"
store.add_agent(issuer=PACT, name="PA", jwks_uri=PACT + "/jwks.json", now=now)
for grant_id, brand, agent, days in (
    ("g-pact", "shop", PACT, 0), ("g-poppy", "salon", POPPY, 2), ("g-old", "salon", POPPY, 40),
):
    store.upsert_grant(grant_id=grant_id, brand_id=brand, account="acct-" + grant_id,
        client_id=agent, pa_sub="u-" + grant_id, scopes=("orders:read",),
        now=now - days * DAY, expires_at=now + DAY)
names = {store.create_conversation(brand_id="shop", issuer=PACT, sub="u", now=now): "c-pact"}
for name, days in (("c-poppy", 3), ("c-old", 100)):
    ctx = store.start_conversation(brand_id="salon", issuer="poppy " + POPPY, sub="u",
        account=None, message_id="m-" + name, text="Hello", now=now - days * DAY)
    names[ctx] = name
# Message ids (Poppy's only) of the Poppy agent and of another one.
for message_id, agent in (("m-atlas", POPPY), ("m-other", "https://other.example/agent.json")):
    store.claim_message_id(brand_id="salon", issuer="poppy " + agent, sub="u",
        message_id=message_id, context_id=ctx)
ROWS = {
    "grant": r'<th class="field-grant"><a [^>]*>([^<]+)</a>',
    "conversation": r'<th class="field-conversation"><a [^>]*><span title="([^"]+)">',
    "messageid": r'<th class="field-message"><a [^>]*><span title="([^"]+)">',
}
FILTERS = {
    "grant": ("agent", "created"),
    "conversation": ("agent", "last activity"),
    "messageid": ("agent",),
}
for model, titles in FILTERS.items():
    text = client.get(f"/admin/pactmw/{model}/").content.decode()
    offered = re.findall(r'<details data-filter-title="([^"]+)"', text)
    print(f"{model} filters:", " | ".join(offered))
    for title in titles:
        block = re.search(f'<details data-filter-title="{title}".*?</details>', text, re.S)
        for href, label in re.findall(r'<a href="([^"]*)">([^<]+)</a>', block[0] if block else ""):
            page = client.get(f"/admin/pactmw/{model}/" + href.replace("&amp;", "&"))
            found = re.findall(ROWS[model], page.content.decode())
            shown = sorted(names.get(row, row) for row in found)
            print(f"{model} {title} {label}: {page.status_code} {' '.join(shown)}")
"""
)
