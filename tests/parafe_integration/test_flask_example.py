"""Parafé end to end through the Flask example shop, run as a real server process.

The shop (`examples/flask_app/app.py`) gets a `[brands.shop.parafe]` table pointing at the
fake broker (a real HTTP server in this process). A calling agent with its own Ed25519 key
(registered at the broker: DID document) gets consent tokens from the broker (issued in
process with the broker's key), attaches a fresh presentation proof to every message
(`ConsentPresenter`) and talks to the shop's bot over real HTTP, with its PACT JWT too. The
shop's receipts are checked with `ReceiptVerifier` against its DID document at the broker.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.core.fetch import FetchPolicy
from pactmw.core.jose import parse_compact, sign_compact, verify_signature
from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    BrokerKeys,
    ConsentPresenter,
    ReceiptVerifier,
    consent_ref,
    read_parafe,
)
from tests.parafe_integration.support import (
    CREDENTIAL,
    SCOPE,
    SHOP_AGENT,
    World,
    a2a_message,
    parafe_headers,
)
from tests.support.net import free_port, loopback_client
from tests.support.servers import REPO, process_server
from tests.support.toml import toml_value

ISSUER = "https://agent.example"
BRAND = "shop"


def write_config(tmp: Path, port: int, pa_key: PrivateJWK, world: World) -> Path:
    base = f"http://127.0.0.1:{port}"
    parafe = world.parafe_table()
    lines = [
        f"base_url = {toml_value(base)}",
        f"audience = {toml_value(base + '/a2a')}",
        f"store = {toml_value('sqlite:///' + str(tmp / 'pactmw.db'))}",
        "",
        "[[agents]]",
        f"issuer = {toml_value(ISSUER)}",
        f"jwks = {toml_value({'keys': [pa_key.public.to_dict()]})}",
        "",
        f"[brands.{BRAND}]",
        'name = "Acme Lamp Co. support"',
        'handler = "examples.flask_app.app:support_bot"',
        "",
        f"[brands.{BRAND}.parafe]",
        *(f"{k} = {toml_value(v)}" for k, v in parafe.items()),
    ]
    config = tmp / "pactmw.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


@dataclass
class Shop:
    base_url: str
    client: httpx.Client
    pa_key: PrivateJWK
    world: World

    def pact_jwt(self) -> str:
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "sub": "user-1",
            "aud": f"{self.base_url}/a2a",
            "iat": now,
            "exp": now + 120,
            "jti": str(uuid.uuid4()),
        }
        return sign_compact(claims, self.pa_key, typ="JWT")

    def send(self, message: dict[str, Any], *, parafe: bool = True) -> httpx.Response:
        headers = parafe_headers() if parafe else {"Content-Type": "application/a2a+json"}
        headers["Authorization"] = f"Bearer {self.pact_jwt()}"
        return self.client.post(
            f"/a2a/{BRAND}/message:send", content=json.dumps({"message": message}), headers=headers
        )

    def receipts(self) -> ReceiptVerifier:
        policy = FetchPolicy(allow_http_on_loopback=True)
        return ReceiptVerifier(BrokerKeys(self.world.url, fetch_policy=policy))


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    tmp = tmp_path_factory.mktemp("flask-parafe")
    world = World(tmp)
    port = free_port()
    pa_key = generate_private_jwk("ES256", kid="pa-1")
    config = write_config(tmp, port, pa_key, world)
    argv = [sys.executable, "examples/flask_app/app.py", "--port", str(port)]
    base_url = f"http://127.0.0.1:{port}"
    try:
        with (
            process_server(
                argv, port, env={"PACTMW_CONFIG": str(config)}, cwd=REPO, log=tmp / "server.log"
            ),
            loopback_client(base_url=base_url, timeout=10) as client,
        ):
            yield Shop(base_url, client, pa_key, world)
    finally:
        world.close()


def reply_message(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    message: dict[str, Any] = response.json()["message"]
    assert message["role"] == "ROLE_AGENT"
    return message


def parafe_data(message: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = message["metadata"][EXTENSION_URI]
    assert EXTENSION_URI in message["extensions"]
    read_parafe(message)  # what a Parafé reader accepts
    return data


def test_the_card_declares_parafe(shop: Shop) -> None:
    card = shop.client.get(f"/a2a/{BRAND}/.well-known/agent-card.json").json()
    (entry,) = card["capabilities"]["extensions"]
    assert entry["uri"] == EXTENSION_URI
    assert entry["required"] is False
    assert entry["params"]["agent_id"] == SHOP_AGENT
    assert entry["params"]["broker_url"] == shop.world.url
    assert entry["params"]["minimum_identity_assurance"] == "self_registered"
    assert entry["params"]["scope_requirements"][SCOPE]["permissions"] == [
        "read_orders",
        "create_order",
    ]


def test_order_with_consent_then_replay_then_excluded_action(shop: Shop) -> None:
    presenter = shop.world.presenter()
    verifier = shop.receipts()

    # 1. An order, with consent and a fresh proof bound to this message.
    first = presenter.attach(a2a_message("Please buy a walnut desk lamp."))
    response = shop.send(first)
    assert response.headers["a2a-extensions"] == EXTENSION_URI
    message = reply_message(response)
    text = message["parts"][0]["text"]
    assert text.startswith("Order P-"), text
    number = message["parts"][1]["data"]["order"]["number"]
    (receipt,) = parafe_data(message)["action_receipts"]
    checked = verifier.verify_action_receipt(
        receipt, expected_session_id=presenter.session_id, consent_token=presenter.token
    )
    assert (checked.action, checked.result, checked.error) == ("create_order", "success", None)
    assert checked.business_ref == number
    assert checked.consent_ref == consent_ref(presenter.token)
    assert checked.iss == f"did:web:api.parafe.ai:agents:{SHOP_AGENT}"
    assert shop.client.get(f"/orders/{number}").json()["item"] == "walnut desk lamp"
    context_id = message["contextId"]

    # 2. The very same message again (same proof) in a new conversation: a replay.
    replayed = reply_message(shop.send(first))
    assert replayed["contextId"] != context_id
    data = parafe_data(replayed)
    assert data["error"]["code"] == "INVALID_PROOF"
    assert "already used" in data["error"]["message"]
    (refusal,) = data["action_receipts"]
    refused = verifier.verify_action_receipt(refusal, consent_token=presenter.token)
    assert (refused.action, refused.result, refused.error) == (
        "create_order",
        "error",
        "proof_invalid",
    )

    # 3. An action the consent excludes, in the first conversation: refused, receipt "excluded".
    refund = presenter.attach(a2a_message("Please refund order A-1001.", context_id=context_id))
    response = shop.send(refund)
    excluded = reply_message(response)
    data = parafe_data(excluded)
    assert data["error"]["code"] == "SCOPE_VIOLATION"
    (receipt,) = data["action_receipts"]
    checked = verifier.verify_action_receipt(receipt, expected_session_id=presenter.session_id)
    assert (checked.action, checked.result, checked.error) == ("issue_refund", "error", "excluded")

    # 4. A retry of that message (lost response): byte-identical, receipt included.
    again = shop.send(refund)
    assert again.content == response.content


def test_unscoped_questions_need_no_parafe(shop: Shop) -> None:
    # required = false: a question outside any Parafé scope is answered as before.
    response = shop.send(a2a_message("Where is my order A-1001?"), parafe=False)
    message = reply_message(response)
    assert "A-1001" in message["parts"][0]["text"]
    assert "metadata" not in message or EXTENSION_URI not in message["metadata"]
    assert "a2a-extensions" not in response.headers


def test_an_order_without_consent_is_refused_without_a_receipt(shop: Shop) -> None:
    message = reply_message(shop.send(a2a_message("Please buy a linen throw.")))
    data = parafe_data(message)
    assert data["error"]["code"] == "MISSING_PARAFE_EXTENSION"
    assert "action_receipts" not in data  # nothing to bind a receipt to


def test_receipts_are_filed_with_the_broker(shop: Shop) -> None:
    presenter = shop.world.presenter()
    message = reply_message(shop.send(presenter.attach(a2a_message("Buy a ceramic mug set."))))
    (receipt,) = parafe_data(message)["action_receipts"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        filed = [r for r in shop.world.broker.filed if r["body"].get("receipt") == receipt]
        if filed:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the receipt was not filed")
    record = filed[0]
    assert record["session_id"] == presenter.session_id
    assert record["authorization"] == f"Bearer {CREDENTIAL}"
    pop = parse_compact(record["pop"], allowed_algs=frozenset({"EdDSA"}))
    verify_signature(pop, shop.world.shop_key.public)
    claims = pop.claims()
    assert pop.header["typ"] == "parafe-pop+jwt"
    assert "kid" not in pop.header
    assert claims["htm"] == "POST"
    assert claims["htu"] == (f"{shop.world.url}/sessions/{presenter.session_id}/action-receipts")
    assert claims["session_id"] == presenter.session_id
    assert len(claims["jti"]) >= 16


def test_the_apps_own_endpoint_with_parafe_action(shop: Shop) -> None:
    presenter: ConsentPresenter = shop.world.presenter()
    body = json.dumps({"message": presenter.attach(a2a_message("linen throw"))})
    response = shop.client.post(
        "/api/agent/orders", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200, response.text
    # The answer carries Parafé data (the receipt), so it names the extension, as refusals do.
    assert response.headers["a2a-extensions"] == EXTENSION_URI
    message = response.json()["message"]
    number = message["parts"][1]["data"]["order"]
    (receipt,) = parafe_data(message)["action_receipts"]
    checked = shop.receipts().verify_action_receipt(receipt, consent_token=presenter.token)
    assert (checked.action, checked.result, checked.business_ref) == (
        "create_order",
        "success",
        number,
    )

    # The same body again: the proof is spent; an A2A-shaped refusal with its receipt.
    refused = shop.client.post(
        "/api/agent/orders", content=body, headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 403
    data = parafe_data(refused.json()["message"])
    assert data["error"]["code"] == "INVALID_PROOF"
    (receipt,) = data["action_receipts"]
    assert shop.receipts().verify_action_receipt(receipt).error == "proof_invalid"

    # No consent at all: refused, nothing to bind a receipt to.
    bare = shop.client.post("/api/agent/orders", json={"message": a2a_message("mug")})
    assert bare.status_code == 403
    assert parafe_data(bare.json()["message"])["error"]["code"] == "MISSING_PARAFE_EXTENSION"
