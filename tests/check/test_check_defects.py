"""`pactmw check` against deliberately broken Providers: exactly the check that covers the
defect fails, every other check passes, and the exit status is 1."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pactmw.check import names
from tests.check import defects
from tests.check.support import Agent, card_url, check, in_process_provider, text_lines
from tests.support.net import closed_port_url

#: defect -> (how to build it from the agent: {"wrap": ..., "store": ...}, the failing check)
DEFECTS: dict[str, tuple[Callable[[Agent], dict[str, Any]], str]] = {
    "adds-charset": (lambda agent: {"wrap": defects.AddsCharset}, names.CONTENT_TYPE),
    "no-challenge": (lambda agent: {"wrap": defects.NoChallenge}, names.MISSING_TOKEN),
    "accepts-hs256": (lambda agent: {"wrap": defects.accepts_hs256(agent)}, names.HS256),
    "accepts-expired": (lambda agent: {"wrap": defects.accepts_expired(agent)}, names.EXPIRED),
    "reruns-bot-on-retry": (lambda agent: {"store": defects.ForgetfulStore()}, names.RETRY),
    "leaks-foreign-contexts": (lambda agent: {"store": defects.LeakyStore()}, names.FOREIGN_SUB),
    "401-before-404": (
        lambda agent: {"wrap": defects.AuthenticatesBeforeRouting},
        names.UNMATCHED_ROUTES,
    ),
}


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_check_fails_the_right_check(tmp_path: Path, agent: Agent, defect: str) -> None:
    build, failing = DEFECTS[defect]
    with in_process_provider(tmp_path, agent, **build(agent)) as base_url:
        result = check(agent, card_url(base_url))
    assert result.returncode == 1, result.stdout + result.stderr
    checks, summary = text_lines(result.stdout)
    failed = [line for line in checks if line.startswith("FAIL")]
    assert [line.split(": expected ")[0] for line in failed] == [f"FAIL  {failing}"], result.stdout
    assert summary == f"{len(checks) - 1} passed, 1 failed"
    # The failure says what was expected and what came back.
    assert "; got " in failed[0]


def test_a_card_whose_interface_is_unreachable_stops_the_run_with_one_note(
    tmp_path: Path, agent: Agent
) -> None:
    # A Provider whose base_url is not where it listens: every check would go to an address
    # that cannot be reached, and 33 failures said the same thing 33 times.
    elsewhere = closed_port_url()
    with in_process_provider(tmp_path, agent, public_url=elsewhere) as base_url:
        result = check(agent, card_url(base_url))
    assert result.returncode == 1, result.stdout + result.stderr
    checks, summary = text_lines(result.stdout)
    failed = [line for line in checks if line.startswith("FAIL")]
    assert [line.split(": expected ")[0] for line in failed] == [f"FAIL  {names.CARD_INTERFACE}"], (
        result.stdout
    )
    assert "cannot connect" in failed[0]
    assert summary == f"{len(checks) - 1} passed, 1 failed"
    note = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(note) == 1, result.stderr
    assert f"{elsewhere}/a2a/acme" in note[0]
    assert "cannot be reached" in note[0]
    assert "base_url" in note[0]
