"""Acme Lamp Co.'s support site: a small Flask app that already existed before pactmw.

It has its own pages (`GET /`, `GET /orders/<number>`), its own login (`/login`, `/logout`,
customers in memory) and its own chat bot (`support_bot`). The few lines marked "pactmw"
below turn that bot into a PACT 1.0 Provider: personal agents can now find it at
`/a2a/<brand>/.well-known/agent-card.json` and talk to it with `message:send`, each request
signed with the agent's JWT. With the Delegated profile (PACT §5) a signed-in customer can
also let their personal agent see their orders and start returns (`shop_tools`). With Parafé
(`[brands.shop.parafe]` in a TOML config) agents can place orders with broker-issued consent:
in the chat ("buy a ...") and at `POST /api/agent/orders`, each with a signed receipt.

Run it::

    python examples/flask_app/app.py --port 5000
    PACTMW_CONFIG=pactmw.toml python examples/flask_app/app.py --port 5000
"""

from __future__ import annotations

import argparse
import hmac
import os
import re
import secrets
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(REPO) not in sys.path:
    # Run as a file, `examples.*` import paths (in a TOML config) must still import.
    sys.path.insert(0, str(REPO))

from flask import (  # noqa: E402
    Flask,
    abort,
    current_app,
    jsonify,
    redirect,
    render_template_string,
    request,
    session,
    url_for,
)
from werkzeug.security import check_password_hash, generate_password_hash  # noqa: E402

from examples.bots import ORDERS, describe_order  # noqa: E402  (the shop's order "database")
from pactmw.adapters.flask import (  # noqa: E402
    Pactmw,
    current_parafe,
    current_personal_agent,
    get_provider,
    parafe_action,
    personal_agent_required,
)
from pactmw.adapters.wsgi import to_werkzeug  # noqa: E402
from pactmw.provider import Reply, Turn, card_url, load_toml  # noqa: E402
from pactmw.provider import brand_domain_card as build_brand_domain_card  # noqa: E402
from pactmw.provider.delegated import SignedInUser  # noqa: E402
from pactmw.provider.tools import ToolRegistry  # noqa: E402

# -- the shop's customers: its own login, nothing to do with PACT -----------------------------


@dataclass(frozen=True)
class Customer:
    username: str
    account: str  # the customer's id everywhere in the shop (orders, email, phone support)
    email: str
    password_hash: str


# DEV ONLY: two demo customers with published passwords (see README). A real shop has a
# users table; never ship these.
CUSTOMERS = {
    customer.username: customer
    for customer in (
        Customer("jane", "cust-1001", "jane@example.com", generate_password_hash("jane-dev-only")),
        Customer("alex", "cust-1002", "alex@example.com", generate_password_hash("alex-dev-only")),
    )
}
#: Who placed each order (customer account ids).
ORDER_OWNERS = {"A-1001": "cust-1001", "A-1002": "cust-1002", "A-1003": "cust-1001"}
#: Orders with a return started (in memory, like everything else in this example).
RETURNS_REQUESTED: set[str] = set()
_RETURNS_LOCK = threading.Lock()
# Compared against when the username is unknown, so a wrong username costs as much time as a
# wrong password (no account enumeration by timing).
_DUMMY_HASH = generate_password_hash(secrets.token_urlsafe(16))


def authenticate(username: str, password: str) -> Customer | None:
    """The customer with these credentials, or None."""
    customer = CUSTOMERS.get(username.strip().lower())
    valid = check_password_hash(customer.password_hash if customer else _DUMMY_HASH, password)
    return customer if customer is not None and valid else None


def signed_in_customer() -> Customer | None:
    """The customer signed in to this browser session (Flask's signed session cookie)."""
    username = session.get("customer")
    return CUSTOMERS.get(username) if isinstance(username, str) else None


def signed_in_user() -> SignedInUser | None:
    """pactmw: who is signed in, for the consent page (same-app login)."""
    customer = signed_in_customer()
    if customer is None:
        return None
    return SignedInUser(account=customer.account, label=customer.email)


def _csrf_token() -> str:
    """This session's anti-forgery token (kept in the signed session cookie)."""
    token = session.get("csrf")
    if not isinstance(token, str) or not token:
        token = secrets.token_urlsafe(32)
        session["csrf"] = token
    return token


def _check_csrf() -> None:
    expected = session.get("csrf")
    sent = request.form.get("csrf_token", "")
    if not isinstance(expected, str) or not expected or not hmac.compare_digest(sent, expected):
        abort(400, "The form expired. Go back, reload the page and try again.")


def safe_next(target: str) -> str | None:
    """`target` when it leads back into this site, else None (no open redirect).

    A path (`/orders/A-1001`) is fine, and so is an absolute URL on this very origin: pactmw's
    consent page sends people here with `next=http://<this site>/a2a/.../oauth/consent?...`.
    """
    if not target or any(ch == "\\" or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in target):
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        ours = {_origin(request.host_url), _origin(current_app.config["PACTMW"].get("base_url"))}
        origin = _origin(target)
        return target if origin is not None and origin in ours else None
    return target if target.startswith("/") and not target.startswith("//") else None


def _origin(url: object) -> str | None:
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


# -- the shop's account actions, as pactmw tools (PACT §5: scopes, step-up, receipts) --------

#: The actions the bot may take on a customer's account, each behind one scope. pactmw runs
#: them for the account of the delegation token, and only within the scopes it grants.
shop_tools = ToolRegistry()


@shop_tools.tool(scope="orders:read")
def list_orders(account: str) -> list[dict[str, Any]]:
    """The account's orders, oldest first."""
    return [
        {"number": number, **ORDERS[number], "return_requested": number in RETURNS_REQUESTED}
        for number in sorted(ORDERS)
        if ORDER_OWNERS.get(number) == account
    ]


@shop_tools.tool(scope="orders:return", write=True)
def start_return(account: str, order: str) -> str:
    """Start a return for one of the account's orders; the outcome, in a sentence."""
    number = order.upper()
    found = ORDERS.get(number)
    if found is None or ORDER_OWNERS.get(number) != account:
        return f"I can't find order {number} on your account."
    if found["status"] == "processing":
        return f"Order {number} has not shipped yet, so there is nothing to return."
    with _RETURNS_LOCK:
        RETURNS_REQUESTED.add(number)
    return (
        f"I've started a return for order {number} ({found['item']}). "
        "You'll get a prepaid label by email within the hour."
    )


# -- orders placed by agents with Parafé consent --------------------------------------------

_PLACED_LOCK = threading.Lock()
_NEXT_ORDER = [2001]


def place_order(item: str, placed_by: str | None) -> str:
    """Create an order for `item` (in memory, like everything here); its number."""
    with _PLACED_LOCK:
        number = f"P-{_NEXT_ORDER[0]}"
        _NEXT_ORDER[0] += 1
        ORDERS[number] = {"status": "processing", "eta": "in 3-5 days", "item": item}
    return number


#: "buy a desk lamp", "place an order for one linen throw": the item is what follows.
_BUY = re.compile(r"\b(?:buy|place an order for)\s+(?:a |an |one )?([a-z][a-z -]{1,60})", re.I)


def parafe_order(turn: Turn, item: str) -> Reply:
    """Place an order, only with Parafé consent for `create_order`.

    `require` checks the consent token and its presentation proof (once per message) and
    raises `ParafeRefused` otherwise, which pactmw turns into the reply: the Parafé error and
    a signed refusal receipt. On success the reply carries the signed success receipt,
    naming the new order (`complete(..., business_ref=...)`).
    """
    consent = turn.parafe.require("create_order", details={"item": item})
    number = place_order(item, consent.initiator)
    turn.parafe.complete("create_order", business_ref=number)
    return Reply(
        text=f"Order {number} placed: one {item}. It ships in 3-5 days.",
        data=({"order": {"number": number, "item": item}},),
    )


# -- the shop's own bot: it knows nothing of PACT beyond `turn.tools` and `turn.parafe` -------

_ORDER_NUMBER = re.compile(r"\b([A-Z]-\d{4})\b", re.IGNORECASE)
_MY_ORDERS = re.compile(r"\bmy orders\b|\border history\b")


def _mentioned_order(turn: Turn) -> str | None:
    """The order number in this message, else the latest one earlier in the conversation."""
    for text in (turn.text, *(earlier.text for earlier in reversed(turn.history))):
        found = _ORDER_NUMBER.search(text)
        if found is not None:
            return found.group(1).upper()
    return None


def _describe_orders(orders: list[dict[str, Any]]) -> str:
    if not orders:
        return "You have no orders with us yet."
    listed = "; ".join(f"{o['number']} ({o['item']}, {o['status']})" for o in orders)
    return f"Your orders: {listed}."


def support_bot(turn: Turn) -> str | Reply:
    """Answer one chat message about an order's status or a return.

    pactmw calls this for every `message:send`; `turn.history` holds the earlier turns of
    the conversation, so "can I return it?" works after "where is A-1001?".

    When the Brand offers delegation, account actions ("show my orders", a return) go through
    `turn.tools`: without a delegation token that grants their scope, pactmw turns the call
    into a step-up task that asks the customer's permission. Order status by number needs no
    account and keeps working for any personal agent.
    """
    lowered = turn.text.lower()
    if "thank" in lowered or "bye" in lowered:
        return Reply(text="You're welcome. Have a good day!", close=True)
    if turn.parafe.enabled:
        # Parafé-scoped actions (the Brand's `[brands.shop.parafe]`): each needs consent.
        buying = _BUY.search(turn.text)
        if buying is not None and _ORDER_NUMBER.search(turn.text) is None:
            return parafe_order(turn, buying.group(1).strip().rstrip(".!? "))
        if "refund" in lowered:
            refunded = _mentioned_order(turn) or "?"
            turn.parafe.require("issue_refund", business_ref=refunded)
            return f"Our team will refund order {refunded} within 5 business days."
    delegated = turn.brand.delegation is not None
    if delegated and _MY_ORDERS.search(lowered):
        turn.require_scopes("orders:read", message="I need your permission to see your orders.")
        orders = turn.tools.list_orders()
        return Reply(text=_describe_orders(orders), data=({"orders": orders},))
    number = _mentioned_order(turn)
    if number is None:
        return "I can help with that. What's your order number? It looks like A-1001."
    order = ORDERS.get(number)
    if order is None:
        return describe_order(number)
    if "return" in lowered:
        if delegated:
            turn.require_scopes(
                "orders:return", message="I need your permission to start a return for you."
            )
            text: str = turn.tools.start_return(order=number)
            return text
        # Without delegation the shop does what its chat widget always did.
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
  <p>{% if customer %}Signed in as {{ customer.email }}.
    <a href="{{ url_for('logout') }}">Log out</a>
  {% else %}<a href="{{ url_for('login') }}">Log in</a>{% endif %}</p>
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

LOGIN_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Log in · Acme Lamp Co.</title></head>
<body>
  <h1>Log in to Acme Lamp Co.</h1>
  {% if error %}<p role="alert">{{ error }}</p>{% endif %}
  <form method="post" action="{{ url_for('login') }}">
    <input type="hidden" name="csrf_token" value="{{ csrf_token }}">
    <input type="hidden" name="next" value="{{ next }}">
    <p><label>Username <input name="username" autocomplete="username" required></label></p>
    <p><label>Password <input type="password" name="password"
      autocomplete="current-password" required></label></p>
    <p><button type="submit">Log in</button></p>
  </form>
</body>
</html>
"""

LOGOUT_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Log out · Acme Lamp Co.</title></head>
<body>
  <form method="post" action="{{ url_for('logout') }}">
    <input type="hidden" name="csrf_token" value="{{ csrf_token }}">
    <button type="submit">Log out</button>
  </form>
</body>
</html>
"""

SCOPES = {
    "orders:read": "See your orders and their status",
    "orders:return": "Start a return for an order",
}


def dev_config(port: int) -> dict[str, Any]:
    """The built-in development configuration (used when PACTMW_CONFIG is not set).

    One brand, "shop", answered by `support_bot`, offering delegation (the shop's own login,
    `shop_tools`); conversations, grants and the development signing key under
    examples/flask_app/.pactmw/. No personal agent is registered, so every `message:send`
    is refused with 401 until you list one under `agents` in a TOML config.
    """
    base_url = f"http://127.0.0.1:{port}"
    return {
        "base_url": base_url,
        "audience": f"{base_url}/a2a",
        "store": f"sqlite:///{HERE / '.pactmw' / 'pactmw.db'}",
        "data_dir": str(HERE / ".pactmw"),
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
                "delegation": {
                    "scopes": dict(SCOPES),
                    "login": "same-app",
                    "login_url": "/login",
                    "tools": shop_tools,
                },
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
    # Signs the session cookie (who is logged in, the CSRF token). Without SHOP_SECRET_KEY a
    # random key is made per process: logins do not survive a restart, nothing is guessable.
    app.config["SECRET_KEY"] = os.environ.get("SHOP_SECRET_KEY") or secrets.token_hex(32)
    app.config["SESSION_COOKIE_SAMESITE"] = "Lax"

    @app.get("/")
    def home() -> str:
        number = request.args.get("order", "").strip()
        answer = describe_order(number) if number else ""
        first_brand = next(iter(app.config["PACTMW"].get("brands", {})), "shop")
        card_url = f"/a2a/{first_brand}/.well-known/agent-card.json"
        return render_template_string(
            HOME_PAGE,
            number=number,
            answer=answer,
            card_url=card_url,
            customer=signed_in_customer(),
        )

    @app.get("/orders/<number>")
    def order(number: str) -> Any:
        found = ORDERS.get(number.upper())
        if found is None:
            abort(404)
        return jsonify(
            number=number.upper(),
            **found,
            return_requested=number.upper() in RETURNS_REQUESTED,
        )

    @app.route("/login", methods=["GET", "POST"])
    def login() -> Any:
        target = request.values.get("next", "")
        if request.method == "GET":
            if signed_in_customer() is not None and safe_next(target):
                return redirect(safe_next(target) or "/", 303)
            return render_template_string(
                LOGIN_PAGE, csrf_token=_csrf_token(), next=target, error=""
            )
        _check_csrf()
        customer = authenticate(request.form.get("username", ""), request.form.get("password", ""))
        if customer is None:
            return render_template_string(
                LOGIN_PAGE,
                csrf_token=_csrf_token(),
                next=target,
                error="That username and password do not match.",
            )
        session.clear()  # a fresh session (and CSRF token) for the signed-in customer
        session["customer"] = customer.username
        return redirect(safe_next(target) or url_for("home"), 303)

    @app.route("/logout", methods=["GET", "POST"])
    def logout() -> Any:
        if request.method == "GET":  # a page with a button: logging out is a POST
            return render_template_string(LOGOUT_PAGE, csrf_token=_csrf_token())
        _check_csrf()
        session.clear()
        return redirect(url_for("home"), 303)

    # -- pactmw: these lines make the shop a PACT Provider --------------------------------
    app.config["PACTMW"] = dict(pactmw_config or load_pactmw_config(5000))
    Pactmw(app, handlers={"support_bot": support_bot}, current_user=signed_in_user)
    # --------------------------------------------------------------------------------------

    brands = app.config["PACTMW"].get("brands", {})

    @app.get("/.well-known/agent-card.json")
    def brand_domain_card() -> Any:
        """The shop's own domain points personal agents at its card (PACT §2.1)."""
        provider = get_provider()
        brand_id = next(iter(provider.brands))
        return to_werkzeug(build_brand_domain_card(card_url(provider.base_url, brand_id)))

    if any(isinstance(b, Mapping) and "parafe" in b for b in brands.values()):

        @app.post("/api/agent/orders")
        @parafe_action("create_order")  # Parafé consent for create_order, or a refusal
        def agent_order() -> Any:
            """Place an order from an A2A message (`{"message": ...}`, text = the item)."""
            parafe = current_parafe()
            assert parafe is not None  # the decorator's work
            assert parafe.consent is not None
            message = (request.get_json(silent=True) or {}).get("message") or {}
            texts = [p.get("text") for p in message.get("parts", []) if isinstance(p, dict)]
            item = next((t for t in texts if isinstance(t, str) and t.strip()), "desk lamp")
            number = place_order(item.strip()[:60], parafe.consent.initiator)
            parafe.complete("create_order", business_ref=number)  # named on the receipt
            reply = {
                "messageId": secrets.token_hex(16),
                "role": "ROLE_AGENT",
                "parts": [{"text": f"Order {number} placed."}, {"data": {"order": number}}],
            }
            return jsonify(message=reply)  # the decorator adds the signed receipt

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
    # Run as a file this module is `__main__`, while a TOML config imports the bot and the
    # tools from `examples.flask_app.app`. Serve from that one module, so the shop has one set
    # of customers, orders and returns, not two copies.
    from examples.flask_app.app import main as serve

    serve()
