"""The personal agent's side of PACT 1.0: sign, talk to Brands, get delegated, check receipts.

    signer = AgentSigner.from_jwk(private_jwk, issuer="https://pa.example")
    me = signer.for_user("user-123", audience="<audience the Provider assigned>")
    card = fetch_card("https://shop.example/.well-known/agent-card.json")
    client = A2AClient.from_card(card, me)
    reply = client.send("Where is my order?")
    reply = client.send("It's A-1001", context_id=reply.context_id)

    scheme = delegation_scheme(card)                      # None: the Brand offers no §5
    device = DeviceCodeClient(scheme, me)
    authorization = device.start(["orders:read"])         # show verification_uri_complete
    tokens = device.wait_for_token(authorization)
    reply = client.send("Cancel it", context_id=..., delegation_token=tokens.access_token)
    verify_receipt(reply.receipt, metadata_url=scheme.metadata_url,
                   expected_pa=signer.issuer, expected_brand=client.url)

    broker = ParafeBrokerClient()                         # the agent's own Parafé identity
    registration = broker.register(private_jwk)           # show registration.claim_link.url
    broker.wait_for_claim(); broker.renew()               # then hold broker.credential

Every operation is one generator flow (`pactmw.client.flow`) over pure request builders and
response parsers; `A2AClient`/`DeviceCodeClient` drive it with blocking sockets and
`AsyncA2AClient`/`AsyncDeviceCodeClient` with asyncio streams. Standard library only.
"""

from pactmw.client.a2a import (
    A2AClient,
    AsyncA2AClient,
    MessageReply,
    Receipt,
    SendResult,
    StepUp,
)
from pactmw.client.card import (
    AgentCard,
    DelegationScheme,
    Interface,
    Scope,
    afetch_card,
    card_interface_url,
    delegation_scheme,
    fetch_card,
    parse_card,
)
from pactmw.client.device import (
    AsyncDeviceCodeClient,
    DeviceAuthorizationResponse,
    DeviceCodeClient,
    PollStatus,
    TokenResponse,
)
from pactmw.client.errors import (
    A2AErrorResponse,
    CardInvalid,
    ClientError,
    ContentTypeNotSupported,
    DelegationTokenRejected,
    DeviceFlowTimeout,
    HTTPError,
    IdentityRejected,
    InternalError,
    InvalidParams,
    NetworkError,
    OAuthErrorResponse,
    PushNotificationNotSupported,
    RateLimited,
    ReceiptInvalid,
    ResponseInvalid,
    ScopesNotOffered,
    TaskNotFound,
    TooManyRedirects,
    UnsupportedOperation,
    URLRefused,
    VersionNotSupported,
)
from pactmw.client.flow import RetryPolicy
from pactmw.client.http import HttpRequest, HttpResponse
from pactmw.client.parafe import (
    AsyncParafeBrokerClient,
    BrokerCredential,
    BrokerRefused,
    ClaimLink,
    ClaimStatus,
    ParafeBrokerClient,
    Registration,
    Renewal,
)
from pactmw.client.receipts import (
    AuthorizationServerMetadata,
    ReceiptAction,
    VerifiedReceipt,
    afetch_authorization_server_metadata,
    afetch_receipt_keys,
    averify_receipt,
    check_receipt,
    fetch_authorization_server_metadata,
    fetch_receipt_keys,
    verify_receipt,
)
from pactmw.client.signer import AgentCredentials, AgentSigner, JwksHost, serve_jwks, write_jwks
from pactmw.client.transport import AsyncioTransport, SyncTransport

__all__ = [
    "A2AClient",
    "A2AErrorResponse",
    "AgentCard",
    "AgentCredentials",
    "AgentSigner",
    "AsyncA2AClient",
    "AsyncDeviceCodeClient",
    "AsyncParafeBrokerClient",
    "AsyncioTransport",
    "AuthorizationServerMetadata",
    "BrokerCredential",
    "BrokerRefused",
    "CardInvalid",
    "ClaimLink",
    "ClaimStatus",
    "ClientError",
    "ContentTypeNotSupported",
    "DelegationScheme",
    "DelegationTokenRejected",
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
    "ParafeBrokerClient",
    "PollStatus",
    "PushNotificationNotSupported",
    "RateLimited",
    "Receipt",
    "ReceiptAction",
    "ReceiptInvalid",
    "Registration",
    "Renewal",
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
    "card_interface_url",
    "check_receipt",
    "delegation_scheme",
    "fetch_authorization_server_metadata",
    "fetch_card",
    "fetch_receipt_keys",
    "parse_card",
    "serve_jwks",
    "verify_receipt",
    "write_jwks",
]
