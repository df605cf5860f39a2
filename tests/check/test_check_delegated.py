"""`pactmw check --delegated` against our Provider, with the person played by the test.

The Brand's login is `pactmw.brand_login.DevelopmentBrandLogin` (brand-mode delegation). The
checker runs as a user runs it (a subprocess) and prints the login link on stderr; the test
reads it there and does what the person would do in a browser: sign in at the Brand, then
allow (or deny) on the Provider's consent page, while the checker polls for the token.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from pactmw.brand_login import DevelopmentBrandLogin, consent_url_for
from pactmw.check import names
from pactmw.provider import Turn
from pactmw.provider.authorization_details import AuthorizationDetailType
from pactmw.store.base import Rotation
from pactmw.store.memory import MemoryStore
from tests.check.support import (
    IDENTITY,
    PERSON,
    PYTHON_M,
    SCOPES,
    Agent,
    Running,
    card_url,
    check,
    in_process_provider,
    person_decides,
    text_lines,
)
from tests.support.net import free_port
from tests.support.servers import REPO

DELEGATED = {
    names.DELEGATED_SCHEME, names.DELEGATED_METADATA, names.DELEGATED_STEP_UP,
    names.DELEGATED_REFUSALS, names.DELEGATED_DEVICE, names.DELEGATED_TOKEN,
    names.DELEGATED_SINGLE_USE, names.DELEGATED_RECEIPT, names.DELEGATED_TAMPERED,
    names.DELEGATED_REFRESH, names.DELEGATED_SPENT_REFRESH,
}  # fmt: skip


CANCELLATION = AuthorizationDetailType(
    type="order_cancellation",
    scope="orders:cancel",
    schema={
        "type": "object",
        "properties": {"type": {"const": "order_cancellation"}, "order": {"type": "string"}},
        "required": ["type", "order"],
        "additionalProperties": False,
    },
    render=lambda entry: f"Only order {entry['order']}",
)
#: The Brand's accepted RFC 9396 types, by import path (as a TOML file would name them).
DETAIL_TYPES = [CANCELLATION]
ONE_ORDER = json.dumps([{"type": "order_cancellation", "order": "A-1"}])


@pytest.fixture
def delegated_provider(tmp_path: Path, agent: Agent) -> Iterator[str]:
    """Our Provider with Acme offering delegation through Acme's own (development) login."""
    with provider_with(tmp_path, agent) as base_url:
        yield base_url


@pytest.fixture
def provider_with_details(tmp_path: Path, agent: Agent) -> Iterator[str]:
    """The same Provider, Acme also accepting `order_cancellation` authorization details."""
    with provider_with(tmp_path, agent, authorization_details=f"{__name__}:DETAIL_TYPES") as url:
        yield url


def test_check_delegated_with_a_person_approving(delegated_provider: str, agent: Agent) -> None:
    running = Running.start(agent, card_url(delegated_provider), "--ask", "Show my orders")
    link = running.link()
    time.sleep(1.5)  # the checker polls at least once before the person decides
    person_decides(link)
    status, stdout, stderr = running.finish()
    assert status == 0, stdout + stderr
    checks, summary = text_lines(stdout)
    assert [line for line in checks if not line.startswith("PASS  ")] == []
    assert {line[len("PASS  ") :] for line in checks} == (
        IDENTITY | {names.TOKEN_REUSE_ONE_BRAND} | DELEGATED
    )
    assert summary == f"{len(checks)} passed, 0 failed"
    assert "A person must approve" in stderr
    assert re.search(r"waiting for approval… \(\d+s left\)", stderr), stderr
    assert "approved: scope 'orders:cancel orders:read'" in stderr


def test_check_delegated_when_the_person_denies(delegated_provider: str, agent: Agent) -> None:
    running = Running.start(agent, card_url(delegated_provider), "--json")
    person_decides(running.link(), "deny")
    status, stdout, stderr = running.finish()
    assert status == 1, stdout + stderr
    document = json.loads(stdout)
    failed = {c["name"]: c for c in document["checks"] if not c["passed"]}
    assert list(failed) == [names.DELEGATED_TOKEN]
    assert "access_denied" in failed[names.DELEGATED_TOKEN]["actual"]
    # Nothing after the token can run; everything before it passed.
    ran = {c["name"] for c in document["checks"]}
    assert names.DELEGATED_DEVICE in ran
    assert names.DELEGATED_RECEIPT not in ran


def test_check_delegated_when_nobody_approves(delegated_provider: str, agent: Agent) -> None:
    running = Running.start(agent, card_url(delegated_provider), "--approval-timeout", "2")
    running.link()
    status, stdout, _ = running.finish()
    assert status == 1
    checks, summary = text_lines(stdout)
    failed = [line for line in checks if line.startswith("FAIL")]
    assert len(failed) == 1
    assert failed[0].startswith(f"FAIL  {names.DELEGATED_TOKEN}: expected ")
    assert "DeviceFlowTimeout" in failed[0]
    assert summary.endswith(" passed, 1 failed")


def test_check_delegated_on_a_brand_without_delegation(tmp_path: Path, agent: Agent) -> None:
    with in_process_provider(tmp_path, agent) as base_url:
        running = Running.start(agent, card_url(base_url))
        status, stdout, _ = running.finish()
    assert status == 1
    checks, _ = text_lines(stdout)
    assert [line.split(": expected")[0] for line in checks if line.startswith("FAIL")] == [
        f"FAIL  {names.DELEGATED_SCHEME}"
    ]


def _results(stdout: str) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in json.loads(stdout)["checks"]}


def test_check_delegated_with_authorization_details(
    provider_with_details: str, agent: Agent
) -> None:
    running = Running.start(
        agent, card_url(provider_with_details), "--json", "--authorization-details", ONE_ORDER
    )
    person_decides(running.link())
    status, stdout, stderr = running.finish()
    assert status == 0, stdout + stderr
    results = _results(stdout)
    assert results[names.DELEGATED_TOKEN]["actual"].endswith(", 1 of 1 authorization details")
    assert results[names.DELEGATED_REFRESH]["passed"] is True


def test_check_delegated_details_declined_with_their_scope(
    provider_with_details: str, agent: Agent
) -> None:
    """The person unticks orders:cancel: its entry is declined too, which is no failure."""
    running = Running.start(
        agent, card_url(provider_with_details), "--json", "--authorization-details", ONE_ORDER
    )
    person_decides(running.link(), scopes=["orders:read"])
    _, stdout, stderr = running.finish()
    results = _results(stdout)
    assert results[names.DELEGATED_TOKEN]["passed"] is True, stdout + stderr
    assert results[names.DELEGATED_TOKEN]["actual"].endswith(", 0 of 1 authorization details")


def test_check_delegated_details_of_a_type_the_brand_does_not_advertise(
    delegated_provider: str, agent: Agent
) -> None:
    running = Running.start(
        agent, card_url(delegated_provider), "--json", "--authorization-details", ONE_ORDER
    )
    status, stdout, _ = running.finish()
    assert status == 1
    failed = {name: c for name, c in _results(stdout).items() if not c["passed"]}
    assert list(failed) == [names.DELEGATED_DEVICE]
    assert "missing order_cancellation" in str(failed[names.DELEGATED_DEVICE]["actual"])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{", "is not JSON"),
        ("[]", "must be a JSON array of objects, each with a string type"),
        ('[{"order": "A-1"}]', "must be a JSON array of objects, each with a string type"),
        ("@/nonexistent/details.json", "cannot read --authorization-details"),
    ],
)
def test_check_refuses_bad_authorization_details(agent: Agent, value: str, message: str) -> None:
    done = subprocess.run(
        [*PYTHON_M, *agent.check_args("http://127.0.0.1:9/", "--delegated",
                                      "--authorization-details", value)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr


class GarblesTheStepUp:
    """Answers the checker's step-up probe (its `--ask` text, without a delegation token) with
    HTTP 200 and a JSON body that is neither a message nor a task."""

    def __init__(self, app: Any, ask: str) -> None:
        self.app, self.ask = app, ask.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/message:send"):
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        delegated = any(k.lower() == b"x-a2a-user-delegation" for k, _ in scope["headers"])
        if self.ask in body and not delegated:
            headers = [(b"content-type", b"application/a2a+json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b'{"unexpected": true}'})
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                later: dict[str, Any] = await receive()
                return later
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def test_a_malformed_step_up_answer_fails_its_check_and_the_rest_run(
    tmp_path: Path, agent: Agent
) -> None:
    ask = "Show my orders, garbled"
    port = free_port()
    consent = consent_url_for(f"http://127.0.0.1:{port}", "acme")
    with DevelopmentBrandLogin(consent_url=consent, users=[PERSON], brand_name="Acme") as login:
        login.start()
        delegation = {"acme": {**login.delegation_settings(), "scopes": SCOPES, "interval": 1}}
        with in_process_provider(
            tmp_path,
            agent,
            delegation=delegation,
            port=port,
            wrap=lambda app: GarblesTheStepUp(app, ask),
        ) as base_url:
            running = Running.start(
                agent, card_url(base_url), "--ask", ask, "--approval-timeout", "1", "--json"
            )
            status, stdout, stderr = running.finish()
    assert status == 1, stdout + stderr
    assert "Traceback" not in stderr, stderr
    results = _results(stdout)
    assert not results[names.DELEGATED_STEP_UP]["passed"]
    assert "ResponseInvalid" in results[names.DELEGATED_STEP_UP]["actual"], results
    # The checks after the probe still ran: the refusals passed, the token timed out.
    assert results[names.DELEGATED_REFUSALS]["passed"], results
    assert names.DELEGATED_TOKEN in results


class SpentRefreshMints(MemoryStore):
    """A defective store: a spent refresh token is treated as fresh, so it mints a new pair."""

    def rotate_refresh_token(self, **kwargs: Any) -> Rotation:
        with self._lock:
            token = self._refresh.get(kwargs["token_hash"])
            if token is not None and token.used_at is not None:
                self._refresh[kwargs["token_hash"]] = attrs.evolve(token, used_at=None)
        return super().rotate_refresh_token(**kwargs)


@contextlib.contextmanager
def provider_with(
    tmp_path: Path, agent: Agent, *, store: MemoryStore | None = None, **delegation: Any
) -> Iterator[str]:
    """Our Provider with Acme offering delegation through Acme's own (development) login,
    `delegation` settings added."""
    port = free_port()
    consent = consent_url_for(f"http://127.0.0.1:{port}", "acme")
    with DevelopmentBrandLogin(consent_url=consent, users=[PERSON], brand_name="Acme") as login:
        login.start()
        settings = {
            **login.delegation_settings(),
            "scopes": SCOPES,
            "interval": 1,
            "tools": "pactmw.demo:demo_tools",
            **delegation,
        }
        with in_process_provider(
            tmp_path, agent, delegation={"acme": settings}, port=port, store=store
        ) as base_url:
            yield base_url


def _approved_run(base_url: str, agent: Agent) -> dict[str, dict[str, Any]]:
    running = Running.start(agent, card_url(base_url), "--json")
    person_decides(running.link())
    _, stdout, stderr = running.finish()
    assert stdout, stderr
    return _results(stdout)


def test_spent_refresh_within_the_reuse_interval_gets_the_same_pair(
    delegated_provider: str, agent: Agent
) -> None:
    spent = _approved_run(delegated_provider, agent)[names.DELEGATED_SPENT_REFRESH]
    assert spent["passed"], spent
    assert spent["actual"] == "the same token pair again (within the Provider's reuse interval)"


def test_spent_refresh_under_the_strict_rule_is_invalid_grant(tmp_path: Path, agent: Agent) -> None:
    with provider_with(tmp_path, agent, refresh_reuse_interval=0) as base_url:
        results = _approved_run(base_url, agent)
    assert results[names.DELEGATED_REFRESH]["passed"], results
    spent = results[names.DELEGATED_SPENT_REFRESH]
    assert spent["passed"], spent
    assert spent["actual"] == "HTTP 400 invalid_grant"


def test_a_spent_refresh_token_that_mints_a_new_pair_fails(tmp_path: Path, agent: Agent) -> None:
    with provider_with(tmp_path, agent, store=SpentRefreshMints()) as base_url:
        results = _approved_run(base_url, agent)
    assert results[names.DELEGATED_REFRESH]["passed"], results
    spent = results[names.DELEGATED_SPENT_REFRESH]
    assert not spent["passed"], spent
    assert spent["actual"].startswith("a new token (scope "), spent


def asks_for_delegation_every_turn(turn: Turn) -> str:
    """A bot like docs/delegated.md's `order_bot` read too widely: every message, a greeting
    too, needs the user's orders, so every turn without a delegation token is a step-up."""
    turn.require_scopes("orders:read")
    return "Your orders: none"


def test_a_bot_that_steps_up_every_message_gets_one_note_naming_the_cause(
    tmp_path: Path, agent: Agent
) -> None:
    # The identity checks send plain messages and need a reply; a step-up task to each of them
    # failed eight checks alike, each quoting the task, and nothing said why.
    port = free_port()
    consent = consent_url_for(f"http://127.0.0.1:{port}", "acme")
    with DevelopmentBrandLogin(consent_url=consent, users=[PERSON], brand_name="Acme") as login:
        login.start()
        delegation = {"acme": {**login.delegation_settings(), "scopes": SCOPES}}
        with in_process_provider(
            tmp_path,
            agent,
            handler=f"{__name__}:asks_for_delegation_every_turn",
            delegation=delegation,
            port=port,
        ) as base_url:
            result = check(agent, card_url(base_url))
    assert result.returncode == 1, result.stdout + result.stderr
    checks, _ = text_lines(result.stdout)
    failed = [line for line in checks if line.startswith("FAIL")]
    assert failed, result.stdout
    assert all("(a step-up task: the bot asked for delegated scopes)" in line for line in failed)
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, result.stderr
    assert "step-up task" in notes[0]
    assert "'Hello, this is pactmw check.'" in notes[0]
    assert "--ask" in notes[0]
