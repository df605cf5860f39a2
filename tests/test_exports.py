"""Every public package exports exactly what it means to, and every module says what it
exports (httpx's tests/test_exported_members.py is the model).

- `EXPECTED`: each package's `__all__` is exactly the intended set and every name resolves
  (packages with their own export test are checked there: `pactmw` in test_public_api.py,
  `pactmw.provider.delegated` and `pactmw.provider.parafe`, `pactmw.check`, `pactmw.cli`
  and `pactmw.demo`);
- a package defines or re-exports no public name outside its `__all__`;
- every module under src/pactmw has an `__all__` that lists exactly the public names it
  defines (read with `ast`, nothing imported);
- every exception pactmw defines belongs to the family under `PactmwError`.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

import pactmw
from pactmw.core.errors import PactmwError
from tests.support.modules import importable_modules

SRC = Path(pactmw.__file__).parent

EXPECTED: dict[str, set[str]] = {
    # Namespaces: their API is their submodules.
    "pactmw.core": set(),
    "pactmw.protocols": set(),
    "pactmw.adapters": set(),
    "pactmw.protocols.parafe": {
        "BROKER_DID", "CONSENT_ISSUER", "DEFAULT_BROKER_URL", "EXPIRED_CONSENT_TOKEN",
        "EXTENSION_URI", "IDENTITY_VCT", "IdentityCredential", "INVALID_CONSENT_TOKEN",
        "INVALID_PROOF", "MALFORMED_PARAFE_DATA",
        "MAX_ACTION_RECEIPTS", "MISSING_PARAFE_EXTENSION", "RECEIPT_CODES", "SCOPE_VIOLATION",
        "VERIFIER_CODES", "WRONG_AUDIENCE",
        "ActionReceipt", "BrokerKeys", "CardExtension", "Consent", "ConsentClaims",
        "ConsentPresenter", "DidDocument", "DidUnavailable", "ErrorMember",
        "HandshakeChallenge", "HandshakeComplete", "IndexAck", "KeySource",
        "MemoryReplayMemory", "OnlineVerification", "ParafeData", "ParafeError",
        "ParafeVerifier", "ProofClaims", "ReceiptSigner", "ReceiptVerifier", "ReplayMemory",
        "ScopeRequirement", "SessionClosed", "SessionReceipt", "StaticBrokerKeys",
        "StoreReplayMemory", "TrustedIssuer", "VerifiedConsent",
        "activation_headers", "agent_did", "averify_presentation_proof", "broker_key_set",
        "card_extension",
        "check_session_index", "consent_data", "consent_ref", "create_presentation_proof",
        "details_hash", "entry_hash", "error_reply_data", "is_activated",
        "parse_card_extension", "parse_parafe_data", "read_consent", "read_parafe",
        "receipt_error_for", "receipt_hash", "requested_extensions",
        "scope_requirements_from_policies", "verify_presentation_proof",
        "verify_identity_credential", "averify_identity_credential", "verify_credential_jwt",
        "averify_credential_jwt",
        "with_action_receipts", "with_parafe",
        "AP2_CHECKOUT_MANDATE_KEY", "AP2_CHECKOUT_RECEIPT_KEY", "AP2_EXTENSION_URI",
        "AP2_PAYMENT_MANDATE_KEY", "AP2_PAYMENT_RECEIPT_KEY", "AP2_RECEIPT_KINDS", "Ap2Data",
        "Ap2Outcome", "Ap2Receipt", "MandateRef", "MandateReferences", "ap2_card_extension",
        "ap2_parts", "mandate_references", "read_ap2", "sign_ap2_receipt", "with_ap2",
        "BrokerRetry", "FiledReceipt", "request_pop",
    },
    "pactmw.protocols.poppy": {
        "ASSERTION_SKEW", "CLIENT_ASSERTION_TYPE", "DEVICE_CODE_GRANT", "DISCOVERY_PATH",
        "JWT_BEARER_GRANT", "MAX_ASSERTION_LIFETIME", "OPERATIONS_EXTENSION",
        "OPERATIONS_VERSION", "PROTOCOL_VERSION", "REFRESH_TOKEN_GRANT",
        "ApiDescriptor", "AssertionVerifier", "Confirmation", "FeedbackReport",
        "InboundMessage", "PoppyCompany", "PoppyConfigError", "PoppyError",
        "SessionCredentials", "TokenRequest", "VerifiedAssertion",
        "authorization_server_metadata", "check_assertion_claims", "discovery_document",
        "dpop_refusal", "metadata_url", "parse_confirmation", "parse_conversation_start",
        "parse_feedback", "parse_form", "parse_id", "parse_json_object", "parse_message",
        "parse_message_post", "parse_scope", "parse_token_request", "poppy_response",
        "refuse_token_in_url", "session_credentials",
    },
    "pactmw.provider": {
        "AuditEvent", "Brand", "ConsentPages", "ConsentView", "DelegationConfig", "Provider",
        "ProviderSettings", "RateLimit", "Reply", "SignedInUser", "Skill", "StepUpRequired",
        "ToolRegistry", "Turn", "TurnHandler",
        "brand_domain_card", "build_card", "card_url", "interface_url", "load_toml",
    },
    "pactmw.store": {
        "AgentExists", "Approval", "AuthorizationDetailsStore", "Claim", "ClaimKind", "Cleanup",
        "Conversation",
        "DeviceAuthorization", "DeviceStatus", "DjangoStore",
        "Grant", "GrantUsageStore", "MemoryStore", "NotFound", "Poll", "PollKind", "PostgresStore",
        "RateLimitStore", "Rotation", "RotationKind", "SqliteStore", "Store", "StoreError",
        "StoreURL", "StoreUnavailable",
        "StoredAgent", "StoredTurn", "UserCodeTaken",
        "open_store", "parse_store_url",
    },
    "pactmw.client": {
        "A2AClient", "A2AErrorResponse", "AgentCard", "AgentCredentials", "AgentSigner",
        "AsyncA2AClient", "AsyncDeviceCodeClient", "AsyncioTransport",
        "AuthorizationServerMetadata", "CardInvalid", "ClientError", "ContentTypeNotSupported",
        "DelegationTokenRejected", "DelegationScheme", "DeviceAuthorizationResponse",
        "DeviceCodeClient", "DeviceFlowTimeout", "HTTPError", "HttpRequest", "HttpResponse",
        "IdentityRejected", "Interface", "InternalError", "InvalidParams", "JwksHost",
        "MessageReply", "NetworkError", "OAuthErrorResponse", "PollStatus",
        "PushNotificationNotSupported", "RateLimited", "Receipt", "ReceiptAction",
        "ReceiptInvalid", "ResponseInvalid", "RetryPolicy", "Scope", "ScopesNotOffered",
        "SendResult", "StepUp",
        "SyncTransport", "TaskNotFound", "TokenResponse", "TooManyRedirects", "URLRefused",
        "UnsupportedOperation", "VerifiedReceipt", "VersionNotSupported",
        "afetch_authorization_server_metadata", "afetch_card", "afetch_receipt_keys",
        "averify_receipt", "card_interface_url", "check_receipt", "delegation_scheme",
        "fetch_authorization_server_metadata", "fetch_card", "fetch_receipt_keys",
        "parse_card", "serve_jwks", "verify_receipt", "write_jwks",
        "AsyncParafeBrokerClient", "BrokerCredential", "BrokerRefused", "ClaimLink",
        "ClaimStatus", "ParafeBrokerClient", "Registration", "Renewal",
    },
    "pactmw.adapters.asgi": {
        "AUTH_SCOPES", "PARAFE_STATE", "POPPY_KEY", "SCOPE_KEY",
        "A2AProviderApp", "PersonalAgentAuthError", "PersonalAgentBackend",
        "PersonalAgentMiddleware", "PersonalAgentUser",
        "a2a_mount", "a2a_routes", "attach", "auth_scopes", "body_reader", "current_parafe",
        "current_personal_agent", "current_poppy_caller", "delegation_required",
        "neutral_request", "on_auth_error", "parafe_action", "personal_agent_required",
        "poppy_discovery_route", "poppy_session_required", "requires", "route_path",
        "send_response", "to_starlette",
    },
    "pactmw.adapters.wsgi": {
        "ENVIRON_KEY", "POPPY_ENVIRON_KEY", "A2AProviderApp", "PersonalAgentMiddleware",
        "body_reader", "current_parafe", "current_personal_agent", "current_poppy_caller",
        "delegation_required",
        "neutral_request", "parafe_action", "personal_agent_required", "poppy_discovery_app",
        "poppy_session_required", "respond", "to_werkzeug",
    },
    "pactmw.adapters.flask": {
        "Pactmw", "PersonalAgentRefused", "ScopeRefused",
        "current_parafe", "current_personal_agent", "current_poppy_caller",
        "delegation_required", "get_provider", "get_verifier", "parafe_action",
        "personal_agent_required", "poppy_discovery_view", "poppy_session_required",
        "verify_personal_agent",
    },
    "pactmw.adapters.fastapi": {
        "EXCEPTION_HANDLERS", "PersonalAgentRefused", "PersonalAgentScheme",
        "PoppySessionRefused", "PoppySessionScheme", "poppy_refusal_handler", "refusal_handler",
    },
    "pactmw.adapters.django": {
        "PersonalAgentMiddleware",
        "a2a_urlpatterns", "a2a_view", "configured", "delegation_required", "get_provider",
        "get_verifier", "parafe_action", "personal_agent_required", "poppy_discovery_view",
        "poppy_session_required", "to_django",
    },
    # The modules of the error family and its one renderer.
    "pactmw.core.errors": {
        "A2AError", "AuthenticationFailed", "FetchError", "InsufficientScope", "JoseError",
        "KeyUnavailable", "MalformedInput", "MissingExtra", "PactmwError", "RequestRefused",
    },
    "pactmw.provider.errors": {"error_response"},
}  # fmt: skip

#: Packages whose `__init__` only gathers names: nothing public in them is left unexported.
FACADES = [
    "pactmw",
    "pactmw.core",
    "pactmw.protocols",
    "pactmw.protocols.parafe",
    "pactmw.protocols.poppy",
    "pactmw.provider",
    "pactmw.provider.delegated",
    "pactmw.provider.parafe",
    "pactmw.store",
    "pactmw.client",
    "pactmw.adapters",
    "pactmw.adapters.django",
    "pactmw.check",
    "pactmw.demo",
]

#: Helpers a facade imports for its own code, not for its callers.
FACADE_HELPERS = {
    # store/__init__ builds StoreURL and picks a backend itself (store/ is being rewritten).
    "pactmw.store": {"TYPE_CHECKING", "frozen"},
}

#: Exceptions outside the family, on purpose.
NOT_IN_FAMILY = {
    # A BaseException sentinel that stops `pactmw serve`: no `except Exception` may catch it.
    "pactmw.cli._serve._Stopped",
    # Carries a failed read of an agent's switch past `adrive`'s `except Exception`, so no
    # flow can catch the caller's refusal (pactmw.provider.driver.arun).
    "pactmw.provider.driver._Refused",
}


#: Public-looking names a module defines but keeps out of its curated `__all__` on purpose.
DEFINED_NOT_EXPORTED = {
    # The adapters' own constants and aliases (their modules' exports are checked exactly
    # above).
    "pactmw.adapters.flask": {"A2A_ENDPOINT", "EXTENSION_KEY"},
    "pactmw.adapters.wsgi": {"WSGIView"},
    # The development login app's paths and limits; it exports the login and its helper.
    "pactmw.brand_login": {"AUTO_SUBMIT_SCRIPT", "JWKS_PATH", "LOGIN_PATH", "MAX_FORM_BYTES"},
    # The checks and limits every store backend shares; not API.
    "pactmw.store.base": {
        "EXPIRED_RETENTION", "PURGE_EVERY", "check_approval", "check_binding", "check_counters",
        "check_denial", "check_grant_scopes", "check_token_owner", "grant_scopes", "has_nul",
        "reject_nul", "scope_tuple",
    },
}  # fmt: skip


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(
    (path for path in SRC.rglob("*.py") if path.name != "__main__.py"), key=_module_name
)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_exports_are_exactly_the_intended_names(name: str) -> None:
    module = importlib.import_module(name)
    assert set(module.__all__) == EXPECTED[name]
    assert len(module.__all__) == len(EXPECTED[name]), "a name is listed twice"
    for export in module.__all__:
        assert getattr(module, export) is not None, export


@pytest.mark.parametrize("name", FACADES)
def test_facades_leave_nothing_public_unexported(name: str) -> None:
    module = importlib.import_module(name)
    public = {
        key
        for key, value in vars(module).items()
        if not key.startswith("_")
        and not isinstance(value, types.ModuleType)
        and key != "annotations"  # `from __future__ import annotations`
    }
    lazy = {export for export in module.__all__ if export not in vars(module)}
    # An exported submodule (`pactmw.check.names`) is listed but not counted among the values.
    submodules = {e for e in module.__all__ if isinstance(vars(module).get(e), types.ModuleType)}
    listed = set(module.__all__) - lazy - submodules - {"__version__"}
    assert public - FACADE_HELPERS.get(name, set()) == listed
    for export in lazy:  # resolved on first use (a module `__getattr__`)
        assert getattr(module, export) is not None, export


def _bound_names(tree: ast.Module) -> tuple[list[str], set[str]]:
    """The public names a module defines at top level (not `logger`, not type variables),
    and every name it binds at top level (imports too)."""
    defined: list[str] = []
    bound: set[str] = set()

    def visit(body: list[ast.stmt], top: bool) -> None:
        for node in body:
            names: list[str] = []
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") in {
                    "TypeVar",
                    "ParamSpec",
                }:
                    bound.update(names)
                    continue
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.If):
                visit(node.body, False)
                visit(node.orelse, False)
            elif isinstance(node, ast.Try):
                visit(node.body, False)
                for handler in node.handlers:
                    visit(handler.body, False)
            bound.update(names)
            if top:
                defined.extend(n for n in names if not n.startswith("_") and n != "logger")

    visit(tree.body, True)
    return defined, bound


def _all_of(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        target: ast.expr
        value: ast.expr | None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "__all__":
            assert isinstance(value, ast.List), "__all__ must be a list literal"
            return [ast.literal_eval(item) for item in value.elts]
    return None


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_every_module_lists_what_it_defines(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exported = _all_of(tree)
    assert exported is not None, f"{_module_name(path)} has no __all__"
    defined, bound = _bound_names(tree)
    allowed = DEFINED_NOT_EXPORTED.get(_module_name(path), set())
    missing = sorted(set(defined) - set(exported) - allowed)
    assert missing == [], f"public names missing from __all__: {missing}"
    unbound = {name for name in exported if name not in bound and name != "__version__"}
    assert unbound == set(), "__all__ names nothing by that name"


def test_every_exception_belongs_to_the_family() -> None:
    outside = set()
    for module in importable_modules():
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not issubclass(value, PactmwError)
            ):
                outside.add(f"{value.__module__}.{value.__qualname__}")
    assert outside == NOT_IN_FAMILY


def test_the_django_adapter_defines_no_exception() -> None:
    for path in (SRC / "adapters" / "django").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
        for node in classes:
            bases = {ast.unparse(base) for base in node.bases}
            assert not any("Error" in b or "Exception" in b for b in bases), (path, node.name)
