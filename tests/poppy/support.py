"""What the Poppy tests share: which SDK conformance cases each test file runs (the ledger the
whole-runner and coverage tests check), the discovery site configuration, and small helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from pactmw.config import ConfigError
from tests.support.poppy_world import BASE_URL, SHOP

#: The SDK's company cases that step 4 (Sessions, no sign-in, API or conversation yet) can
#: run; each must pass, never skip.
STEP_4_CASES = (
    "lifecycle.signed-out-session",
    "lifecycle.renew-for-another-user",
    "security.client-assertion-alg-none",
    "security.client-assertion-hs256-public-key",
    "security.client-assertion-rs256-header-on-ec-key",
    "security.client-assertion-embedded-key-ignored",
    "security.client-assertion-bad-audience",
    "security.client-assertion-audience-array",
    "security.client-assertion-token-endpoint-audience",
    "security.session-assertion-bad-audience",
    "security.session-assertion-token-endpoint-audience",
    "security.session-assertion-five-minutes",
    "security.session-assertion-wrong-issuer",
    "security.session-assertion-clock-skew-tolerated",
    "security.session-assertion-from-the-future",
    "security.session-assertion-expired",
    "security.session-assertion-long-lived",
    "security.session-assertion-replay",
    "security.browser-assertion-at-token-endpoint",
    "security.token-request-without-dpop",
    "security.token-dpop-with-ath",
    "security.token-responses-not-cached",
    # The app's own API behind poppy_session_required (plan step 8, ASGI first).
    "lifecycle.renew-signed-out",
    "security.dpop-alg-none",
    "security.dpop-wrong-signature",
    "security.dpop-other-key",
    "security.dpop-method-mismatch",
    "security.dpop-url-mismatch",
    "security.dpop-stale",
    "security.dpop-replay",
    "security.dpop-token-hash-mismatch",
    "security.dpop-missing",
    "security.dpop-token-as-bearer",
    "security.token-in-url-refused",
    "security.dpop-header-twice",
)


#: The SDK's conversation cases pactmw's company runs; each must pass, never skip.
CONVERSATION_CASES = (
    "conversations.start-and-reply",
    "conversations.retry-replays",
    "conversations.message-id-conflict",
    "conversations.invalid-cursor",
    "conversations.has-more-drained",
    "conversations.empty-read",
    "conversations.read-fields",
    "conversations.attribution",
    "conversations.closed",
    "conversations.not-found-indistinguishable",
    "lifecycle.parallel-sessions",
)


#: The SDK's cases that need a person to sign in; each must pass, never skip.
SIGNED_IN_CASES = (
    "conversations.authorization-then-same-conversation",
    "conversations.signed-out-token-on-account-conversation",
)


#: The SDK's company cases about sign-in, Account Tokens and sign-out: each must pass.
SIGN_IN_CASES = (
    "lifecycle.sign-in-scopes",
    "lifecycle.unknown-scope-refused",
    "lifecycle.account-token-signs-in-new-session",
    "lifecycle.rotated-token",
    "lifecycle.narrower-scopes",
    "lifecycle.wider-scopes-refused",
    "lifecycle.account-token-from-another-client",
    "lifecycle.account-token-at-api",
    "lifecycle.account-mismatch",
    "lifecycle.account-mismatch-after-sign-out",
    "lifecycle.account-token-for-another-users-session",
    "lifecycle.sign-out-takes-effect",
    "lifecycle.sign-out-session-continues",
    "lifecycle.sign-out-every-session",
    "lifecycle.disconnect-from-account-settings",
)


#: The SDK's operation cases this company runs; each must pass, never skip.
OPERATION_CASES = (
    "operations.proposed-not-performed",
    "operations.readable-until-final",
    "operations.confirm-succeeded",
    "operations.at-most-once",
    "operations.terms-changed",
    "operations.user-approval-required",
    "operations.message-is-not-approval",
    "operations.confirm-timeout-recovery",
    "operations.cancel-proposed",
    "operations.in-progress-outcome-unknown",
    "operations.failed-partial-result",
    "operations.not-found-indistinguishable",
    "operations.cross-channel-identity",
    "operations.standing-permission-within-bounds",
    "operations.standing-permission-out-of-bounds",
    "operations.standing-permission-concurrent-use",
    "protocol.extension-required-company",
)


#: The runner's cases no other file runs; each must pass on both stores.
MORE_CASES = (
    "security.authorization-header-without-cookies",
    "security.refusals-disclose-no-credential",
    "protocol.feedback-report",
)


#: Every case a pactmw test runs, by the file that runs it.
RUN_CASES: Mapping[str, tuple[str, ...]] = {
    "tests/poppy/test_company_endpoints.py": STEP_4_CASES,
    "tests/poppy/test_conversations.py": CONVERSATION_CASES,
    "tests/poppy/test_conversations_signed_in.py": SIGNED_IN_CASES,
    "tests/poppy/test_device_sign_in.py": SIGN_IN_CASES,
    "tests/poppy/test_operations.py": OPERATION_CASES,
    "tests/poppy/test_conformance_whole.py": MORE_CASES,
}


def run_case_ids() -> list[str]:
    """Every case id some pactmw test runs (repeats included, to be caught)."""
    return [case_id for cases in RUN_CASES.values() for case_id in cases]


def site_config() -> dict[str, Any]:
    return {
        "audience": f"{BASE_URL}/a2a",
        "base_url": BASE_URL,
        "store": "memory://",
        "brands": {
            "shop": {
                "name": "Shop",
                "handler": "tests.support.poppy_world:bot",
                "poppy": {
                    "domain": SHOP,
                    "domains": [SHOP, "www.shop.example"],
                    "agents": "any",
                    "custom_scopes": {"orders:read": "Read your orders"},
                    "apis": [
                        {
                            "type": "openapi",
                            "url": f"{BASE_URL}/openapi.json",
                            "description": "Orders",
                        }
                    ],
                },
            }
        },
    }


#: (the Brand asked for, what the error says of it): a typo, and a Brand without Poppy.
NOT_POPPY = [
    pytest.param("shopp", "Brand 'shopp' is not one of the Provider's brands", id="typo"),
    pytest.param("acme", "Brand 'acme' does not enable Poppy", id="no-poppy"),
]


def assert_names(error: ConfigError, setting: str, said: str) -> None:
    message = str(error)
    assert message.startswith(setting), message
    assert said in message, message
    assert "Brands with Poppy: 'shop'" in message, message


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)
