"""`pactmw.provider.parafe` exports exactly what the Provider, the guard and apps use
(the adapters' body limit moved to `pactmw.provider.guard`)."""

from __future__ import annotations

import pactmw.provider.parafe as parafe

EXPECTED = {
    "CLOSED_SESSION_MEMORY",
    "DEFAULT_DESCRIPTION",
    "HANDSHAKE_COMPLETE_PATH",
    "REQUEST_KEY",
    "AcknowledgmentLog",
    "Filing",
    "HandshakeCompleter",
    "MemoryAcknowledgments",
    "ParafeAgent",
    "ParafeConfig",
    "ParafeConsent",
    "ParafeRefused",
    "ParafeTurn",
    "ReceiptFiler",
    "RefusalMode",
    "add_receipts_to_json",
    "endpoint_message",
    "handshake_data",
    "refusal_task",
    "reply_extensions",
    "select_agent",
}


def test_exports_are_exact() -> None:
    assert set(parafe.__all__) == EXPECTED
    assert len(parafe.__all__) == len(EXPECTED)


def test_each_export_resolves() -> None:
    for name in parafe.__all__:
        assert getattr(parafe, name) is not None, name


def test_the_import_paths_the_provider_and_adapters_use() -> None:
    from pactmw.provider.parafe import (
        REQUEST_KEY,
        ParafeAgent,
        ParafeConfig,
        ParafeRefused,
        ParafeTurn,
        endpoint_message,
        refusal_task,
        select_agent,
    )

    assert REQUEST_KEY == "pactmw.parafe"
    assert all(
        callable(value)
        for value in (
            ParafeAgent,
            ParafeConfig,
            ParafeRefused,
            ParafeTurn,
            endpoint_message,
            refusal_task,
            select_agent,
        )
    )
