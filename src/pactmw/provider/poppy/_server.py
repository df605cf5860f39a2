"""The Poppy company side of a Provider: discovery, the token and the revocation endpoints.

Routes (one issuer per Brand, `{base_url}/a2a/{brand}/poppy`, PAP-3.2-07/08):

- `GET /.well-known/poppy.json`: the document of the Brand whose `poppy.domains` holds the
  request's `Host`, served (never redirected to, PAP-3.1-02);
- `GET /.well-known/oauth-authorization-server{base path}/a2a/{brand}/poppy`: the issuer's
  RFC 8414 metadata (§3.2, path insertion of RFC 8414 §3.1);
- `POST {issuer}/device`: Device Sign-In (§4.6, RFC 8628), offered by a Brand that also
  has PACT `delegation`: the person approves on the Brand's consent pages;
- `POST {issuer}/token`: jwt-bearer Session start and renewal (§4.2); device_code signs the
  polling Session in with what the person approved and issues the first Account Token;
  refresh_token signs a Session in with an Account Token, rotating it (§4.8);
- `POST {issuer}/revoke`: sign-out (§4.9), `200 {}` for any token (RFC 7009 §2.2).

The flows follow the SDK's order: the client assertion (`401 invalid_client`), the DPoP
proof (`400 invalid_dpop_proof`), then the grant. Replay memories live in the store
(namespaces `poppy.assertion` and `poppy.dpop`), so every process serving the Brand refuses a
replayed assertion or proof (PAP-4.2-09, PAP-4.3-06). Refusals are `PoppyError`s, rendered
by `provider.errors.error_response` through `poppy_response`.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Literal
from urllib.parse import urlsplit

from attrs import field, frozen

from pactmw.core.client_metadata import ClientMetadataCache
from pactmw.core.dpop import DpopError, DpopProof, check_dpop_proof, spend_dpop_proof
from pactmw.core.fetch import FetchPolicy
from pactmw.core.http import Request, Response
from pactmw.core.replay import StoreReplayMemory
from pactmw.protocols.poppy import (
    DEVICE_CODE_GRANT,
    DISCOVERY_PATH,
    JWT_BEARER_GRANT,
    REFRESH_TOKEN_GRANT,
    AssertionVerifier,
    PoppyCompany,
    PoppyConfigError,
    PoppyError,
    VerifiedAssertion,
    authorization_server_metadata,
    discovery_document,
    dpop_refusal,
    parse_form,
    parse_scope,
    parse_token_request,
    session_credentials,
)
from pactmw.provider._send import MessageSender
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.delegated._audit import Audit
from pactmw.provider.delegated._codes import new_secret, new_user_code, secret_hash
from pactmw.provider.delegated._device import DEVICE_CODE_LIFETIME, verification_uris
from pactmw.provider.delegated._forms import FORM_LIMIT
from pactmw.provider.delegated._resource import USE_RECORD_INTERVAL
from pactmw.provider.delegated._responses import NO_STORE, PUBLIC_DOCUMENT, json_response
from pactmw.provider.flow import Flow, NeedBody, NeedKeys, SubFlow, store
from pactmw.provider.poppy._config import PoppyConfig
from pactmw.provider.poppy._conversations import (
    ConversationOperation,
    PoppyAgent,
    PoppyConversations,
    conversation_route,
)
from pactmw.provider.poppy._operations import (
    IDEMPOTENCY_KEY,
    OPERATIONS_SEGMENT,
    WRITE_METHODS,
    OperationRequest,
    PoppyOperations,
    operation_route,
)
from pactmw.provider.ratelimit import RateLimit, RateLimiter
from pactmw.store import GrantUsageStore, RateLimitStore
from pactmw.store._protocols.sessions import decide_session_change
from pactmw.store.base import DeviceAuthorization, Grant, Poll, Store, UserCodeTaken

logger = logging.getLogger("pactmw.poppy")

METADATA_PREFIX = "/.well-known/oauth-authorization-server"
#: Where a Brand's issuer sits below `{base_url}/a2a/{brand}`.
ISSUER_SEGMENT = "poppy"
SESSION_ID_PREFIX = "ses_"
SESSION_TOKEN_PREFIX = "sat_"  # noqa: S105 - a prefix, not a secret
ACCOUNT_TOKEN_PREFIX = "act_"  # noqa: S105 - a prefix, not a secret
#: How long an unused Account Token lasts (each use rotates it); its grant may end sooner.
ACCOUNT_TOKEN_SECONDS = 30 * 86_400.0
#: Token requests per (agent, User ID) per minute, as PACT's token endpoint allows.
TOKEN_RATE_LIMIT = RateLimit(per_user=120, window=60.0)
#: Device authorization requests per agent per minute: each makes a code a person may be
#: shown, so an agent asking in a loop is stopped here, far above what its users need.
DEVICE_RATE_LIMIT = RateLimit(per_agent=300, window=60.0)
ASSERTION_NAMESPACE = "poppy.assertion"
DPOP_NAMESPACE = "poppy.dpop"
#: Grants whose last recorded use one process remembers (see `PoppyServer._used`).
_USED_MEMO_SIZE = 100_000

PoppyOperation = Literal[
    "discovery", "metadata", "device", "token", "revoke", "conversation", "operations"
]
#: Where a Brand's conversation endpoint sits below its issuer (§7).
CONVERSATIONS_SEGMENT = "conversations"

#: The device_code grant's answers before an approval is collected (RFC 8628 §3.5), and
#: its refusals, by `Poll.kind`.
_POLL_ERRORS: Mapping[str, tuple[str, str]] = {
    "unknown": ("invalid_grant", "not a device code of this agent"),
    "expired": ("expired_token", "the device code has expired"),
    "denied": ("access_denied", "the person denied the request"),
    "consumed": ("invalid_grant", "the device code was already used"),
    "slow_down": ("slow_down", "poll less often"),
    "pending": ("authorization_pending", "the person has not decided yet"),
    "account_mismatch": ("account_mismatch", "this Session was signed in to another account"),
}


@frozen
class PoppyRoute:
    """A matched Poppy route: the operation and its Brand (None for `poppy.json`, which is
    chosen by `Host`)."""

    operation: PoppyOperation
    brand_id: str | None = None
    #: For `conversation`: which request, and the conversation it names (None for create).
    conversation: tuple[ConversationOperation, str | None] | None = None
    #: For `operations`: which request, and the operation it names.
    operation_request: tuple[OperationRequest, str] | None = None


@frozen
class PoppyCaller:
    """Who calls an app's API with a Poppy Session Token (checked by `session_flow`): the
    personal agent (`client_id`), its User ID, the Session, and, signed in, the Brand
    `account` and the `scopes` it approved."""

    brand_id: str
    client_id: str
    user_id: str
    session_id: str
    account: str | None
    scopes: tuple[str, ...]
    #: The grant a signed-in Session runs under (None signed out).
    grant_id: str | None = None
    #: A write's `Idempotency-Key` (Guides, Retries), and the request it came with
    #: (method, path and query): `Provider.poppy_propose` answers a repeat from the store.
    idempotency_key: str | None = None
    request_line: str = ""

    @property
    def signed_in(self) -> bool:
        return self.account is not None


@frozen
class DeviceSignIn:
    """How a Poppy Brand signs people in (§4.6): on its consent pages, with the scopes,
    login, interval and grant lifetime of its PACT `delegation` (one grant whichever
    protocol asked). `consent_url` is the Brand's consent (code entry) page."""

    delegation: DelegationConfig
    consent_url: str

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.delegation.scopes)


@frozen
class PoppyBrand:
    """One Brand's Poppy runtime: its settings, its published description and verifier,
    and its Device Sign-In (None: it offers none)."""

    brand_id: str
    config: PoppyConfig
    company: PoppyCompany
    verifier: AssertionVerifier = field(repr=False)
    metadata: Response = field(repr=False)
    documents: Mapping[str, Response] = field(repr=False)  # served domain -> poppy.json
    sign_in: DeviceSignIn | None = None


def _host_name(host: str | None) -> str:
    """The host name of a `Host` header: lower-cased, port and a final dot removed; "" for
    an IPv6 literal (never a Poppy domain) or nothing."""
    name = (host or "").strip().lower()
    if name.startswith("["):
        return ""
    return name.rsplit(":", 1)[0].rstrip(".") if ":" in name else name.rstrip(".")


def issuer_url(base_url: str, brand_id: str) -> str:
    """The Poppy issuer of a Brand: `{base_url}/a2a/{brand}/poppy`."""
    return f"{base_url.rstrip('/')}/a2a/{brand_id}/{ISSUER_SEGMENT}"


def token_hash(token: str) -> str:
    """What the store keeps of a Session Token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("ascii", "surrogateescape")).hexdigest()


def _within(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


def _check_sign_in_link(brand_id: str, company: PoppyCompany, sign_in: DeviceSignIn) -> None:
    """A personal agent shows a device sign-in link only on the issuer's host, a
    `poppy_domains` domain or a subdomain (PAP-4.6-02): refuse at startup a login page
    elsewhere, which every agent would refuse at sign-in."""
    link, _ = verification_uris(sign_in.consent_url, sign_in.delegation, "BCDF-GHJK")
    host = (urlsplit(link).hostname or "").lower().rstrip(".")
    allowed = ((urlsplit(company.issuer).hostname or "").lower(), *company.poppy_domains)
    if not any(_within(host, domain) for domain in allowed if domain):
        raise ValueError(
            f"brands.{brand_id}.delegation.login_url must be on {allowed[0]} or one of "
            f"brands.{brand_id}.poppy.domains (or a subdomain): a personal agent refuses a "
            f"device sign-in link on {host} (PAP-4.6-02)"
        )


def _company(
    base_url: str,
    brand_id: str,
    name: str,
    config: PoppyConfig,
    sign_in: DeviceSignIn | None = None,
    conversations: bool = True,
) -> PoppyCompany:
    issuer = issuer_url(base_url, brand_id)
    where = f"brands.{brand_id}.poppy"
    try:
        return PoppyCompany(
            name=name,
            domain=config.domain,
            issuer=issuer,
            token_endpoint=f"{issuer}/token",
            revocation_endpoint=f"{issuer}/revoke",
            device_authorization_endpoint=None if sign_in is None else f"{issuer}/device",
            device_scopes=None if sign_in is None else sign_in.scopes,
            conversations_endpoint=(f"{issuer}/{CONVERSATIONS_SEGMENT}" if conversations else None),
            operations_endpoint=(
                f"{issuer}/{OPERATIONS_SEGMENT}" if config.operations is not None else None
            ),
            custom_scopes=config.custom_scopes,
            apis=config.apis,
            poppy_domains=config.domains,
        )
    except PoppyConfigError as exc:
        # Name the setting the operator wrote, not the protocol object's field.
        message = str(exc)
        if "needs conversations_endpoint" in message:  # until conversations (plan step 6)
            message = f"{where}.apis must list at least one API (conversations come later)"
        message = message.replace("PoppyCompany.poppy_domains", f"{where}.domains")
        message = message.replace("PoppyCompany.", f"{where}.")
        raise ValueError(message) from exc


def poppy_companies(
    base_url: str,
    brands: Mapping[str, tuple[str, PoppyConfig]],
    sign_in: Mapping[str, DeviceSignIn] | None = None,
    conversations: bool = True,
) -> dict[str, PoppyCompany]:
    """What each Poppy-enabled Brand publishes (with Device Sign-In for those in
    `sign_in`); ValueError naming the setting when the settings cannot make a valid
    Company (startup checks, PAP-3-05, PAP-3.2-01/02, PAP-4.6-02).

    `conversations`: whether the Brands' conversation endpoint is listed (a Provider's
    always is; a `PoppyServer` built without the Brands' bots serves none)."""
    if brands and urlsplit(base_url).scheme != "https":
        first = next(iter(brands))
        raise ValueError(
            f"base_url must be an https URL when a Brand enables Poppy "
            f"(brands.{first}.poppy): every Poppy URL is https (PAP-3-05)"
        )
    companies: dict[str, PoppyCompany] = {}
    owner: dict[str, str] = {}
    for brand_id, (name, config) in brands.items():
        device = (sign_in or {}).get(brand_id)
        company = _company(base_url.rstrip("/"), brand_id, name, config, device, conversations)
        if device is not None:
            _check_sign_in_link(brand_id, company, device)
        for domain in company.poppy_domains:
            if domain in owner:
                raise ValueError(
                    f"brands.{brand_id}.poppy.domains: {domain} already serves "
                    f"brands.{owner[domain]}'s poppy.json (one Company per domain)"
                )
            owner[domain] = brand_id
        companies[brand_id] = company
    return companies


class PoppyServer:
    """Every Poppy-enabled Brand of one Provider. Thread-safe; the Provider builds it.

    `brands` maps a Brand id to (its display name, its `PoppyConfig`); `sign_in` the
    Brands that offer Device Sign-In on their consent pages; `fetch_policy` governs
    fetching agents' client metadata and keys (the same SSRF-safe, bounded fetcher as
    PACT's JWKS); `clock` is epoch seconds.
    """

    def __init__(
        self,
        *,
        base_url: str,
        brands: Mapping[str, tuple[str, PoppyConfig]],
        store: Store,
        fetch_policy: FetchPolicy,
        clock: Callable[[], float] = time.time,
        token_rate_limit: RateLimit | None = None,
        rate_counters: RateLimitStore | None = None,
        sign_in: Mapping[str, DeviceSignIn] | None = None,
        device_rate_limit: RateLimit | None = None,
        audit: Audit | None = None,
        bots: Mapping[str, Brand] | None = None,
        turns: MessageSender | None = None,
    ) -> None:
        sign_in = sign_in or {}
        #: The conversation endpoints, when the Provider hands over its Brands' bots and its
        #: turn runner (the one `message:send` uses); published in poppy.json then.
        self.conversations = (
            PoppyConversations(store=store, clock=clock, bots=bots, turns=turns)
            if bots is not None and turns is not None
            else None
        )
        companies = poppy_companies(base_url, brands, sign_in, self.conversations is not None)
        self.base_url = base_url.rstrip("/")
        parts = urlsplit(self.base_url)
        self._base_path = parts.path
        #: The public origin requests' URLs are rebuilt from (DPoP `htu`), never `Host`.
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self.store = store
        self._clock = clock
        #: Where a Device Sign-In's grant is announced (as PACT's consent approvals are).
        self._audit = audit or Audit()
        #: When this process last recorded each grant's use for the connected agents page's
        #: "last used": a Session's request reads no grant row, so without this memo every
        #: API request would cost a store write. Cleared wholesale past `_USED_MEMO_SIZE`.
        self._used: dict[str, float] = {}
        self._records_use = isinstance(store, GrantUsageStore)
        self.clients = ClientMetadataCache(fetch_policy)
        #: Operations v1 of the Brands that enable it (docs/poppy.md), else None.
        operation_configs = {
            brand_id: config.operations
            for brand_id, (_, config) in brands.items()
            if config.operations is not None
        }
        self.operations = (
            PoppyOperations(
                store=store,
                clock=clock,
                clients=self.clients,
                configs=operation_configs,
                tools={brand_id: brand.tools for brand_id, brand in (bots or {}).items()},
            )
            if operation_configs
            else None
        )
        if self.conversations is not None:
            self.conversations.operations = self.operations
        assertion_replay = StoreReplayMemory(store, ASSERTION_NAMESPACE)
        self._dpop_replay = StoreReplayMemory(store, DPOP_NAMESPACE)
        # Token requests per (agent, User ID), counted once the grant named the user: only
        # verified agents are counted (GUIDE-rate-03), in the store when it is shared.
        self._token_limiter = RateLimiter(
            token_rate_limit or TOKEN_RATE_LIMIT, store=rate_counters, namespace="poppy.token"
        )
        self._device_limiter = RateLimiter(
            device_rate_limit or DEVICE_RATE_LIMIT, store=rate_counters, namespace="poppy.device"
        )
        self.brands: dict[str, PoppyBrand] = {}
        self._by_domain: dict[str, PoppyBrand] = {}
        for brand_id, (_, config) in brands.items():
            company = companies[brand_id]
            documents = {
                domain: json_response(discovery_document(company, domain), extra=PUBLIC_DOCUMENT)
                for domain in company.poppy_domains
            }
            runtime = PoppyBrand(
                brand_id=brand_id,
                config=config,
                company=company,
                verifier=AssertionVerifier(
                    issuer=company.issuer,
                    clients=self.clients,
                    replay=assertion_replay,
                    clock=clock,
                ),
                metadata=json_response(
                    authorization_server_metadata(company), extra=PUBLIC_DOCUMENT
                ),
                documents=documents,
                sign_in=sign_in.get(brand_id),
            )
            self.brands[brand_id] = runtime
            for domain in company.poppy_domains:
                self._by_domain[domain] = runtime

    # -- routing -----------------------------------------------------------------------------

    def matches(self, path: str) -> bool:
        """Whether `path` is one of the root documents this server answers (the endpoints
        under `/a2a/` are the Provider's mount anyway)."""
        return path == DISCOVERY_PATH or path.startswith(METADATA_PREFIX + "/")

    def route(self, method: str, path: str) -> PoppyRoute | None:
        """The Poppy route of a request, or None (not a Poppy path, or a wrong method: 404,
        as for every unmatched route)."""
        if path == DISCOVERY_PATH:
            return PoppyRoute("discovery") if method == "GET" else None
        if path.startswith(METADATA_PREFIX + "/"):
            rest = path[len(METADATA_PREFIX) :]
            prefix = f"{self._base_path}/a2a/"
            suffix = f"/{ISSUER_SEGMENT}"
            if method != "GET" or not rest.startswith(prefix) or not rest.endswith(suffix):
                return None
            brand_id = rest[len(prefix) : -len(suffix)]
            return PoppyRoute("metadata", brand_id) if brand_id in self.brands else None
        if not path.startswith("/a2a/"):
            return None
        brand_id, _, rest = path[len("/a2a/") :].partition("/")
        if brand_id not in self.brands:
            return None
        conversations = f"{ISSUER_SEGMENT}/{CONVERSATIONS_SEGMENT}"
        if self.conversations is not None and (
            rest == conversations or rest.startswith(conversations + "/")
        ):
            found = conversation_route(method, rest[len(conversations) :])
            return PoppyRoute("conversation", brand_id, found) if found is not None else None
        operations = f"{ISSUER_SEGMENT}/{OPERATIONS_SEGMENT}/"
        if self.operations is not None and rest.startswith(operations):
            request = operation_route(method, rest[len(operations) - 1 :])
            if request is None or brand_id not in self.operations.configs:
                return None
            return PoppyRoute("operations", brand_id, operation_request=request)
        if method != "POST":
            return None
        if rest == f"{ISSUER_SEGMENT}/token":
            return PoppyRoute("token", brand_id)
        if rest == f"{ISSUER_SEGMENT}/revoke":
            return PoppyRoute("revoke", brand_id)
        if rest == f"{ISSUER_SEGMENT}/device" and self.brands[brand_id].sign_in is not None:
            return PoppyRoute("device", brand_id)
        return None

    def flow(self, route: PoppyRoute, request: Request) -> Flow:
        """Answer a matched route (a flow for the Provider's drivers)."""
        if route.operation == "discovery":
            return self.discovery(request.header("host"))
        assert route.brand_id is not None
        brand = self.brands[route.brand_id]
        if route.operation == "metadata":
            return brand.metadata
        if route.operation == "token":
            return (yield from self._token(brand, request))
        if route.operation == "device":
            return (yield from self._device(brand))
        if route.operation == "operations":
            assert route.operation_request is not None
            assert self.operations is not None
            owner = yield from self.session_flow(brand.brand_id, request, ())
            kind, operation_id = route.operation_request
            return (yield from self.operations.flow(kind, operation_id, owner, request))
        if route.operation == "conversation":
            assert route.conversation is not None
            assert self.conversations is not None
            caller: PoppyCaller = yield from self.session_flow(brand.brand_id, request, ())
            agent = PoppyAgent(
                brand_id=caller.brand_id,
                client_id=caller.client_id,
                user_id=caller.user_id,
                account=caller.account,
                grant_id=caller.grant_id,
                scopes=caller.scopes,
            )
            operation, conversation_id = route.conversation
            return (
                yield from self.conversations.flow(
                    operation, conversation_id, agent, request, brand.company.issuer
                )
            )
        return (yield from self._revoke(brand))

    # -- discovery ---------------------------------------------------------------------------

    def discovery(self, host: str | None) -> Response:
        """The `poppy.json` for the request's `Host` (port ignored, case-insensitive); 404
        when no Brand publishes on that host."""
        name = _host_name(host)
        brand = self._by_domain.get(name)
        if brand is None:
            raise PoppyError(404, "not_found", "no Company on this host")
        return brand.documents[name]

    def brand_discovery(self, brand_id: str, host: str | None) -> Response:
        """One Brand's `poppy.json` for the request's `Host`, which must be one of its
        domains (a document naming another host fails the agent's check, PAP-3.1-02)."""
        name = _host_name(host)
        document = self.brands[brand_id].documents.get(name)
        if document is None:
            raise PoppyError(404, "not_found", "this Brand publishes no poppy.json here")
        return document

    # -- the app's own APIs (§6: a Session Token with a DPoP proof) -------------------------

    def session_flow(self, brand_id: str, request: Request, scopes: tuple[str, ...]) -> SubFlow:
        """Check a request to one of the Brand's APIs; the value is a `PoppyCaller`.

        In order: the credentials (a token in the URL or two `Authorization` headers: `400
        invalid_request`; no `Authorization: DPoP` token: `401 invalid_token`, PAP-4.3-11/12/
        17); the Session Token (unknown, replaced, expired, another Brand's, or an Account
        Token: `401 invalid_token`, PAP-4.8-01); the DPoP proof for this method and URL,
        bound to the token (`ath`) and to its key (`jkt`), spent in the store (`401
        invalid_dpop_proof`, PAP-4.3-02..07/19); then `scopes`: signed out is `403
        sign_in_required`, a scope not approved `403 insufficient_scope`, both naming the
        scopes to ask for. The Session is read on every request, so a sign-out shows at once
        (PAP-4.9-01).
        """
        brand = self.brands[brand_id]
        credentials = session_credentials(request)
        now = self._clock()
        session = yield store(
            self.store.session_for_token, token_hash=token_hash(credentials.token), now=now
        )
        if session is None or session.brand_id != brand_id:
            raise PoppyError(401, "invalid_token", "not a live Session Token of this Brand")
        try:
            proof = check_dpop_proof(
                credentials.proofs,
                method=request.method,
                url=self._origin + request.path,
                now=now,
                access_token=credentials.token,
                jkt=session.jkt,
                allowed_algs=frozenset(brand.company.dpop_signing_algs),
            )
            yield store(spend_dpop_proof, proof=proof, replay=self._dpop_replay, now=now)
        except DpopError as exc:
            raise dpop_refusal(exc, token_endpoint=False) from exc
        wanted = " ".join(scopes)
        if scopes and not session.signed_in:
            raise PoppyError(403, "sign_in_required", "signed out", members={"scope": wanted})
        if not set(scopes) <= set(session.scopes):
            raise PoppyError(403, "insufficient_scope", "not approved", members={"scope": wanted})
        if session.grant_id is not None and self._records_use:
            yield from self._record_use(session.grant_id, now)
        key = None
        if request.method in WRITE_METHODS and request.has_header("idempotency-key"):
            key = request.header("idempotency-key")  # None when repeated
            if key is None or not IDEMPOTENCY_KEY.fullmatch(key):
                raise PoppyError(
                    400, "invalid_request", "Idempotency-Key: one, 1-255 visible ASCII"
                )
        return PoppyCaller(
            brand_id=brand_id,
            client_id=session.client_id,
            user_id=session.user_id,
            session_id=session.session_id,
            account=session.account,
            scopes=session.scopes,
            grant_id=session.grant_id,
            idempotency_key=key,
            request_line=f"{request.method} {request.path}?{request.query}",
        )

    def _record_use(self, grant_id: str, now: float) -> SubFlow:
        """Record a signed-in Session's use of its grant, at most once a minute per grant
        and process (the store also writes at most once a minute per grant)."""
        last = self._used.get(grant_id)
        if last is not None and now - last < USE_RECORD_INTERVAL:
            return
        if len(self._used) >= _USED_MEMO_SIZE:
            self._used.clear()
        self._used[grant_id] = now
        usage: GrantUsageStore = self.store  # type: ignore[assignment]
        yield store(usage.record_grant_use, grant_id=grant_id, now=now, every=USE_RECORD_INTERVAL)

    # -- the operator's revocations (a Provider whose Brands offer no PACT delegation) -------

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke a grant and sign out its Sessions (blocking); True if it was live."""
        now = self._clock()
        revoked = bool(self.store.revoke_grant(grant_id, now=now))
        if revoked:
            self.store.sign_out_sessions(grant_id=grant_id, now=now)
        return revoked

    def revoke_account(self, account: str, *, brand_id: str | None = None) -> list[str]:
        """Revoke every live grant of an account and sign out their Sessions (blocking)."""
        now = self._clock()
        revoked = self.store.revoke_account_grants(account, now=now, brand_id=brand_id)
        for grant_id in revoked:
            self.store.sign_out_sessions(grant_id=grant_id, now=now)
        return list(revoked)

    # -- the token endpoint (§4.2, §4.3, §4.8) -------------------------------------------------

    def _form(self) -> SubFlow:
        body = yield NeedBody(FORM_LIMIT)
        if body is None:
            raise PoppyError(413, "request_too_large", "the form is too large")
        return parse_form(body)

    def _client(self, brand: PoppyBrand, form: Mapping[str, str]) -> SubFlow:
        """The verified client assertion of `form`, from an admitted agent."""
        claimed = form.get("client_id")
        if claimed and not brand.config.admits(claimed):
            # Refused before any fetch: an agent not admitted gets nothing fetched for it.
            raise PoppyError(401, "invalid_client", "this agent is not admitted")
        client: VerifiedAssertion = yield NeedKeys(partial(brand.verifier.verify_client, form))
        if not brand.config.admits(client.client_id):
            raise PoppyError(401, "invalid_client", "this agent is not admitted")
        return client

    def _token(self, brand: PoppyBrand, request: Request) -> Flow:
        form = yield from self._form()
        client = yield from self._client(brand, form)
        now = self._clock()
        proofs = [value for name, value in request.headers if name == "dpop"]
        try:
            # The public URL of the endpoint, rebuilt from base_url (never from Host).
            proof = check_dpop_proof(
                proofs,
                method=request.method,
                url=brand.company.token_endpoint,
                now=now,
                allowed_algs=frozenset(brand.company.dpop_signing_algs),
            )
        except DpopError as exc:
            raise dpop_refusal(exc, token_endpoint=True) from exc
        grant = parse_token_request(form)
        if grant.grant_type == JWT_BEARER_GRANT:
            assert grant.assertion is not None
            return (
                yield from self._session_grant(
                    brand, client, grant.assertion, grant.session_id, proof
                )
            )
        if grant.grant_type == DEVICE_CODE_GRANT and brand.sign_in is not None:
            assert grant.device_code is not None
            assert grant.session_id is not None
            return (
                yield from self._device_grant(
                    brand, brand.sign_in, client, grant.device_code, grant.session_id, proof
                )
            )
        if grant.grant_type == REFRESH_TOKEN_GRANT:
            assert grant.refresh_token is not None
            assert grant.session_id is not None
            return (
                yield from self._account_grant(
                    brand, client, grant.refresh_token, grant.session_id, grant.scope, proof
                )
            )
        raise PoppyError(400, "unsupported_grant_type", "not offered by this Company")

    def _admit(self, client_id: str, user_id: str) -> SubFlow:
        """`429 rate_limited` with `Retry-After` when the agent's user is over the token
        endpoint's limit (PAP-4.3-18)."""
        wait = yield from self._token_limiter.admit(client_id, user_id, self._clock())
        if wait is not None:
            raise PoppyError(
                429,
                "rate_limited",
                "too many token requests",
                headers=(("Retry-After", str(wait)),),
            )

    def _spend(self, proof: DpopProof) -> SubFlow:
        """Mark the proof's `jti` used, in the store (PAP-4.3-06): last of the checks."""
        try:
            yield store(spend_dpop_proof, proof=proof, replay=self._dpop_replay, now=self._clock())
        except DpopError as exc:
            raise dpop_refusal(exc, token_endpoint=True) from exc

    def _session_grant(
        self,
        brand: PoppyBrand,
        client: VerifiedAssertion,
        assertion: str,
        session_id: str | None,
        proof: DpopProof,
    ) -> Flow:
        """Start a signed-out Session, or renew one (§4.2): a new Session Token bound to the
        proof's key; a renewed Session's old token stops working."""
        verify = partial(brand.verifier.verify_session, assertion, client_id=client.client_id)
        session_assertion: VerifiedAssertion = yield NeedKeys(verify)
        yield from self._admit(client.client_id, session_assertion.subject)
        yield from self._spend(proof)
        token = SESSION_TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = self._clock()
        expires_in = int(brand.config.session_seconds)
        values = {
            "brand_id": brand.brand_id,
            "client_id": client.client_id,
            "user_id": session_assertion.subject,
            "jkt": proof.thumbprint,
            "token_hash": token_hash(token),
            "now": now,
            "expires_at": now + expires_in,
        }
        if session_id is None:
            session_id = SESSION_ID_PREFIX + secrets.token_urlsafe(24)
            yield store(self.store.create_session, session_id=session_id, **values)
            signed_in = False
        else:
            change = yield store(self.store.renew_session, session_id=session_id, **values)
            if change.kind != "changed":
                raise PoppyError(400, "invalid_session", "not this agent's and user's Session")
            signed_in = change.session.signed_in
        return json_response(
            {
                "access_token": token,
                "token_type": "DPoP",
                "expires_in": expires_in,
                "scope": "",
                "session_id": session_id,
                "signed_in": signed_in,
            },
            extra=NO_STORE,
        )

    def _account_grant(
        self,
        brand: PoppyBrand,
        client: VerifiedAssertion,
        account_token: str,
        session_id: str,
        scope: str | None,
        proof: DpopProof,
    ) -> Flow:
        """Sign a Session in with an Account Token (§4.8), rotating it: the Session must be
        this agent's and this User ID's (PAP-4.8-03) and never signed in to another account
        (PAP-4.8-04), checked before the token is spent so a refusal costs the agent nothing;
        a narrower `scope` may be asked, never a wider one (PAP-4.4-02)."""
        yield from self._spend(proof)
        presented = token_hash(account_token)
        token = yield store(self.store.account_token, token_hash=presented)
        if token is None or (token.brand_id, token.client_id) != (
            brand.brand_id,
            client.client_id,
        ):
            # Unknown, or another agent's or Brand's (PAP-4.8-01/02): alike, never spent.
            raise PoppyError(400, "invalid_grant", "not an Account Token of this agent")
        yield from self._admit(client.client_id, token.user_id)
        granted = yield store(self.store.get_grant, grant_id=token.grant_id)
        session = yield store(self.store.get_session, session_id=session_id)
        kind = decide_session_change(
            session,
            brand_id=brand.brand_id,
            client_id=client.client_id,
            user_id=token.user_id,
            account=None if granted is None else granted.account,
        )
        if kind != "changed":
            raise PoppyError(400, kind, "this Session cannot be signed in with this token")
        requested = parse_scope(scope) if scope is not None else None
        now = self._clock()
        new_account_token = ACCOUNT_TOKEN_PREFIX + secrets.token_urlsafe(32)
        rotation = yield store(
            self.store.rotate_account_token,
            token_hash=presented,
            new_token_hash=token_hash(new_account_token),
            brand_id=brand.brand_id,
            client_id=client.client_id,
            scopes=requested or None,
            now=now,
            expires_at=now + ACCOUNT_TOKEN_SECONDS,
        )
        if rotation.kind == "invalid_scope":
            raise PoppyError(400, "invalid_scope", "wider than the Account Token's scopes")
        if rotation.kind != "rotated":
            raise PoppyError(400, "invalid_grant", f"the Account Token is {rotation.kind}")
        return (
            yield from self._signed_in(
                brand,
                session_id=session_id,
                client_id=client.client_id,
                user_id=rotation.user_id,
                account=rotation.account,
                grant_id=rotation.grant_id,
                scopes=rotation.scopes,
                jkt=proof.thumbprint,
                account_token=new_account_token,
                now=now,
            )
        )

    def _signed_in(
        self,
        brand: PoppyBrand,
        *,
        session_id: str,
        client_id: str,
        user_id: str,
        account: str,
        grant_id: str,
        scopes: tuple[str, ...],
        jkt: str,
        account_token: str,
        now: float,
    ) -> Flow:
        """Sign the Session in with `scopes` under a fresh Session Token; the value is the
        token response, the Account Token as its `refresh_token` (§4.7)."""
        session_token = SESSION_TOKEN_PREFIX + secrets.token_urlsafe(32)
        expires_in = int(brand.config.session_seconds)
        change = yield store(
            self.store.sign_in_session,
            session_id=session_id,
            brand_id=brand.brand_id,
            client_id=client_id,
            user_id=user_id,
            account=account,
            grant_id=grant_id,
            scopes=scopes,
            jkt=jkt,
            token_hash=token_hash(session_token),
            now=now,
            expires_at=now + expires_in,
        )
        if change.kind != "changed":
            # Only a concurrent sign-in of this Session to another account gets here.
            raise PoppyError(400, change.kind, "the Session changed meanwhile")
        return json_response(
            {
                "access_token": session_token,
                "token_type": "DPoP",
                "expires_in": expires_in,
                "scope": " ".join(scopes),
                "session_id": session_id,
                "signed_in": True,
                "refresh_token": account_token,
            },
            extra=NO_STORE,
        )

    # -- Device Sign-In (§4.6, RFC 8628) -------------------------------------------------------

    def _device(self, brand: PoppyBrand) -> Flow:
        """A device code and the consent link for the requested scopes (RFC 8628 §3.2).

        The agent authenticates with its client assertion only (no DPoP, no Session), so
        the authorization names no user: the poll that collects it binds the User ID of
        the polling Session. Scopes must be among `auth.device.scopes` (`invalid_scope`).
        """
        sign_in = brand.sign_in
        assert sign_in is not None
        form = yield from self._form()
        client = yield from self._client(brand, form)
        wait = yield from self._device_limiter.admit(client.client_id, "", self._clock())
        if wait is not None:
            raise PoppyError(
                429,
                "rate_limited",
                "too many device authorization requests",
                headers=(("Retry-After", str(wait)),),
            )
        requested = parse_scope(form.get("scope"))
        if not requested or any(scope not in sign_in.delegation.scopes for scope in requested):
            raise PoppyError(400, "invalid_scope", "ask for scopes of auth.device.scopes")
        device_code = new_secret("dc_")
        now = self._clock()
        for _ in range(5):
            user_code = new_user_code()
            try:
                yield store(
                    self.store.create_device_authorization,
                    device_code_hash=secret_hash(device_code),
                    user_code=user_code,
                    brand_id=brand.brand_id,
                    client_id=client.client_id,
                    pa_sub=None,
                    scopes=requested,
                    now=now,
                    expires_at=now + DEVICE_CODE_LIFETIME,
                    interval=float(sign_in.delegation.interval),
                )
                break
            except UserCodeTaken:
                continue
        else:  # pragma: no cover - 5 collisions in 2.6e10 codes
            raise PoppyError(503, "temporarily_unavailable", "no free user code")
        link, complete = verification_uris(sign_in.consent_url, sign_in.delegation, user_code)
        return json_response(
            {
                "device_code": device_code,
                "user_code": user_code,
                "verification_uri": link,
                "verification_uri_complete": complete,
                "expires_in": DEVICE_CODE_LIFETIME,
                "interval": sign_in.delegation.interval,
            },
            extra=NO_STORE,
        )

    def _device_grant(
        self,
        brand: PoppyBrand,
        sign_in: DeviceSignIn,
        client: VerifiedAssertion,
        device_code: str,
        session_id: str,
        proof: DpopProof,
    ) -> Flow:
        """The device_code grant: collect the person's approval for the polling Session.

        The Session must be this agent's (`invalid_session`); its User ID is the one the
        authorization binds, and its grant is written by the same store operation. A
        Session ever signed in to another account than the approver's is
        `account_mismatch` (PAP-4.8-04). The Session is signed in with exactly the scopes
        the person approved (PAP-4.4-02) and the first Account Token is issued.
        """
        session = yield store(self.store.get_session, session_id=session_id)
        if session is None or (session.brand_id, session.client_id) != (
            brand.brand_id,
            client.client_id,
        ):
            raise PoppyError(400, "invalid_session", "not a Session of this agent")
        yield from self._admit(client.client_id, session.user_id)
        yield from self._spend(proof)
        now = self._clock()
        poll: Poll = yield store(
            self.store.poll_device_code,
            device_code_hash=secret_hash(device_code),
            client_id=client.client_id,
            brand_id=brand.brand_id,
            pa_sub=session.user_id,
            now=now,
            new_grant_id=f"a2agrant_{int(now * 1000):012x}{secrets.token_hex(8)}",
            grant_expires_at=now + sign_in.delegation.grant_lifetime,
            session_account=session.ever_account,
        )
        if poll.kind in _POLL_ERRORS:
            error, detail = _POLL_ERRORS[poll.kind]
            raise PoppyError(400, error, detail)
        authorization: DeviceAuthorization | None = poll.authorization
        assert authorization is not None
        assert authorization.grant_id is not None
        assert authorization.account is not None
        grant: Grant | None = yield store(self.store.get_grant, grant_id=authorization.grant_id)
        if grant is None or not grant.is_live(now):
            # Revoked between the approval and this poll: nothing is issued for it.
            raise PoppyError(400, "invalid_grant", "the sign-in was revoked")
        scopes = authorization.granted_scopes
        account_token = ACCOUNT_TOKEN_PREFIX + secrets.token_urlsafe(32)
        yield store(
            self.store.issue_account_token,
            token_hash=token_hash(account_token),
            grant_id=grant.grant_id,
            brand_id=brand.brand_id,
            client_id=client.client_id,
            scopes=scopes,
            now=now,
            expires_at=now + ACCOUNT_TOKEN_SECONDS,
        )
        answer = yield from self._signed_in(
            brand,
            session_id=session_id,
            client_id=client.client_id,
            user_id=session.user_id,
            account=authorization.account,
            grant_id=grant.grant_id,
            scopes=scopes,
            jkt=proof.thumbprint,
            account_token=account_token,
            now=now,
        )
        # The person approved on the consent page; the grant exists from this poll on.
        self._audit.grant("agent.delegation_approved", grant, scopes=scopes)
        return answer

    # -- the revocation endpoint (§4.9) ------------------------------------------------------

    def _revoke(self, brand: PoppyBrand) -> Flow:
        """Sign-out: revoking an Account Token ends its sign-in (its grant: every token of
        it, before or after rotation) and signs out every Session signed in with it; those
        Sessions go on signed out (§4.9). Any other token, or another agent's, is answered
        alike (RFC 7009 §2.2: no oracle)."""
        form = yield from self._form()
        client = yield from self._client(brand, form)
        presented = form.get("token")
        if not presented:
            raise PoppyError(400, "invalid_request", "token is required")
        token = yield store(self.store.account_token, token_hash=token_hash(presented))
        if token is not None and (token.brand_id, token.client_id) == (
            brand.brand_id,
            client.client_id,
        ):
            now = self._clock()
            yield store(self.store.revoke_grant, grant_id=token.grant_id, now=now)
            yield store(self.store.sign_out_sessions, grant_id=token.grant_id, now=now)
        return json_response({}, extra=NO_STORE)


__all__ = [
    "ACCOUNT_TOKEN_PREFIX",
    "ACCOUNT_TOKEN_SECONDS",
    "ASSERTION_NAMESPACE",
    "CONVERSATIONS_SEGMENT",
    "DEVICE_RATE_LIMIT",
    "DPOP_NAMESPACE",
    "ISSUER_SEGMENT",
    "METADATA_PREFIX",
    "SESSION_ID_PREFIX",
    "SESSION_TOKEN_PREFIX",
    "TOKEN_RATE_LIMIT",
    "DeviceSignIn",
    "PoppyBrand",
    "PoppyCaller",
    "PoppyOperation",
    "PoppyRoute",
    "PoppyServer",
    "issuer_url",
    "poppy_companies",
    "token_hash",
]
