"""Every company requirement of the Poppy ledger is proven by a named test or listed, with its
reason, in docs/poppy.md "What pactmw does not do yet".

The ledger is the SDK's `protocol/requirements.yaml` (`personal-agent-protocol==0.26.0`): each
MUST, MUST NOT, SHOULD and SHOULD NOT of draft 0.2 and Operations v1, with the role it binds.
A requirement of the company (role `company` or `both`) is proven when an SDK conformance case
naming it runs against pactmw (tests/poppy/test_conformance_whole.py lists which file runs
each case) or when `LEDGER_TESTS` below names pactmw tests for it. These tests fail when the
ledger gains a company requirement nobody mapped, when a mapped test disappears, and when a
listed gap is also proven (or no longer in the ledger).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from personal_agent_protocol.conformance import select_cases

from tests.poppy.support import RUN_CASES, run_case_ids

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "poppy.md"
GAPS_HEADING = "## What pactmw does not do yet"
_LEDGER_ID = re.compile(r"`((?:PAP|OPS)-[0-9.]+-[0-9]+)`")

#: Company requirements pactmw's own tests prove (beyond the conformance cases), each with the
#: tests (`path::function`) that do.
LEDGER_TESTS: Mapping[str, tuple[str, ...]] = {
    "PAP-3-01": (
        "tests/poppy/test_discovery.py::test_pap_3_01_the_document_path",
        "tests/poppy/test_discovery_serving.py::test_pactmw_serve_answers_poppy_json_for_the_brand_host",
    ),
    "PAP-3-05": (
        "tests/poppy/test_company_settings.py::test_a_bad_setting_is_refused_at_startup_naming_its_key",
        "tests/poppy/test_discovery.py::test_misconfiguration_names_the_setting",
    ),
    "PAP-3-07": (
        "tests/core/test_client_metadata.py::test_pap_3_07_only_https_client_ids_are_fetched",
    ),
    "PAP-3-10": (
        "tests/core/test_fetch.py::test_non_public_literal_addresses_refused_without_connecting",
        "tests/core/test_fetch_tls.py::test_a_mapped_address_must_still_be_allowed",
    ),
    "PAP-3.2-01": (
        "tests/poppy/test_discovery.py::test_the_sdks_oauth_metadata_model_accepts_the_metadata",
        "tests/poppy/test_discovery_serving.py::test_the_asgi_provider_at_the_root_serves_both_documents",
    ),
    "PAP-3.2-02": (
        "tests/poppy/test_discovery.py::test_pap_3_2_06_every_domain_names_the_same_auth",
    ),
    "PAP-3.2-06": (
        "tests/poppy/test_discovery.py::test_pap_3_2_06_every_domain_names_the_same_auth",
    ),
    "PAP-3.2-07": (
        "tests/poppy/test_company_settings.py::test_two_brands_cannot_publish_on_one_domain",
    ),
    "PAP-3.2-08": ("tests/poppy/test_issuers.py::test_pap_3_2_08_each_brand_has_its_own_issuer",),
    "PAP-3.2-09": (
        "tests/core/test_dpop.py::test_rfc9449_figure4_proof_verifies_and_its_thumbprint_is_figure_jkt",
        "tests/core/test_dpop.py::test_the_sdks_own_proofs_verify",
    ),
    "PAP-3.2-10": (
        "tests/poppy/test_discovery.py::test_the_sdks_oauth_metadata_model_accepts_the_metadata",
    ),
    "PAP-3.3-03": (
        "tests/poppy/test_requests.py::test_pap_3_3_03_unknown_members_and_the_agents_role_are_ignored",
    ),
    "PAP-3.3-05": (
        "tests/poppy/test_requests.py::test_pap_3_3_03_unknown_members_and_the_agents_role_are_ignored",
    ),
    "PAP-4.1-03": (
        "tests/core/test_client_metadata.py::test_pap_4_1_03_security_urls_on_the_client_id_host",
    ),
    "PAP-4.6-01": (
        "tests/poppy/test_device_sign_in.py::test_pap_4_4_02_device_sign_in_upgrades_the_session_to_the_approved_scopes",
    ),
    "PAP-6-01": ("tests/poppy/test_discovery.py::test_pap_6_01_api_types",),
    "PAP-6-03": (
        "tests/poppy/test_session_required.py::test_wsgi",
        "tests/poppy/test_session_required.py::test_flask",
        "tests/poppy/test_session_required.py::test_django",
        "tests/poppy/test_session_required.py::test_fastapi",
    ),
    "PAP-7.2-02": (
        "tests/poppy/test_conversations.py::test_signed_out_session_converses_and_a_retry_runs_the_bot_once",
    ),
    "PAP-7.2-03": (
        "tests/poppy/test_issuers.py::test_pap_7_2_03_any_agent_message_id_is_accepted",
    ),
    "PAP-8-01": (
        "tests/poppy/test_feedback.py::test_pap_8_01_a_signed_in_session_reports_with_its_account_and_no_scope",
    ),
    "PAP-8-07": (
        "tests/poppy/test_feedback.py::test_pap_8_07_a_report_reaches_the_operator_as_data",
    ),
    "PAP-7.4-01": (
        "tests/poppy/test_requests.py::test_pap_7_4_01_a_message_needs_text_data_or_context",
    ),
}


@cache
def ledger() -> dict[str, Any]:
    root = resources.files("personal_agent_protocol") / "protocol" / "requirements.yaml"
    document: dict[str, Any] = yaml.safe_load(root.read_text(encoding="utf-8"))
    return document


def company_requirements() -> dict[str, str]:
    """The company's (and both sides') requirements: id -> level."""
    return {
        item["id"]: item["level"]
        for item in ledger()["requirements"]
        if item["role"] in ("company", "both")
    }


def proven_by_cases() -> dict[str, list[str]]:
    """Requirement id -> the conformance cases run against pactmw that name it."""
    run = set(run_case_ids())
    proven: dict[str, list[str]] = {}
    for case in select_cases():
        if case.id in run:
            for requirement in case.requirements:
                proven.setdefault(requirement, []).append(case.id)
    return proven


def documented_gaps() -> dict[str, str]:
    """Requirement id -> the bullet of docs/poppy.md's gap list that names it."""
    text = DOCS.read_text(encoding="utf-8")
    assert GAPS_HEADING in text, f"docs/poppy.md lost its {GAPS_HEADING!r} section"
    section = text.split(GAPS_HEADING, 1)[1].split("\n## ", 1)[0]
    gaps: dict[str, str] = {}
    for bullet in re.split(r"\n- ", section)[1:]:
        bullet = " ".join(bullet.split())
        for requirement in _LEDGER_ID.findall(bullet.split("): ", 1)[0] + ")"):
            assert requirement not in gaps, f"{requirement} is listed twice"
            gaps[requirement] = bullet
    return gaps


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def test_the_ledger_is_the_one_this_map_was_made_for() -> None:
    assert ledger()["profile"] == "0.2"
    assert len(company_requirements()) == 89


def test_every_company_requirement_is_proven_or_listed_with_its_reason() -> None:
    proven = set(proven_by_cases()) | set(LEDGER_TESTS)
    gaps = documented_gaps()
    unmapped = sorted(set(company_requirements()) - proven - set(gaps))
    assert not unmapped, f"company requirements neither tested nor in docs/poppy.md: {unmapped}"


def test_a_listed_gap_is_a_company_requirement_nobody_proves() -> None:
    requirements = company_requirements()
    proven = set(proven_by_cases()) | set(LEDGER_TESTS)
    for requirement, bullet in documented_gaps().items():
        assert requirement in requirements, f"{requirement} is not a company requirement"
        assert requirement not in proven, f"{requirement} is proven: take it off the list"
        reason = bullet.split("): ", 1)[1] if "): " in bullet else ""
        assert reason.strip(), f"{requirement} is listed without a reason"


def test_every_mapped_test_exists() -> None:
    requirements = company_requirements()
    for requirement, tests in LEDGER_TESTS.items():
        assert requirement in requirements, f"{requirement} is not a company requirement"
        assert tests, requirement
        for node in tests:
            path, _, name = node.partition("::")
            assert (ROOT / path).is_file(), f"{requirement}: {path} is gone"
            assert name in _functions(ROOT / path), f"{requirement}: {node} is gone"


def test_every_file_said_to_run_cases_runs_them() -> None:
    """The case lists are the ones their files parametrize (a list nobody runs proves nothing)."""
    for path, cases in RUN_CASES.items():
        assert cases, path
        source = (ROOT / path).read_text(encoding="utf-8")
        # Each runs its cases one by one through PoppyWorld.assert_case_passes, parametrized
        # by case id (tests/support/poppy_world.py).
        assert "assert_case_passes(" in source, path
        assert "case_param(case_id) for case_id in" in source, path
