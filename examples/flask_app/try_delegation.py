"""A throwaway personal agent, to try the example shops' delegation by hand (development only).

    python examples/flask_app/try_delegation.py setup flask     # or: setup django
    PACTMW_CONFIG=.pactmw/try-flask.toml python examples/flask_app/app.py --port 5000
    python examples/flask_app/try_delegation.py say flask "show my orders"

`setup` makes the agent's key and a TOML config that registers it with the shop (both under
./.pactmw/, gitignored). `say` sends one message as the agent; when the shop answers with a
step-up task it runs the device flow (RFC 8628) for the missing scopes, prints the link to
open in your browser (log in to the shop, approve), waits, and sends the message again with
the delegation token. The reply's receipt is verified against the shop's published keys.
The conversation and the tokens are kept in ./.pactmw/try-<example>.json between runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from pactmw.core.jose import parse_compact, sign_compact, verify_signature
from pactmw.core.jwk import generate_private_jwk, import_private_jwk, parse_jwks

ISSUER = "https://try-agent.example"
STATE = Path(".pactmw")
EXAMPLES = {  # what each example's TOML names: port, handler, tools, login page
    "flask": (
        5000,
        "examples.flask_app.app:support_bot",
        "examples.flask_app.app:shop_tools",
        "/login",
    ),
    "django": (8000, "shop.bot:support_bot", "shop.tools:shop_tools", "/accounts/login/"),
}
SCOPES = {
    "orders:read": "See your orders and their status",
    "orders:return": "Start a return for an order",
}


def _toml(value: Any) -> str:
    """A TOML literal for str / list / dict values (JSON strings are TOML strings)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"


def setup(example: str) -> None:
    port, handler, tools, login_url = EXAMPLES[example]
    base_url = f"http://127.0.0.1:{port}"
    key = generate_private_jwk("ES256", kid="try-1")
    STATE.mkdir(exist_ok=True)
    (STATE / f"try-{example}.json").write_text(json.dumps({"key": key.to_dict()}))
    scopes = "\n".join(f"{_toml(k)} = {_toml(v)}" for k, v in SCOPES.items())
    config = STATE / f"try-{example}.toml"
    config.write_text(
        f"""base_url = {_toml(base_url)}
audience = {_toml(base_url + "/a2a")}
store = {_toml(f"sqlite:///{STATE.resolve() / f'try-{example}.db'}")}
data_dir = {_toml(str(STATE.resolve()))}
delegation_brand = "shop"

[[agents]]
issuer = {_toml(ISSUER)}
name = "Try-it agent"
jwks = {_toml({"keys": [key.public.to_dict()]})}

[brands.shop]
name = "Acme Lamp Co. support"
handler = {_toml(handler)}

[brands.shop.delegation]
login = "same-app"
login_url = {_toml(login_url)}
tools = {_toml(tools)}
interval = 2

[brands.shop.delegation.scopes]
{scopes}
"""
    )
    print(f"wrote {config}; start the shop with PACTMW_CONFIG={config}")


class Agent:
    def __init__(self, example: str) -> None:
        self.path = STATE / f"try-{example}.json"
        self.state: dict[str, Any] = json.loads(self.path.read_text())
        self.key = import_private_jwk(json.dumps(self.state["key"]))
        base_url = f"http://127.0.0.1:{EXAMPLES[example][0]}"
        self.http = httpx.Client(base_url=f"{base_url}/a2a/shop", timeout=10)
        self.audience = f"{base_url}/a2a"

    def headers(self) -> dict[str, str]:
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": "me", "aud": self.audience, "iat": now, "exp": now + 120}
        return {"Authorization": f"Bearer {sign_compact(claims, self.key, typ='JWT')}"}

    def send(self, text: str, message_id: str) -> httpx.Response:
        message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
        if "context" in self.state:
            message["contextId"] = self.state["context"]
        headers = {**self.headers(), "Content-Type": "application/json"}
        if "access_token" in self.state:
            headers["X-A2A-User-Delegation"] = f"Bearer {self.state['access_token']}"
        return self.http.post("/message:send", json={"message": message}, headers=headers)

    def token(self, **form: str) -> httpx.Response:
        data = {"client_id": ISSUER, **form}
        return self.http.post("/oauth/token", data=data, headers=self.headers())

    def refresh(self) -> bool:
        """Refresh the delegation token (it lives an hour); False when there is none left."""
        refresh_token = self.state.pop("refresh_token", None)
        self.state.pop("access_token", None)
        if refresh_token is None:
            return False
        answer = self.token(grant_type="refresh_token", refresh_token=refresh_token)
        if answer.status_code == 200:
            self.state.update({k: answer.json()[k] for k in ("access_token", "refresh_token")})
        return answer.status_code == 200

    def authorize(self, scopes: list[str]) -> None:
        """RFC 8628: show the link, wait for the person's decision, keep the tokens."""
        started = self.http.post(
            "/oauth/device_authorization",
            data={"client_id": ISSUER, "scope": " ".join(scopes)},
            headers=self.headers(),
        ).json()
        link = started["verification_uri_complete"]
        print(f"\nOpen this link, log in to the shop and decide:\n  {link}\n")
        while True:
            time.sleep(started["interval"])
            answer = self.token(
                grant_type="urn:ietf:params:oauth:grant-type:device_code",
                device_code=started["device_code"],
            )
            error = answer.json().get("error")
            if error in ("authorization_pending", "slow_down"):
                continue
            if error is not None:
                sys.exit(f"not approved: {error}")
            tokens = answer.json()
            self.state.update({k: tokens[k] for k in ("access_token", "refresh_token")})
            print(f"approved scopes: {tokens['scope']}")
            return

    def say(self, text: str) -> None:
        message_id = str(uuid.uuid4())
        for _ in range(3):
            answer = self.send(text, message_id)
            if answer.status_code == 401 and "invalid_token" in answer.headers.get(
                "www-authenticate", ""
            ):
                if not self.refresh():
                    self.state.pop("access_token", None)
                continue
            answer.raise_for_status()
            body = answer.json()
            if "task" in body:  # step-up: the shop needs the person's permission first
                task = body["task"]
                self.state["context"] = task["contextId"]
                print(task["status"]["message"]["parts"][0]["text"])
                self.authorize(task["metadata"]["pact.missingScopes"])
                continue
            reply = body["message"]
            self.state["context"] = reply["contextId"]
            print(reply["parts"][0]["text"])
            receipt = reply.get("metadata", {}).get("pact.receipt")
            if receipt is not None:
                self.check(receipt)
            break
        self.path.write_text(json.dumps(self.state))

    def check(self, receipt: dict[str, Any]) -> None:
        scheme = self.http.get("/.well-known/agent-card.json").json()["securitySchemes"]
        metadata_url = scheme["userDelegation"]["oauth2SecurityScheme"]["oauth2MetadataUrl"]
        keys = parse_jwks(self.http.get(self.http.get(metadata_url).json()["jwks_uri"]).json())
        jws = parse_compact(receipt["jws"], allowed_algs=frozenset({"ES256", "RS256"}))
        for key in keys.candidates(jws.kid, jws.alg):
            verify_signature(jws, key)  # raises when it does not verify
            assert jws.claims() == receipt["claims"]
            print("receipt verified:", json.dumps(receipt["claims"]))
            return
        sys.exit("receipt signed by an unknown key")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("setup").add_argument("example", choices=sorted(EXAMPLES))
    say = commands.add_parser("say")
    say.add_argument("example", choices=sorted(EXAMPLES))
    say.add_argument("text")
    args = parser.parse_args()
    if args.command == "setup":
        setup(args.example)
    else:
        Agent(args.example).say(args.text)


if __name__ == "__main__":
    main()
