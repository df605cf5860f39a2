"""The Django admin's list filters on a site whose Brands speak PACT and Poppy: the agent
filter of the grants, the conversations and the message ids offers and finds the Poppy agents
too (a Poppy agent's grants hold its `client_id`, its conversations and message ids "poppy "
and that `client_id`),
and the time-ordered lists filter by how recent a row is, on sqlite with Django's `USE_TZ`
and a time zone far from UTC.
"""

from __future__ import annotations

from pathlib import Path

from tests.adapters.django_admin_scripts import POPPY_AND_TIME_FILTERS
from tests.adapters.django_sites import TEST_SETTINGS, guide_block, new_site, shell

#: After the guide's settings: a second Brand that speaks Poppy (whose URLs are all https),
#: and a time zone 14 hours from UTC (startproject sets `USE_TZ = True`).
POPPY_SITE = """
PACTMW["base_url"] = "https://shop.example"
PACTMW["brands"]["salon"] = {
    "handler": "mysite.bot:support_bot",
    "poppy": {"domain": "salon.example", "agents": "any"},
}
TIME_ZONE = "Pacific/Kiritimati"
"""


def test_the_agent_and_time_filters_find_poppy_and_recent_rows(tmp_path: Path) -> None:
    settings_tail = guide_block("the end of mysite/settings.py") + TEST_SETTINGS + POPPY_SITE
    env = new_site(tmp_path, settings_tail, guide_block("the end of mysite/urls.py"))
    lists = ("grant ", "conversation ", "messageid ")
    printed = [
        line
        for line in shell(tmp_path, env, POPPY_AND_TIME_FILTERS).splitlines()
        if line.startswith(lists)  # not Django 5.2's shell's own
    ]
    poppy = "https://atlas.example/agent.json"
    assert printed == [
        "grant filters: status | brand | agent | created",
        "grant agent All: 200 g-old g-pact g-poppy",
        f"grant agent {poppy}: 200 g-old g-poppy",
        "grant agent https://pa.example: 200 g-pact",
        "grant created All: 200 g-old g-pact g-poppy",
        "grant created past 24 hours: 200 g-pact",
        "grant created past 7 days: 200 g-pact g-poppy",
        "grant created past 30 days: 200 g-pact g-poppy",
        "grant created past year: 200 g-old g-pact g-poppy",
        "conversation filters: brand | agent | last activity | closed",
        "conversation agent All: 200 c-old c-pact c-poppy",
        "conversation agent https://pa.example: 200 c-pact",
        f"conversation agent poppy {poppy}: 200 c-old c-poppy",
        "conversation last activity All: 200 c-old c-pact c-poppy",
        "conversation last activity past 24 hours: 200 c-pact",
        "conversation last activity past 7 days: 200 c-pact c-poppy",
        "conversation last activity past 30 days: 200 c-pact c-poppy",
        "conversation last activity past year: 200 c-old c-pact c-poppy",
        "messageid filters: brand | agent",
        "messageid agent All: 200 m-atlas m-other",
        f"messageid agent poppy {poppy}: 200 m-atlas",
    ]
