"""Poppy Operations v1 over real TLS, driven by the SDK's own personal agent: the shop's
API proposes (`202 {"operation"}` through `poppy_session_required` and
`Provider.apoppy_propose`), the agent confirms at the operations endpoint, the shop's
executors perform, and the SDK's `operations.*` conformance cases run by id, with a person
signing in in headless Chromium, on sqlite and PostgreSQL (plan step 7,
docs/design/poppy.md)."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from personal_agent_protocol.models import Message, Operation
from personal_agent_protocol.operations import approve
from personal_agent_protocol.requirements import protocol_path

from tests.poppy.support import OPERATION_CASES
from tests.support.poppy_world import (
    ACCOUNTS,
    BASE_URL,
    CANCEL_PROMPT,
    OPERATION_PROMPT,
    OPERATIONS_SCENARIO,
    SHOP,
    OperationsDriver,
    PoppyWorld,
    ShopExecutors,
    case_param,
    dpop_call,
    dpop_headers,
    operations_bot,
    signed_in_brand,
    world_fixture,
)

#: The shop's executors in both worlds (sqlite, PostgreSQL): operation ids never repeat.
EXECUTORS = ShopExecutors()

world = world_fixture(
    attrs.evolve(
        signed_in_brand(operations=EXECUTORS.config()),
        handler=operations_bot,
        tools=EXECUTORS.tools(),
    )
)


@pytest.fixture(scope="module")
def executors() -> ShopExecutors:
    return EXECUTORS


@pytest.fixture(scope="module")
def person(
    world: PoppyWorld, executors: ShopExecutors, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperationsDriver]:
    with world.chromium(tmp_path_factory) as browser:
        yield OperationsDriver(world.plain, browser, world.provider, executors)


@pytest.mark.parametrize("case_id", [case_param(case_id) for case_id in OPERATION_CASES])
def test_sdk_operations_case(world: PoppyWorld, person: OperationsDriver, case_id: str) -> None:
    world.assert_case_passes(case_id, driver=person, scenario=OPERATIONS_SCENARIO)


# -- the rules beyond the SDK's cases ----------------------------------------------------------

REFUND = "/api/orders/ord_7/refund"


def _message(text: str) -> Message:
    return Message(id="msg_" + secrets.token_urlsafe(12), sender="agent", text=text)


async def _signed_in(ctx: Any, granted: tuple[str, ...] | None = None) -> tuple[str, Any]:
    user = ctx.new_user()
    signed = await ctx.sign_in(user, await ctx.session(user), granted=granted)
    return user, signed


async def _propose(ctx: Any, user: str, token: Any, path: str = REFUND) -> Operation:
    answer = await ctx.agent.api.call(
        "POST", ctx.url(path), token=token, body={}, **(await ctx.who(user))
    )
    assert answer.status == 202
    assert isinstance(answer.operation, Operation)
    return answer.operation


def _in_world(world: PoppyWorld, person: OperationsDriver, test: Any) -> Any:
    async def one() -> Any:
        async with world.http() as http:
            return await test(world.context(http, driver=person, scenario=OPERATIONS_SCENARIO))

    return asyncio.run(one())


def test_one_operation_across_the_api_the_conversation_and_racing_confirms(
    world: PoppyWorld, person: OperationsDriver, executors: ShopExecutors
) -> None:
    async def test(ctx: Any) -> None:
        user, signed = await _signed_in(ctx)
        who = await ctx.who(user)
        operation = await _propose(ctx, user, signed.token)
        # The bot proposes the same refund: the same operation (OPS-4-01), not performed.
        page = await ctx.agent.conversations.start(
            await ctx.conversations_endpoint(),
            _message(OPERATION_PROMPT),
            token=signed.token,
            wait=0,
            **who,
        )
        carried = [e.message.operation for e in page.events if e.message and e.message.operation]
        assert [o.operation_id for o in carried] == [operation.operation_id]
        assert await _propose(ctx, user, signed.token) == operation
        assert executors.performed[operation.operation_id] == 0
        endpoint = await ctx.operations_endpoint()
        outcomes = await asyncio.gather(
            *(
                ctx.agent.operations.confirm(
                    endpoint, operation, approval=approve(operation), token=signed.token, **who
                )
                for _ in range(6)
            )
        )
        assert {o.status for o in outcomes} == {"confirmed"}
        # A loser may answer while the winner still performs: in progress, never twice.
        states = [o.operation.state for o in outcomes]
        assert "succeeded" in states
        assert set(states) <= {"in_progress", "succeeded"}
        assert executors.performed[operation.operation_id] == 1
        read = await ctx.agent.operations.read(
            endpoint, operation.operation_id, token=signed.token, **who
        )
        assert read.state == "succeeded"
        # Once final, the same action proposed again is a new operation.
        again = await _propose(ctx, user, signed.token)
        assert again.operation_id != operation.operation_id
        assert again.state == "proposed"

    _in_world(world, person, test)


def test_an_accounts_operation_needs_that_account(
    world: PoppyWorld, person: OperationsDriver
) -> None:
    async def test(ctx: Any) -> None:
        user, signed = await _signed_in(ctx)
        operation = await _propose(ctx, user, signed.token)
        url = f"{await ctx.operations_endpoint()}/{operation.operation_id}"
        # The same User ID's signed-out Session: sign in first (the scope to ask for named).
        signed_out = await ctx.session(user)
        refused = await dpop_call(ctx, user, "GET", url, token=signed_out)
        assert (refused.status_code, refused.json()) == (
            403,
            {"error": "sign_in_required", "scope": "orders:write"},
        )
        assert 'error="sign_in_required"' in refused.headers["www-authenticate"]
        confirm = await dpop_call(
            ctx, user, "POST", url + "/confirm", {"revision": 1}, token=signed_out
        )
        assert confirm.status_code == 403

    _in_world(world, person, test)


def test_confirming_needs_the_operations_scopes(
    world: PoppyWorld, person: OperationsDriver, executors: ShopExecutors
) -> None:
    async def test(ctx: Any) -> None:
        user, signed = await _signed_in(ctx, granted=("orders:read",))
        operation = await _propose(ctx, user, signed.token)
        url = f"{await ctx.operations_endpoint()}/{operation.operation_id}/confirm"
        body = {"revision": 1, "approved_by": "user"}
        refused = await dpop_call(ctx, user, "POST", url, body, token=signed.token)
        assert (refused.status_code, refused.json()) == (
            403,
            {"error": "insufficient_scope", "scope": "orders:write"},
        )
        assert executors.performed[operation.operation_id] == 0
        bad = await dpop_call(ctx, user, "POST", url, {"revision": "1"}, token=signed.token)
        assert (bad.status_code, bad.json()["error"]) == (400, "invalid_request")

    _in_world(world, person, test)


def test_a_standing_permission_confirms_what_needs_no_user(
    world: PoppyWorld, person: OperationsDriver, executors: ShopExecutors
) -> None:
    async def test(ctx: Any) -> None:
        user, signed = await _signed_in(ctx)
        operation = await _propose(ctx, user, signed.token, "/api/orders/ord_7/gift-wrap")
        assert operation.user_approval_required is False
        url = f"{await ctx.operations_endpoint()}/{operation.operation_id}/confirm"
        body = {"revision": 1, "approved_by": "standing_permission"}
        done = await dpop_call(ctx, user, "POST", url, body, token=signed.token)
        assert done.status_code == 200
        document = done.json()
        assert (document["state"], document["confirmation"]["approved_by"]) == (
            "succeeded",
            "standing_permission",
        )
        assert document["result"] == {"summary": "Order ord_7 will be gift-wrapped."}
        assert executors.performed[operation.operation_id] == 1

    _in_world(world, person, test)


def test_an_expired_proposal_reads_expired_and_is_never_performed(
    world: PoppyWorld, person: OperationsDriver, executors: ShopExecutors
) -> None:
    async def test(ctx: Any) -> None:
        user, signed = await _signed_in(ctx)
        operation = await _propose(ctx, user, signed.token)
        # The shop's operator moves its expiry into the past (revision 2).
        now = time.time()
        assert world.provider.store.revise_operation(
            operation_id=operation.operation_id,
            summary=operation.summary,
            terms=json.dumps(operation.terms),
            expires_at=now - 1,
            now=now,
        )
        url = f"{await ctx.operations_endpoint()}/{operation.operation_id}"
        read = (await dpop_call(ctx, user, "GET", url, token=signed.token)).json()
        assert (read["state"], read["revision"], read["confirmation"]) == ("expired", 2, None)
        assert read["result"]["summary"]
        body = {"revision": 2, "approved_by": "user"}
        late = await dpop_call(ctx, user, "POST", url + "/confirm", body, token=signed.token)
        assert (late.status_code, late.json()) == (200, read)
        cancel = await dpop_call(ctx, user, "POST", url + "/cancel", {}, token=signed.token)
        assert (cancel.status_code, cancel.json()) == (200, read)
        assert executors.performed[operation.operation_id] == 0

    _in_world(world, person, test)


def test_confirming_an_action_this_process_cannot_perform_is_retried_and_logged_once(
    world: PoppyWorld, person: OperationsDriver, caplog: pytest.LogCaptureFixture
) -> None:
    # A proposal stored by an earlier deploy, whose action this one no longer registers
    # (or not yet: a replica of the next deploy may have it). Nothing here can perform it.
    retired = "gift_card"

    async def test(ctx: Any) -> tuple[Any, Any, str]:
        user, signed = await _signed_in(ctx)
        operation = await _propose(ctx, user, signed.token)
        stored = world.provider.store.operation(operation.operation_id)
        assert stored is not None
        orphan = attrs.evolve(
            stored, operation_id="op_" + secrets.token_hex(16), action=retired, open_key=None
        )
        world.provider.store.propose_operation(operation=orphan, now=time.time())
        url = f"{await ctx.operations_endpoint()}/{orphan.operation_id}/confirm"
        body = {"revision": 1, "approved_by": "user"}
        first = await dpop_call(ctx, user, "POST", url, body, token=signed.token)
        again = await dpop_call(ctx, user, "POST", url, body, token=signed.token)
        return first, again, orphan.operation_id

    with caplog.at_level(logging.ERROR, logger="pactmw.poppy"):
        first, again, operation_id = _in_world(world, person, test)
    # Another replica may have the executor: the agent retries, nothing is marked done.
    for answer in (first, again):
        assert (answer.status_code, answer.json()) == (503, {"error": "temporarily_unavailable"})
        assert answer.headers.get("retry-after")
    stored = world.provider.store.operation(operation_id)
    assert stored is not None
    assert stored.state == "proposed"
    # The operator is told why, once, naming the action and the setting to fix.
    errors = [
        r.getMessage()
        for r in caplog.records
        if r.name == "pactmw.poppy" and r.levelno >= logging.ERROR and retired in r.getMessage()
    ]
    assert len(errors) == 1, errors
    assert repr(retired) in errors[0], errors[0]
    assert "brands.shop.poppy.operations.executors" in errors[0], errors[0]


def test_an_agent_without_operations_gets_a_message_without_one(
    world: PoppyWorld, person: OperationsDriver
) -> None:
    async def test(ctx: Any) -> None:
        other = ctx.other_agent()
        user = ctx.new_user()
        session = await ctx.session(user, other)
        page = await other.conversations.start(
            await ctx.conversations_endpoint(),
            _message(OPERATION_PROMPT),
            token=session,
            wait=0,
            **(await ctx.who(user)),
        )
        company = [e.message for e in page.events if e.message and e.message.role == "company"]
        assert [m.operation for m in company] == [None]
        assert company[0].text.startswith("I can do this once you confirm")

    _in_world(world, person, test)


def test_poppy_json_lists_operations_only_when_the_brand_sets_them(world: PoppyWorld) -> None:
    poppy = world.provider.poppy
    assert poppy is not None
    listed = json.loads(poppy.discovery(SHOP).body)["extensions"]
    assert listed == {
        "operations": {"version": "1", "endpoint": f"{BASE_URL}/a2a/shop/poppy/operations"}
    }
    plain = world.other_provider()
    try:
        assert plain.poppy is not None
        assert "extensions" not in json.loads(plain.poppy.discovery(SHOP).body)
        assert plain.poppy.operations is None
        assert plain.poppy.route("GET", "/a2a/shop/poppy/operations/op_1") is None
    finally:
        plain.close()


def test_a_revision_no_store_could_hold_is_refused(
    world: PoppyWorld, executors: ShopExecutors
) -> None:
    # The stores keep revisions as 32-bit integers: a larger one was a 500 from the database.
    async def test(ctx: Any) -> tuple[str, list[Any], Any]:
        user = ctx.new_user()
        session = await ctx.session(user)
        operation = await _propose(ctx, user, session, "/api/orders/ord_7/gift-wrap")
        url = f"{BASE_URL}/a2a/shop/poppy/operations/{operation.operation_id}"
        answers = []
        for revision in (2**31 - 1, 2**31, 2**63, 10**30):
            body = {"revision": revision, "approved_by": "standing_permission"}
            answers.append(
                await dpop_call(ctx, user, "POST", f"{url}/confirm", body, token=session)
            )
        return (
            operation.operation_id,
            answers,
            await dpop_call(ctx, user, "GET", url, token=session),
        )

    async def one() -> Any:
        async with world.http() as http:
            return await test(world.context(http, scenario=OPERATIONS_SCENARIO))

    operation_id, answers, read = asyncio.run(one())
    assert [(a.status_code, a.json()["error"]) for a in answers] == [
        (409, "terms_changed"),
        (400, "invalid_request"),
        (400, "invalid_request"),
        (400, "invalid_request"),
    ]
    assert (read.status_code, read.json()["state"]) == (200, "proposed")
    assert executors.performed[operation_id] == 0


def test_idempotency_key_steps_of_the_sdk_fixture(
    world: PoppyWorld, person: OperationsDriver
) -> None:
    """`idempotency-api-writes.json` (GUIDE-retry-04), every step but `expired` (the world
    runs on wall time; expiry is the store's, tests/store/test_operations_contract.py)."""
    fixture = json.loads((protocol_path() / "fixtures" / "idempotency-api-writes.json").read_text())

    async def test(ctx: Any) -> None:
        user = ctx.new_user()
        first = await ctx.sign_in(user, await ctx.session(user))
        # A second Session of the same user, signed in with the first's Account Token.
        second = await ctx.agent.accounts.refresh(
            first.reference,
            context=await ctx.account_context(user),
            session_id=(await ctx.session(user)).session_id,
        )
        sessions = {"first": first.token, "second": second.token}
        answers: dict[str, Any] = {}
        for step in fixture["steps"]:
            if "advance_seconds" in step:
                continue
            name = step["name"]
            token = sessions[step.get("session", "first")]
            who = await ctx.who(user)
            if "confirm" in step:
                operation = Operation.model_validate(answers[step["confirm"]]["operation"])
                done = await ctx.agent.operations.confirm(
                    await ctx.operations_endpoint(),
                    operation,
                    approval=approve(operation),
                    token=token,
                    **who,
                )
                assert done.status == "confirmed", name
                continue
            url = ctx.url(step["path"])
            response = await _raw_with_key(ctx, user, token, url, step)
            expect = step["expect"]
            assert response.status_code == expect["status"], name
            if "error" in expect:
                assert response.json()["error"] == expect["error"], name
                continue
            answers[name] = response.json()
            if expect["answer"] == "first":
                assert answers[name] == answers["first"], name
            elif name != "first":
                assert (
                    answers[name]["operation"]["operation_id"]
                    != answers["first"]["operation"]["operation_id"]
                ), name
        # The repeat answered the first response exactly: the operation still proposed.
        assert answers["retry"]["operation"]["state"] == "proposed"

    _in_world(world, person, test)


def test_a_bad_idempotency_key_is_the_callers_mistake(
    world: PoppyWorld, person: OperationsDriver
) -> None:
    fixture = json.loads((protocol_path() / "fixtures" / "idempotency-api-writes.json").read_text())

    async def test(ctx: Any) -> None:
        user, signed = await _signed_in(ctx)
        for key in fixture["invalid_keys"]:
            step = {"body": {"size": "M"}, "key": key}
            url = ctx.url("/api/orders/ord_7Hk2/exchanges")
            response = await _raw_with_key(ctx, user, signed.token, url, step)
            assert (response.status_code, response.json()["error"]) == (400, "invalid_request")

    _in_world(world, person, test)


async def _raw_with_key(ctx: Any, user: str, token: Any, url: str, step: Any) -> Any:
    headers: dict[str, Any] = {
        **(await dpop_headers(ctx, user, "POST", url, token)),
        "Content-Type": "application/json",
        "Idempotency-Key": step["key"].encode(),  # bytes: one invalid key is not ASCII
    }
    return await ctx.send("POST", url, headers=headers, content=json.dumps(step["body"]).encode())


def test_a_write_tool_proposes_and_runs_once_on_confirmation(
    world: PoppyWorld, person: OperationsDriver, executors: ShopExecutors
) -> None:
    async def test(ctx: Any) -> None:
        user, signed = await _signed_in(ctx)
        who = await ctx.who(user)
        before = len(executors.cancelled)
        page = await ctx.agent.conversations.start(
            await ctx.conversations_endpoint(),
            _message(CANCEL_PROMPT),
            token=signed.token,
            wait=0,
            **who,
        )
        (company,) = [e.message for e in page.events if e.message and e.message.role == "company"]
        operation = company.operation
        assert operation is not None
        assert operation.summary == 'Cancel order: order="ord_9"'
        assert operation.terms == {"order": "ord_9"}
        assert "awaiting_confirmation" in (company.text or "")
        assert len(executors.cancelled) == before  # proposed, not run (OPS-3-03)
        endpoint = await ctx.operations_endpoint()
        for _ in range(2):
            done = await ctx.agent.operations.confirm(
                endpoint, operation, approval=approve(operation), token=signed.token, **who
            )
            assert done.operation is not None
            assert done.operation.state == "succeeded"
            assert done.operation.result is not None
            assert done.operation.result.summary == "Cancel order: order ord_9 cancelled"
        assert executors.cancelled[before:] == [(ACCOUNTS[0], "ord_9")]  # once, for the account

    _in_world(world, person, test)


def test_without_the_extension_a_write_tool_runs_at_once(
    world: PoppyWorld, person: OperationsDriver, executors: ShopExecutors
) -> None:
    async def test(ctx: Any) -> None:
        other = ctx.other_agent()
        user = ctx.new_user()
        signed = await ctx.sign_in(user, await ctx.session(user, other), agent=other)
        before = len(executors.cancelled)
        page = await other.conversations.start(
            await ctx.conversations_endpoint(),
            _message(CANCEL_PROMPT),
            token=signed.token,
            wait=0,
            **(await ctx.who(user)),
        )
        (company,) = [e.message for e in page.events if e.message and e.message.role == "company"]
        assert company.operation is None
        assert company.text == "Cancelling order ord_9: order ord_9 cancelled"
        assert executors.cancelled[before:] == [(ACCOUNTS[0], "ord_9")]

    _in_world(world, person, test)


def test_a_confirm_and_a_cancel_racing_agree_on_one_outcome(
    world: PoppyWorld, person: OperationsDriver, executors: ShopExecutors
) -> None:
    # The store's compare-and-set decides between them: cancelled and never performed, or
    # confirmed and performed once; each answer shows what won.
    async def test(ctx: Any) -> list[tuple[str, list[str]]]:
        user, signed = await _signed_in(ctx)
        endpoint = await ctx.operations_endpoint()
        outcomes = []
        for _ in range(4):
            operation = await _propose(ctx, user, signed.token, "/api/orders/ord_7/gift-wrap")
            url = f"{endpoint}/{operation.operation_id}"
            body = {"revision": 1, "approved_by": "user"}
            answers = await asyncio.gather(
                dpop_call(ctx, user, "POST", f"{url}/confirm", body, token=signed.token),
                dpop_call(ctx, user, "POST", f"{url}/cancel", {}, token=signed.token),
            )
            assert [a.status_code for a in answers] == [200, 200]
            final = (await dpop_call(ctx, user, "GET", url, token=signed.token)).json()["state"]
            outcomes.append(
                (operation.operation_id, [final, *(a.json()["state"] for a in answers)])
            )
        return outcomes

    for operation_id, (final, *answered) in _in_world(world, person, test):
        if final == "cancelled":
            assert answered == ["cancelled", "cancelled"]
            assert executors.performed[operation_id] == 0
        else:
            assert final == "succeeded"
            assert answered[0] == "succeeded"
            assert answered[1] in ("in_progress", "succeeded")
            assert executors.performed[operation_id] == 1
