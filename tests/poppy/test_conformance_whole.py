"""The SDK's whole conformance runner against pactmw's company: every company case of
`personal_agent_protocol.conformance` is either run by a pactmw test (on sqlite and
PostgreSQL, where each must pass, never skip) or named here as not supported, with the
reason. A case the SDK adds, or one a test stops running, fails
`test_every_runner_case_is_run_or_listed_as_not_supported`.

The runner's cases are spread over the test files of the part they prove (each runs its
cases by id against the TLS world of tests/support/poppy_world.py, several with a person
approving sign-ins in headless Chromium); this file runs the cases no other file does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
from personal_agent_protocol.conformance import select_cases

from tests.poppy.support import MORE_CASES, run_case_ids
from tests.support.poppy_world import (
    BrowserDriver,
    PoppyWorld,
    case_param,
    signed_in_brand,
    world_fixture,
)

_MCP = "pactmw has no MCP server (its Brands list OpenAPI APIs only)"
_WEB = "web browsing (§5, poppy-browser+jwt and the company's cookie) is not offered"
_SSE = "conversations answer JSON only: no Server-Sent Events stream"

#: The runner's cases pactmw's company cannot pass yet, each with why (docs/poppy.md, "What
#: pactmw does not do yet", says the same).
NOT_SUPPORTED: Mapping[str, str] = {
    "lifecycle.mcp-protected-resource-metadata": _MCP,
    "lifecycle.mcp-bearer-for-its-url": _MCP,
    "lifecycle.mcp-bearer-only-at-mcp": _MCP,
    "lifecycle.mcp-token-type-by-server": _MCP,
    "lifecycle.mcp-sign-out-takes-effect": _MCP,
    "lifecycle.browser-joins-session": _WEB,
    "lifecycle.browser-assertion-refused": _WEB,
    "conversations.cursor-expired-recovery": (
        "events are kept as long as their conversation, so no cursor ever expires"
    ),
    "conversations.sse-reconnect": _SSE,
    "conversations.text-delta-not-actionable": _SSE,
    "conversations.handoff": "no handoff to people (no staff side)",
    "conversations.direct-conversation": "no Direct Conversations",
    "conversations.direct-of-direct-refused": "no Direct Conversations",
    "operations.cross-channel-mcp": _MCP,
    "operations.web-confirm-at-most-once": (
        "no operation page or web confirmation on the Brand's site (`url` is the Brand's)"
    ),
    "operations.expired": (
        "the case waits for a proposal to expire on the company's clock; pactmw's own "
        "test_an_expired_proposal_reads_expired_and_is_never_performed proves it with a "
        "shared clock"
    ),
}


def test_every_runner_case_is_run_or_listed_as_not_supported() -> None:
    runner = {case.id for case in select_cases()}
    run = run_case_ids()
    assert len(run) == len(set(run)), "a case is run by two files"
    assert not set(run) & set(NOT_SUPPORTED), "a case is both run and listed as not supported"
    assert set(run) | set(NOT_SUPPORTED) == runner, (
        f"new in the runner: {sorted(runner - set(run) - set(NOT_SUPPORTED))}; "
        f"no longer in it: {sorted((set(run) | set(NOT_SUPPORTED)) - runner)}"
    )
    assert all(reason.strip() for reason in NOT_SUPPORTED.values())


world = world_fixture(signed_in_brand())


@pytest.fixture(scope="module")
def person(world: PoppyWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserDriver]:
    """The person who approves the sign-ins some cases need, in headless Chromium."""
    with world.chromium(tmp_path_factory) as browser:
        yield world.browser_driver(browser)


@pytest.mark.parametrize("case_id", [case_param(case_id) for case_id in MORE_CASES])
def test_sdk_conformance_case(world: PoppyWorld, person: BrowserDriver, case_id: str) -> None:
    world.assert_case_passes(case_id, driver=person)
