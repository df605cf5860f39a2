"""Acme Lamp Co.'s support site: a small Flask app that already existed before pactmw.

It has its own pages (`GET /`, `GET /orders/<number>`) and its own chat bot
(`support_bot`). The few lines marked "pactmw" below turn that bot into a PACT 1.0
Provider: personal agents can now find it at `/a2a/<brand>/.well-known/agent-card.json`
and talk to it with `message:send`, each request signed with the agent's JWT.

Run it::

    python examples/flask_app/app.py --port 5000
    PACTMW_CONFIG=pactmw.toml python examples/flask_app/app.py --port 5000
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(REPO) not in sys.path:
    # Run as a file, `examples.*` import paths (in a TOML config) must still import.
    sys.path.insert(0, str(REPO))

from flask import Flask, abort, jsonify, render_template_string, request  # noqa: E402

from examples.bots import ORDERS, describe_order  # noqa: E402  (the shop's order "database")
from pactmw.adapters.flask import (  # noqa: E402
    Pactmw,
    current_personal_agent,
    personal_agent_required,
)
from pactmw.provider import Reply, Turn, load_toml  # noqa: E402

# -- the shop's own bot: it knows nothing of PACT -------------------------------------------

_ORDER_NUMBER = re.compile(r"\b([A-Z]-\d{4})\b", re.IGNORECASE)


def _mentioned_order(turn: Turn) -> str | None:
    """The order number in this message, else the latest one earlier in the conversation."""
    for text in (turn.text, *(earlier.text for earlier in reversed(turn.history))):
        found = _ORDER_NUMBER.search(text)
        if found is not None:
            return found.group(1).upper()
    return None


def support_bot(turn: Turn) -> str | Reply:
    """Answer one chat message about an order's status or a return.

    pactmw calls this for every `message:send`; `turn.history` holds the earlier turns of
    the conversation, so "can I return it?" works after "where is A-1001?".
    """
    lowered = turn.text.lower()
    if "thank" in lowered or "bye" in lowered:
        return Reply(text="You're welcome. Have a good day!", close=True)
    number = _mentioned_order(turn)
    if number is None:
        return "I can help with that. What's your order number? It looks like A-1001."
    order = ORDERS.get(number)
    if order is None:
        return describe_order(number)
    if "return" in lowered:
        if order["status"] == "processing":
            return f"Order {number} has not shipped yet, so there is nothing to return."
        return (
            f"I've started a return for order {number} ({order['item']}). "
            "You'll get a prepaid label by email within the hour."
        )
    return Reply(text=describe_order(number), data=({"order": {"number": number, **order}},))


# -- the shop's own pages ---------------------------------------------------------------------

HOME_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Acme Lamp Co. support</title></head>
<body>
  <h1>Acme Lamp Co. support</h1>
  <h2>How to reach us</h2>
  <ul>
    <li>Email: <a href="mailto:help@acme-lamps.example">help@acme-lamps.example</a></li>
    <li>Phone: +1 555 0100, Monday to Friday, 9:00 to 17:00</li>
    <li>Chat: the assistant in the corner of every page</li>
    <li>Personal agents (PACT): <a href="{{ card_url }}">{{ card_url }}</a></li>
  </ul>
  <h2>Where is my order?</h2>
  <form method="get" action="/">
    <label>Order number <input name="order" value="{{ number }}" placeholder="A-1001"></label>
    <button type="submit">Look up</button>
  </form>
  {% if answer %}<p id="answer">{{ answer }}</p>{% endif %}
  <h2>Returns</h2>
  <p>Shipped and delivered orders can be returned within 30 days: ask the chat assistant.</p>
</body>
</html>
"""


def dev_config(port: int) -> dict[str, Any]:
    """The built-in development configuration (used when PACTMW_CONFIG is not set).

    One brand, "shop", answered by `support_bot`; conversations in a sqlite file under
    examples/flask_app/.pactmw/. No personal agent is registered, so every `message:send`
    is refused with 401 until you list one under `agents` in a TOML config.
    """
    base_url = f"http://127.0.0.1:{port}"
    return {
        "base_url": base_url,
        "audience": f"{base_url}/a2a",
        "store": f"sqlite:///{HERE / '.pactmw' / 'pactmw.db'}",
        "agents": [],
        "brands": {
            "shop": {
                "name": "Acme Lamp Co. support",
                "description": "Order status and returns for Acme Lamp Co. orders.",
                "handler": "support_bot",
                "skills": [
                    {
                        "id": "order-status",
                        "name": "Order status",
                        "description": "Where an order is and when it arrives.",
                        "tags": ["orders"],
                        "examples": ["Where is my order A-1001?"],
                    }
                ],
            }
        },
    }


def load_pactmw_config(port: int) -> dict[str, Any]:
    """The TOML file named by PACTMW_CONFIG, else the development configuration."""
    path = os.environ.get("PACTMW_CONFIG")
    return load_toml(path) if path else dev_config(port)


def create_app(pactmw_config: Mapping[str, Any] | None = None) -> Flask:
    """The shop's Flask app; `pactmw_config` defaults to the development config on :5000."""
    app = Flask(__name__)

    @app.get("/")
    def home() -> str:
        number = request.args.get("order", "").strip()
        answer = describe_order(number) if number else ""
        first_brand = next(iter(app.config["PACTMW"].get("brands", {})), "shop")
        card_url = f"/a2a/{first_brand}/.well-known/agent-card.json"
        return render_template_string(HOME_PAGE, number=number, answer=answer, card_url=card_url)

    @app.get("/orders/<number>")
    def order(number: str) -> Any:
        found = ORDERS.get(number.upper())
        if found is None:
            abort(404)
        return jsonify(number=number.upper(), **found)

    # -- pactmw: these two lines make the shop a PACT Provider ----------------------------
    app.config["PACTMW"] = dict(pactmw_config or load_pactmw_config(5000))
    Pactmw(app, handlers={"support_bot": support_bot})
    # --------------------------------------------------------------------------------------

    @app.get("/api/agent/whoami")
    @personal_agent_required  # only personal agents with a valid JWT get past this
    def whoami() -> Any:
        agent = current_personal_agent()
        assert agent is not None  # the decorator guarantees it
        return jsonify(issuer=agent.issuer, sub=agent.sub, actor_id=agent.actor_id)

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Acme Lamp Co.'s support site (Flask)")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args(argv)
    app = create_app(load_pactmw_config(args.port))
    app.run(host="127.0.0.1", port=args.port, threaded=True)


if __name__ == "__main__":
    main()
