"""The Parafé page of the documentation (docs/parafe.md): its samples run as written, the
TOML table parses."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path

import pytest

from pactmw.core.jwk import generate_private_jwk
from pactmw.provider.settings import parafe_from_mapping
from tests.parafe.support import FIXTURES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "parafe.md"
SECTION = PAGE.read_text(encoding="utf-8")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def run_sample(name: str) -> str:
    """Run the sample marked `<!-- parafe-readme: NAME -->`; what it printed."""
    found = re.search(rf"<!-- parafe-readme: {name} -->\n```python\n(.*?)```", SECTION, re.S)
    assert found is not None, name
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(found.group(1), f"parafe.md:{name}", "exec"), {"__name__": f"readme_{name}"})
    return out.getvalue()


def test_the_verifier_sample_runs() -> None:
    assert run_sample("verifier") == "refused: MISSING_PARAFE_EXTENSION\n"


def test_the_proof_sample_runs() -> None:
    assert run_sample("proof") == (
        "refused: Parafe presentation proof rejected: the consent token is not key-bound "
        "(no cnf.jkt)\n"
    )


def test_the_ap2_sample_runs() -> None:
    assert run_sample("ap2") == "ap2.checkout_receipt True\n"


def test_the_toml_sample_is_a_valid_configuration(tmp_path: Path) -> None:
    block = re.search(r"```toml\n(\[brands\.shop\.parafe\].*?)```", SECTION, re.S)
    assert block is not None
    table = tomllib.loads(block.group(1))["brands"]["shop"]["parafe"]
    key = tmp_path / "key.jwk"
    key.write_text(json.dumps(generate_private_jwk("EdDSA").to_dict()))
    credential = tmp_path / "credential"
    credential.write_text("secret")
    table.update(signing_key=str(key), credential_file=str(credential))
    config = parafe_from_mapping(table)
    assert config.online_scopes == frozenset({"order-lamps"})
    assert config.file_receipts


def test_the_local_sample_runs_against_its_stand_in_broker() -> None:
    # The page's way to try Parafé without the public broker, run as written: a valid
    # consent, then each refusal the page names, every receipt verified by the calling agent.
    assert run_sample("local") == (
        "200 A-1001 success None\n"
        "403 INVALID_PROOF error proof_invalid\n"
        "403 EXPIRED_CONSENT_TOKEN error consent_expired\n"
        "403 SCOPE_VIOLATION error not_permitted\n"
        "403 WRONG_AUDIENCE error consent_invalid\n"
    )


def test_the_fixtures_sample_verifies_the_real_broker_artifacts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Run where a reader puts the fixture file: beside the script.
    monkeypatch.chdir(FIXTURES)
    assert run_sample("fixtures") == "place-order True\n"


def test_the_receipts_sample_signs_what_the_calling_agent_verifies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found in a custom-server trial: the page showed no way for a server of one's own to
    # sign the action receipt (and the refusal receipt) that the adapters sign.
    monkeypatch.chdir(FIXTURES)
    assert run_sample("receipts") == "create_order success A-1001\nissue_refund error excluded\n"
