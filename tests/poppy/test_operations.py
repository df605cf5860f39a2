"""Poppy Operations v1 over real TLS, driven by the SDK's own personal agent: the shop's
API proposes (`202 {"operation"}` through `poppy_session_required` and
`Provider.apoppy_propose`), the agent confirms at the operations endpoint, the shop's
executors perform, and the SDK's `operations.*` conformance cases run by id, with a person
signing in in headless Chromium, on sqlite and PostgreSQL (plan step 7,
docs/design/poppy.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from personal_agent_protocol.conformance import run_conformance, select_cases

from tests.support.chromium import headless_chromium
from tests.support.poppy_world import (
    OPERATIONS_SCENARIO,
    OperationsDriver,
    PoppyWorld,
    ShopExecutors,
    signed_in_brand,
    world_on,
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
    "protocol.extension-required-company",
)


@pytest.fixture(scope="module")
def executors() -> ShopExecutors:
    return ShopExecutors()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    executors: ShopExecutors,
) -> Iterator[PoppyWorld]:
    brand = signed_in_brand(operations=executors.config())
    yield from world_on(request, tmp_path_factory, brands=(brand,))


@pytest.fixture(scope="module")
def person(
    world: PoppyWorld, executors: ShopExecutors, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperationsDriver]:
    profile: Path = tmp_path_factory.mktemp("chromium") / "profile"
    with headless_chromium(profile, *world.chromium_arguments()) as browser:
        yield OperationsDriver(world.plain, browser, world.provider, executors)


def _named(case_id: str) -> Any:
    (case,) = select_cases(ids=[case_id])
    return pytest.param(case_id, id=f"{case_id}[{'+'.join(case.requirements)}]")


@pytest.mark.parametrize("case_id", [_named(case_id) for case_id in OPERATION_CASES])
def test_sdk_operations_case(world: PoppyWorld, person: OperationsDriver, case_id: str) -> None:
    async def one() -> Any:
        async with world.http() as http:
            context = world.context(http, driver=person, scenario=OPERATIONS_SCENARIO)
            report = await run_conformance(context, cases=select_cases(ids=[case_id]))
        return report.results

    (result,) = asyncio.run(one())
    assert (result.id, result.outcome, result.message) == (case_id, "passed", None)
