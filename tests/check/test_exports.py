"""`pactmw.check` exports exactly what its callers use: the CLI (the Checker, its results and
output, the card URL and identity-scheme helpers) and scripts and tests selecting checks by
their stable names. Everything else lives in its private modules."""

from __future__ import annotations

import pactmw.check

#: The checks' names, in the order they run.
CHECK_NAMES = {
    "CARD", "CARD_HEADERS", "CARD_INTERFACE", "CARD_SCHEME", "CARD_UNKNOWN",
    "REPLY", "ENCODED_COLON", "RETRY", "AGENT_MESSAGE_ID",
    "FOREIGN_SUB", "UNKNOWN_CONTEXT_ID", "FOREIGN_BRAND", "TOKEN_REUSE", "TOKEN_REUSE_ONE_BRAND",
    "LIST_TASKS", "PAGE_SIZES", "BAD_PAGE_SIZES", "TASK_ROUTES",
    "STREAMING", "EXTENDED_CARD", "PUSH_CONFIGS",
    "VERSION_TOLERANCE", "CONTENT_TYPE_TOLERANCE",
    "UNMATCHED_ROUTES",
    "MISSING_TOKEN", "MISSING_TOKEN_BODY", "HS256", "EXPIRED", "FUTURE_IAT", "LONG_LIFETIME",
    "AUD_INTERFACE", "DISABLED_ISSUER", "OTHER_KEY", "ALG_NONE", "UNKNOWN_BRAND",
    "BAD_JSON", "TASK_ID", "RAW_PART",
    "DELEGATED_SCHEME", "DELEGATED_METADATA", "DELEGATED_DETAILS", "DELEGATED_STEP_UP",
    "DELEGATED_REFUSALS", "DELEGATED_DEVICE", "DELEGATED_TOKEN", "DELEGATED_SINGLE_USE",
    "DELEGATED_RECEIPT", "DELEGATED_TAMPERED", "DELEGATED_REFRESH", "DELEGATED_SPENT_REFRESH",
    "CONTENT_TYPE",
}  # fmt: skip

EXPECTED = {
    "CARD_PATH",
    "DEFAULT_ASK",
    "CheckResult",
    "Checker",
    "Progress",
    "card_url_from",
    "identity_scheme_name",
    "names",
    "results_json",
    "summary_line",
}


def test_all_is_exactly_the_intended_exports() -> None:
    assert set(pactmw.check.__all__) == EXPECTED
    assert len(pactmw.check.__all__) == len(EXPECTED)


def test_every_export_is_importable() -> None:
    namespace: dict[str, object] = {}
    exec("from pactmw.check import *", namespace)
    del namespace["__builtins__"]
    assert set(namespace) == EXPECTED
    for name in pactmw.check.__all__:
        assert getattr(pactmw.check, name) is not None


def test_nothing_public_but_the_exports() -> None:
    public = {name for name in vars(pactmw.check) if not name.startswith("_")}
    assert public == EXPECTED


def test_names_module_is_exactly_the_check_names() -> None:
    assert set(pactmw.check.names.__all__) == CHECK_NAMES
    public = {name for name in vars(pactmw.check.names) if not name.startswith("_")}
    assert public == CHECK_NAMES


def test_check_names_are_distinct_strings() -> None:
    values = [getattr(pactmw.check.names, name) for name in CHECK_NAMES]
    assert all(isinstance(value, str) and value for value in values)
    assert len(set(values)) == len(values)
