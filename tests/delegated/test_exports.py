"""`pactmw.provider.delegated` exports exactly what the Provider, its adapters and apps use."""

from __future__ import annotations

import importlib
import pkgutil

import pactmw.provider.delegated as delegated

EXPECTED = {
    "DEVICE_CODE_GRANT",
    "FORM_LIMIT",
    "PAGE_HEADERS",
    "AuditEvent",
    "AuditHook",
    "AuthorizationServer",
    "ConsentRefused",
    "Delegation",
    "DelegationGrant",
    "OAuthError",
    "SignedInUser",
    "new_user_code",
    "normalize_user_code",
    "parse_form",
    "secret_hash",
}


def test_delegated_exports_exactly_the_intended_names() -> None:
    assert set(delegated.__all__) == EXPECTED
    assert len(delegated.__all__) == len(EXPECTED)
    for name in delegated.__all__:
        assert getattr(delegated, name) is not None


def test_the_rest_of_the_package_is_private() -> None:
    modules = [m.name for m in pkgutil.iter_modules(delegated.__path__)]
    assert modules
    assert all(name.startswith("_") for name in modules), modules
    for name in modules:
        importlib.import_module(f"{delegated.__name__}.{name}")
