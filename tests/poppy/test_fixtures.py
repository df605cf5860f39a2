"""The SDK's JSON fixtures of the messages a Company reads parse with pactmw's readers."""

from __future__ import annotations

import json

from pactmw.core.client_metadata import parse_client_metadata
from pactmw.core.jwk import parse_jwks, thumbprint
from pactmw.protocols.poppy import parse_conversation_start
from tests.poppy.conftest import sdk_fixture


def test_client_metadata_fixture() -> None:
    document = sdk_fixture("client-metadata-valid.json")
    metadata = parse_client_metadata(
        document["client_id"], json.dumps(document).encode(), "application/json"
    )
    assert metadata.client_name == "Example Agent"
    assert metadata.jwks_uri == "https://agent.example/jwks.json"
    # A third-party extension is kept as data, never refused (PAP-3.3-03).
    assert metadata.extensions["example.org/preferences"] == {"version": "2", "mode": "compact"}
    assert metadata.extensions["operations"] == {"version": "1"}


def test_jwks_fixture() -> None:
    keys = parse_jwks(sdk_fixture("jwks-valid.json"))
    (key,) = keys.candidates("agent-signing-2026-10", "ES256")
    # The fixture's key is RFC 9449's example key: its thumbprint is RFC 9449 §6.1's jkt.
    assert key.thumbprint == thumbprint(dict(key.members))
    assert key.thumbprint == "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"


def test_a_conversation_message_built_from_the_events_fixture() -> None:
    page = sdk_fixture("conversation-events-valid.json")
    sent = {k: v for k, v in page["events"][0]["message"].items() if k in ("id", "text", "data")}
    body = json.dumps({"message": {**sent, "sender": "agent"}}).encode()
    message, parent = parse_conversation_start(body)
    assert message.content() == {**sent, "sender": "agent"}
    assert parent is None
