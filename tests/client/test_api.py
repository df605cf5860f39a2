"""The client's public surface, and that it stays standard-library only at runtime."""

from __future__ import annotations

import subprocess
import sys

import pactmw.client

EXPECTED = {
    "A2AClient",
    "A2AErrorResponse",
    "AgentCard",
    "AgentCredentials",
    "AgentSigner",
    "AsyncA2AClient",
    "AsyncDeviceCodeClient",
    "AsyncioTransport",
    "AuthorizationServerMetadata",
    "CardInvalid",
    "ClientError",
    "ContentTypeNotSupported",
    "DelegationTokenRejected",
    "DelegationScheme",
    "DeviceAuthorizationResponse",
    "DeviceCodeClient",
    "DeviceFlowTimeout",
    "HTTPError",
    "HttpRequest",
    "HttpResponse",
    "IdentityRejected",
    "Interface",
    "InternalError",
    "InvalidParams",
    "JwksHost",
    "MessageReply",
    "NetworkError",
    "OAuthErrorResponse",
    "PollStatus",
    "PushNotificationNotSupported",
    "RateLimited",
    "Receipt",
    "ReceiptAction",
    "ReceiptInvalid",
    "ResponseInvalid",
    "RetryPolicy",
    "Scope",
    "ScopesNotOffered",
    "SendResult",
    "StepUp",
    "SyncTransport",
    "TaskNotFound",
    "TokenResponse",
    "TooManyRedirects",
    "URLRefused",
    "UnsupportedOperation",
    "VerifiedReceipt",
    "VersionNotSupported",
    "afetch_authorization_server_metadata",
    "afetch_card",
    "afetch_receipt_keys",
    "averify_receipt",
    "check_receipt",
    "delegation_scheme",
    "fetch_authorization_server_metadata",
    "fetch_card",
    "fetch_receipt_keys",
    "card_interface_url",
    "parse_card",
    "serve_jwks",
    "verify_receipt",
    "write_jwks",
    # The agent's own Parafé broker credential (pactmw.client.parafe).
    "AsyncParafeBrokerClient",
    "BrokerCredential",
    "BrokerRefused",
    "ClaimLink",
    "ClaimStatus",
    "ParafeBrokerClient",
    "Registration",
    "Renewal",
}


def test_exports() -> None:
    assert set(pactmw.client.__all__) == EXPECTED
    for name in pactmw.client.__all__:
        assert getattr(pactmw.client, name) is not None


def test_errors_form_one_hierarchy() -> None:
    from pactmw.client import errors
    from pactmw.core.errors import PactmwError

    for name in dir(errors):
        value = getattr(errors, name)
        if (
            isinstance(value, type)
            and issubclass(value, Exception)
            and value.__module__ == errors.__name__
        ):
            assert issubclass(value, pactmw.client.ClientError), name
    assert issubclass(pactmw.client.ClientError, PactmwError)
    assert issubclass(pactmw.client.TaskNotFound, pactmw.client.HTTPError)


def test_no_http_library_or_framework_is_imported() -> None:
    """Runtime dependencies stay as declared: the client uses the standard library for HTTP."""
    code = (
        "import sys, pactmw.client; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'httpx', 'starlette', 'werkzeug', 'django', 'flask', 'uvicorn', 'requests', 'aiohttp'}))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "[]"
