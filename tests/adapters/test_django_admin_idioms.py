"""The Django admin as a Django user expects it, on a fresh site following the guide:

- a grant's and a conversation's page name the Django user whose pk the account is (linked
  to the user's admin page), for a Brand whose people sign in to this site (`login`
  "same-app"), never for a Brand's own login (`login = "brand"`), where the same text is
  not a pk of this site;
- the add forms report a refusal on the field it concerns (`add_error(field, ...)`), as
  Django's own validation does, not above the form.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pactmw.core.jwk import generate_private_jwk
from tests.adapters.django_admin_scripts import _OPERATOR
from tests.adapters.django_sites import TEST_SETTINGS, guide_block, new_site, shell

pytestmark = pytest.mark.timeout(600)

_BRAND_KEY = generate_private_jwk("ES256", kid="brand-1")

#: After the guide's settings: a second Brand whose people sign in at the Brand's own login.
BRAND_LOGIN_SITE = f"""
PACTMW["brands"]["outlet"] = {{
    "handler": "mysite.bot:support_bot",
    "delegation": {{
        "scopes": {{"orders:read": "See your orders"}},
        "login": "brand",
        "login_url": "https://outlet.example/login",
        "brand_issuer": "https://outlet.example",
        "brand_jwks": {{"keys": [{_BRAND_KEY.public.to_dict()!r}]}},
    }},
}}
"""

SCRIPT = (
    _OPERATOR
    + """
import re
from django.contrib.auth import get_user_model
from pactmw.adapters.django.models import Conversation

alice = get_user_model().objects.create_user("alice", password="not-used-here")
mine = str(alice.pk)
for grant_id, brand, account in (
    ("g-same-app", "shop", mine),
    ("g-brand-login", "outlet", mine),
    ("g-no-user", "shop", "999999"),
    ("g-not-a-pk", "shop", "acct-x"),
):
    store.upsert_grant(grant_id=grant_id, brand_id=brand, account=account,
        client_id="https://pa.example", pa_sub="u", scopes=("orders:read",), now=now,
        expires_at=now + 3600)
contexts = {}
for name, brand in (("c-same-app", "shop"), ("c-brand-login", "outlet")):
    ctx = store.create_conversation(brand_id=brand, issuer="https://pa.example", sub="u", now=now)
    Conversation.objects.filter(context_id=ctx).update(account=mine)
    contexts[name] = ctx
client = logged_in()

def user_field(page):
    found = re.search(
        r'<label>User:</label>\\s*<div class="readonly">(.*?)</div>', page, re.S
    )
    if found is None:
        return "no user field"
    return found.group(1).strip().replace(f"/{alice.pk}/", "/PK/")

for grant_id in ("g-same-app", "g-brand-login", "g-no-user", "g-not-a-pk"):
    page = client.get(f"/admin/pactmw/grant/{grant_id}/change/").content.decode()
    print("grant", grant_id, user_field(page))
for name, ctx in contexts.items():
    page = client.get(f"/admin/pactmw/conversation/{ctx}/change/").content.decode()
    print("conversation", name, user_field(page))

def errors(url, values):
    page = client.post(url, {**values, "_save": "Save"})
    html = page.content.decode()
    # Django's admin marks a row whose field has errors, and lists the form's own above it.
    fields = re.findall(r'class="form-row errors field-(\\w+)', html)
    above = re.findall(r'<ul class="errorlist nonfield">(.*?)</ul>', html, re.S)
    return f"{page.status_code} fields={fields} form={above}"

add = "/admin/pactmw/registeredagent/add/"
good = {"issuer": "https://pa2.example", "jwks_uri": "https://pa2.example/jwks.json"}
print("add issuer", errors(add, {**good, "issuer": "pa2.example"}))
print("add jwks_uri", errors(add, {**good, "jwks_uri": "http://169.254.169.254/keys"}))
print("add name", errors(add, {**good, "name": "Agent\\u202e"}))
print("access issuer", errors("/admin/pactmw/agentoverride/add/",
    {"issuer": "https://stranger.example"}))
"""
)


def test_the_admin_names_the_user_and_puts_refusals_on_their_fields(tmp_path: Path) -> None:
    settings_tail = guide_block("the end of mysite/settings.py") + TEST_SETTINGS + BRAND_LOGIN_SITE
    env = new_site(tmp_path, settings_tail, guide_block("the end of mysite/urls.py"))
    printed = [
        line
        for line in shell(tmp_path, env, SCRIPT).splitlines()
        if line.startswith(("grant ", "conversation ", "add ", "access "))
    ]
    alice = '<a href="/admin/auth/user/PK/change/">alice</a>'
    assert printed[:6] == [
        f"grant g-same-app {alice}",
        "grant g-brand-login -",
        "grant g-no-user -",
        "grant g-not-a-pk -",
        f"conversation c-same-app {alice}",
        "conversation c-brand-login -",
    ]
    assert printed[6:] == [
        "add issuer 200 fields=['issuer'] form=[]",
        "add jwks_uri 200 fields=['jwks_uri'] form=[]",
        "add name 200 fields=['name'] form=[]",
        "access issuer 200 fields=['issuer'] form=[]",
    ]
