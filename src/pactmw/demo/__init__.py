"""`pactmw demo`: a personal agent talks to a real `pactmw serve`, on 127.0.0.1 only.

The story has two parts. PACT Identity: the personal agent signs a JWT per request and holds
a conversation with Acme's bot. PACT Delegated: the bot needs the user's Acme account, so the
personal agent gets a delegation token through the device flow; the person signs in at
Acme's own login (`pactmw.brand_login.DevelopmentBrandLogin`, in a thread of this process),
approves some scopes on the Provider's consent page, and every delegated reply carries a
receipt the personal agent verifies; a Parafé consent from a stand-in broker lets the bot
reorder; finally the operator revokes the grant with `pactmw grants revoke`.

The personal agent is pactmw's own client, `pactmw.client`; the person's browser and the
stand-in broker use the standard library alone, so the demo runs from an installed package
with no dev dependencies but uvicorn, which `pactmw serve` needs. The Brand's bot is
`demo_bot`, imported by the server as `pactmw.demo:demo_bot`, with its account actions in
`demo_tools`.

The private modules, one concern each: `_bot` (Acme's bot and tools), `_agent` (the personal
agent on `pactmw.client`), `_identity` and `_delegated` (its steps of the two profiles),
`_parafe` (its Parafé turn), `_broker` (the stand-in broker), `_person` and `_browser` (Jane
and her browser), `_server` (the config and the server process), `_transcript` (the
printout), `_story` (the steps in order, and `run_demo`), `_common` (shared names).
"""

from pactmw.demo._bot import demo_bot, demo_tools
from pactmw.demo._common import DemoFailed
from pactmw.demo._story import run_demo

__all__ = ["DemoFailed", "demo_bot", "demo_tools", "run_demo"]
