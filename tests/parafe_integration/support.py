"""A small Parafé world for the integration tests: a broker, a receiving agent, a caller."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pactmw.core.encoding import json_dumps
from pactmw.core.http import Response
from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.protocols.parafe import EXTENSION_URI, ConsentPresenter, activation_headers
from pactmw.provider import Provider, ProviderSettings
from pactmw.provider.parafe import ParafeConfig
from tests.parafe_integration.broker import IssuingBroker
from tests.provider import Kit, sync_drive
from tests.support.agent import user_message
from tests.support.parties import AUDIENCE

#: The receiving agent (the shop) and the calling agent, by their Parafé ids.
SHOP_AGENT = "prf_agent_shop0001"
CALLER_AGENT = "prf_agent_caller01"
SCOPE = "order-lamps"
PERMISSIONS = ["read_orders", "create_order"]
EXCLUSIONS = ["issue_refund"]
CREDENTIAL = "test-credential-not-a-real-one"


class World:
    """The broker (started), the shop's receipt key (a JWK file) and the caller's key."""

    def __init__(self, tmp: Path, *, shop_alg: str = "EdDSA") -> None:
        self.broker = IssuingBroker().start()
        self.shop_key: PrivateJWK = generate_private_jwk(shop_alg)
        self.caller_key: PrivateJWK = generate_private_jwk("EdDSA")
        self.broker.register(SHOP_AGENT, self.shop_key.public, CREDENTIAL)
        self.broker.register(CALLER_AGENT, self.caller_key.public)
        self.key_file = tmp / "shop-parafe.jwk"
        self.key_file.write_text(json.dumps(self.shop_key.to_dict()))
        self.credential_file = tmp / "shop-credential.txt"
        self.credential_file.write_text(CREDENTIAL)

    def close(self) -> None:
        self.broker.close()

    def config(self, **overrides: Any) -> ParafeConfig:
        """The shop's Parafé configuration against this broker; `overrides` replace options."""
        options: dict[str, Any] = {
            "agent_id": SHOP_AGENT,
            "broker_url": self.url,
            "allow_http_broker_on_loopback": True,
            "signing_key": self.shop_key,
            "scope_requirements": {
                SCOPE: {"permissions": PERMISSIONS, "minimum_authorization_modality": "autonomous"}
            },
        }
        options.update(overrides)
        return ParafeConfig(**options)

    @property
    def url(self) -> str:
        return self.broker.url

    def parafe_table(self, **overrides: Any) -> dict[str, Any]:
        """A `[brands.X.parafe]` table for the shop, against this broker."""
        table: dict[str, Any] = {
            "agent_id": SHOP_AGENT,
            "broker_url": self.url,
            "allow_http_broker_on_loopback": True,
            "signing_key": str(self.key_file),
            "scope_requirements": {
                SCOPE: {
                    "permissions": list(PERMISSIONS),
                    "minimum_authorization_modality": "autonomous",
                }
            },
            "file_receipts": True,
            "credential_file": str(self.credential_file),
        }
        table.update(overrides)
        return table

    def presenter(self, **claims: Any) -> ConsentPresenter:
        """A fresh session for the caller: a consent token and a presenter of proofs."""
        options: dict[str, Any] = {
            "initiator_id": CALLER_AGENT,
            "initiator_key": self.caller_key.public,
            "target_id": SHOP_AGENT,
            "scope": SCOPE,
            "permissions": list(PERMISSIONS),
            "exclusions": list(EXCLUSIONS),
        }
        options.update(claims)
        token, session_id = self.broker.issue(**options)
        return ConsentPresenter(token=token, session_id=session_id, key=self.caller_key)


def a2a_message(text: str, *, context_id: str | None = None) -> dict[str, Any]:
    return user_message(text, context_id=context_id)


def parafe_headers() -> dict[str, str]:
    return {**activation_headers(), "Content-Type": "application/a2a+json"}


ACTIVATE = (("a2a-extensions", EXTENSION_URI),)


def send(
    kit: Kit,
    provider: Provider,
    message: dict[str, Any],
    *,
    headers: tuple[tuple[str, str], ...] = ACTIVATE,
    drive: Any = sync_drive,
) -> Response:
    request = kit.request("POST", "/a2a/acme/message:send", token=kit.token(), headers=headers)
    response: Response = drive(provider, request, json_dumps({"message": message}))
    return response


def body(response: Response) -> dict[str, Any]:
    assert response.status == 200, response.body
    parsed: dict[str, Any] = json.loads(response.body)
    return parsed


def settings(world: World, parafe: dict[str, Any]) -> ProviderSettings:
    return ProviderSettings.from_mapping(
        {
            "base_url": "https://provider.example",
            "audience": AUDIENCE,
            "agents": [],
            "brands": {"acme": {"handler": lambda t: "hi", "parafe": parafe}},
        }
    )


def issue_options(world: World) -> dict[str, Any]:
    return {
        "initiator_id": CALLER_AGENT,
        "initiator_key": world.caller_key.public,
        "target_id": SHOP_AGENT,
        "scope": SCOPE,
        "permissions": list(PERMISSIONS),
        "exclusions": list(EXCLUSIONS),
    }
