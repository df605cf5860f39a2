"""Poppy edges, over the TLS world with the SDK's personal agent signing every request: a
bot that proposes an action no executor performs (a mistake in the Brand's code, as the
executors are known at startup) is answered once, without the operation, and logged at
ERROR naming the action; it is not a `503` the agent retries for ever.

(An executor registered under an empty action is refused at startup:
tests/poppy/test_operation_values.py and test_company_settings.py. A token request whose
body is not sent as a form is `invalid_request` on every adapter:
tests/adapters/test_contract.py.)"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Iterator
from typing import Any

import attrs
import httpx
import pytest

from pactmw.provider import Reply, Turn
from pactmw.provider.poppy import OperationRun, OperationsConfig, Performed, Proposal
from tests.support.poppy_world import PoppyWorld, RunCounter, poppy_brand, world_on

#: The action the bot proposes: a typo of the one the Brand registered.
MISSPELT = "refnud"
RUNS = RunCounter()


def refund(run: OperationRun) -> Performed:
    return Performed(summary="Refunded.")


def misspelt_bot(turn: Turn) -> Reply:
    RUNS.count(turn)
    proposal = Proposal(action=MISSPELT, summary="Refund order 7: USD 20.00.")
    return Reply(text="Shall I refund order 7?", operation=proposal)


@pytest.fixture(scope="module", params=["sqlite"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoppyWorld]:
    brand = poppy_brand(operations=OperationsConfig(executors={"refund": refund}))
    yield from world_on(
        request, tmp_path_factory, brands=(attrs.evolve(brand, handler=misspelt_bot),)
    )


def _message(text: str) -> dict[str, str]:
    return {"id": "msg_" + secrets.token_hex(12), "sender": "agent", "text": text}


def test_a_bot_proposing_an_action_without_an_executor_is_answered_once_and_logged(
    world: PoppyWorld, caplog: pytest.LogCaptureFixture
) -> None:
    message = _message("Please refund order 7.")

    async def scenario() -> tuple[httpx.Response, httpx.Response, Any]:
        async with world.conversing() as c:
            first = await c.call("POST", c.endpoint, {"message": message})
            # The agent's retry (it had no answer, or it lost it): the stored answer again.
            again = await c.call("POST", c.endpoint, {"message": message})
            events = None
            if first.status_code == 201:
                events = await c.read_events(first.json()["conversation_id"])
            return first, again, events

    with caplog.at_level(logging.ERROR, logger="pactmw.poppy"):
        first, again, events = asyncio.run(scenario())
    # Before: the turn failed on the proposal, a `503 temporarily_unavailable` the agent
    # was told to retry, and every retry ran the bot into the same mistake.
    assert first.status_code == 201, first.text
    assert again.status_code == 201, again.text
    assert again.json()["conversation_id"] == first.json()["conversation_id"]
    assert RUNS.runs[message["id"]] == 1
    # The bot's words reach the agent; no operation does: nothing could perform it.
    company = [e.message for e in events.events if e.message and e.message.role == "company"]
    assert [m.text for m in company] == ["Shall I refund order 7?"]
    assert [m.operation for m in company] == [None]
    errors = [r for r in caplog.records if r.name == "pactmw.poppy" and r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    said = errors[0].getMessage()
    assert repr(MISSPELT) in said, said
    assert "no executor is registered" in said, said
    assert "brands.shop.poppy.operations.executors" in said, said
    assert errors[0].exc_info is None  # a mistake named, not a traceback
