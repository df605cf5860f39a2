"""benchmarks/poppy_turn.py runs: one tiny round of one signed-in Poppy turn on the SDK's
company and on pactmw, so the benchmark cannot rot. Nothing here is timed."""

from __future__ import annotations

import json

import pytest

from benchmarks import poppy_turn


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_one_tiny_round_signs_in_and_answers_on_both_companies(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--rounds", "1", "--turns", "2", "--chunk", "1", "--store", store, "--json"]
    assert poppy_turn.main(argv) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["store"] == store
    assert found["rounds"] == 1
    assert set(found["turns_per_second"]) == {"pactmw", "sdk"}
    assert found["ratio_pactmw_over_sdk"] > 0
