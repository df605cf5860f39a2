"""The PACT Delegated profile on the Provider side (spec §5; pact-provider.md §5).

One `AuthorizationServer` per Provider serves every Brand that offers delegation: RFC 8628
device authorization and token endpoints (the personal agent authenticates each call with its
PACT JWT), RFC 8414 metadata, the signing keys' JWKS, the consent pages, the check of
`X-A2A-User-Delegation` on agent requests, and step-up tasks. Like the A2A routes, each
operation is a generator sub-flow that yields store calls to the Provider's driver.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from attrs import frozen

from pactmw.core.encoding import is_storable_text, json_dumps
from pactmw.core.errors import JoseError, KeyUnavailable, RequestRefused
from pactmw.core.http import Request, Response
from pactmw.core.jose import parse_compact, sign_compact, verify_with_any
from pactmw.core.keys import JwksCache
from pactmw.core.tokencache import VerifiedTokenCache, token_key
from pactmw.protocols.delegation import (
    DELEGATION_ALGORITHMS,
    Delegation,
    DelegationRejected,
    SigningKeys,
    authorization_server_issuer,
    mint_access_token,
    verify_access_token,
)
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.a2a import ok
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.card import interface_url
from pactmw.provider.consent_pages import ConsentView
from pactmw.provider.flow import Flow, NeedKeys, SubFlow, store
from pactmw.provider.ratelimit import RateLimit, RateLimiter
from pactmw.store.base import Approval, DeviceAuthorization, Grant, Store, UserCodeTaken

logger = logging.getLogger("pactmw.delegation")
audit_logger = logging.getLogger("pactmw.audit")

DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"  # no vowels, no look-alikes (reference)
DEVICE_CODE_LIFETIME = 600
CONSENT_SESSION_TYP = "pact-consent+jwt"
CONSENT_SESSION_LIFETIME = 600
ASSERTION_MAX_AGE = 300  # spec §5.3: the Brand's assertion is at most 5 minutes old
ASSERTION_SKEW = 30
FORM_LIMIT = 64 * 1024
_NO_STORE = (("Cache-Control", "no-store"), ("Pragma", "no-cache"))
#: Headers of every consent page: never framed, cached, or leaking its URL (it holds a code).
PAGE_HEADERS = (
    ("Content-Type", "text/html; charset=utf-8"),
    ("X-Frame-Options", "DENY"),
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'",
    ),
    ("Cache-Control", "no-store"),
    # same-origin, not no-referrer: under no-referrer browsers send `Origin: null` on the
    # consent form's POST (Fetch spec), which the decision's Origin check must refuse. The
    # URL, which holds the user code, still never reaches another origin.
    ("Referrer-Policy", "same-origin"),
    ("X-Content-Type-Options", "nosniff"),
)


@frozen
class AuditEvent:
    """`agent.delegation_approved`, `agent.delegation_denied` or `agent.grant_revoked`."""

    name: str
    brand_id: str
    issuer: str
    account: str | None
    grant_id: str | None = None
    scopes: tuple[str, ...] = ()
    reason: str = ""


AuditHook = Callable[[AuditEvent], None]


@frozen
class SignedInUser:
    """The host app's signed-in user, as an adapter reports it (same-app consent)."""

    account: str  # the id the Brand's other channels use for this user
    label: str  # what to show ("signed in as ..."): an email or a username


class OAuthError(Exception):
    """An RFC 6749 §5.2 / RFC 8628 error, rendered as its JSON body."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status

    def response(self) -> Response:
        body = json_dumps({"error": self.error, "error_description": self.description})
        return Response(
            status=self.status,
            headers=(
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                *_NO_STORE,
            ),
            body=body,
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def secret_hash(value: str) -> str:
    """How device codes and refresh tokens are stored: base64url(SHA-256), never the value."""
    return _b64(hashlib.sha256(value.encode("utf-8")).digest())


def new_user_code() -> str:
    """`XXXX-XXXX` from `BCDFGHJKLMNPQRSTVWXZ` (20^8 ≈ 2.6e10 codes)."""
    letters = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(8))
    return f"{letters[:4]}-{letters[4:]}"


def normalize_user_code(text: str) -> str | None:
    """Read a typed code generously (case, spaces, dashes); None when it cannot be one."""
    letters = "".join(ch for ch in text.upper() if ch.isalnum())
    if len(letters) != 8 or any(ch not in USER_CODE_ALPHABET for ch in letters):
        return None
    return f"{letters[:4]}-{letters[4:]}"


def _json(body: Any, *, status: int = 200, extra: tuple[tuple[str, str], ...] = ()) -> Response:
    data = json_dumps(body)
    return Response(
        status=status,
        headers=(("Content-Type", "application/json"), ("Content-Length", str(len(data))), *extra),
        body=data,
    )


def _page(html: str, status: int = 200) -> Response:
    body = html.encode("utf-8")
    return Response(
        status=status, headers=(*PAGE_HEADERS, ("Content-Length", str(len(body)))), body=body
    )


def _redirect(location: str) -> Response:
    return Response(
        status=303,
        headers=(("Location", location), ("Content-Length", "0"), ("Cache-Control", "no-store")),
    )


def parse_form(body: bytes) -> dict[str, list[str]]:
    """An `application/x-www-form-urlencoded` body; `OAuthError(invalid_request)` if it is not."""
    try:
        return parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=100)
    except (UnicodeDecodeError, ValueError) as exc:
        raise OAuthError("invalid_request", "the body is not a form") from exc


def _one(form: Mapping[str, list[str]], name: str) -> str:
    values = form.get(name, [])
    if len(values) != 1 or not values[0] or not is_storable_text(values[0]):
        raise OAuthError("invalid_request", f"{name} is required, once")
    return values[0]


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class AuthorizationServer:
    """The Delegated profile for every Brand of a Provider that configures `delegation`.

    `agent_name(issuer)` gives the display name of a registered personal agent (for consent).
    """

    def __init__(
        self,
        *,
        base_url: str,
        store: Store,
        keys: SigningKeys,
        clock: Callable[[], float],
        agent_name: Callable[[str], str],
        brand_keys: JwksCache | None = None,
        consent_rate_limit: RateLimit | None = None,
        audit: AuditHook | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.store = store
        self.keys = keys
        self._clock = clock
        self._agent_name = agent_name
        self.brand_keys = brand_keys or JwksCache()
        # Per client address: user-code guessing and form floods hit this long before 20^8.
        self.consent_limiter = RateLimiter(
            consent_rate_limit or RateLimit(per_agent=30, window=60.0)
        )
        self._audit = audit
        #: Verified delegation tokens (an agent reuses one for up to an hour): a hit skips the
        #: signature check only; client, expiry and the live grant are checked every time.
        self.token_cache: VerifiedTokenCache[Delegation] = VerifiedTokenCache(max_age=3600)

    # -- URLs and documents ----------------------------------------------------------------

    def interface(self, brand: Brand) -> str:
        return interface_url(self.base_url, brand.id)

    def url(self, brand: Brand, path: str) -> str:
        """An absolute URL under the Brand's authorization server (`{interface}/oauth/...`)."""
        return f"{self.interface(brand)}/oauth/{path}"

    def card_scheme(self, brand: Brand, config: DelegationConfig) -> dict[str, Any]:
        """The card's `userDelegation` security scheme (spec §5.1)."""
        return {
            "oauth2SecurityScheme": {
                "flows": {
                    "deviceCode": {
                        "deviceAuthorizationUrl": self.url(brand, "device_authorization"),
                        "tokenUrl": self.url(brand, "token"),
                        "scopes": dict(config.scopes),
                    }
                },
                "oauth2MetadataUrl": self.url(brand, ".well-known/oauth-authorization-server"),
            }
        }

    def metadata(self, brand: Brand, config: DelegationConfig) -> Response:
        """RFC 8414 metadata (pact-provider.md §5.4)."""
        return _json(
            {
                "issuer": authorization_server_issuer(self.interface(brand)),
                "device_authorization_endpoint": self.url(brand, "device_authorization"),
                "token_endpoint": self.url(brand, "token"),
                "jwks_uri": self.url(brand, "jwks.json"),
                "scopes_supported": list(config.scopes),
                "grant_types_supported": [DEVICE_CODE_GRANT, "refresh_token"],
                "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            },
            extra=(("Access-Control-Allow-Origin", "*"), ("Cache-Control", "public, max-age=300")),
        )

    def jwks(self) -> Response:
        """The keys that sign delegation tokens and receipts."""
        return _json(
            self.keys.jwks(),
            extra=(("Access-Control-Allow-Origin", "*"), ("Cache-Control", "public, max-age=300")),
        )

    # -- RFC 8628 endpoints (the personal agent, authenticated by its PACT JWT) -----------------

    def _client(self, form: Mapping[str, list[str]], caller: PersonalAgent) -> None:
        if form.get("client_id") != [caller.issuer]:
            # 401, not 400: the reference client reads 401 as a transport failure (§5.1).
            raise OAuthError("invalid_client", "client_id must equal the JWT's iss", 401)

    def _verification_uris(
        self, brand: Brand, config: DelegationConfig, code: str
    ) -> tuple[str, str]:
        consent = self.url(brand, "consent")
        complete = f"{consent}?{urlencode({'user_code': code})}"
        if config.mode == "brand":
            # The Brand's login comes first and returns the person to the consent page.
            login = config.login_url
            joiner = "&" if "?" in login else "?"
            return (
                f"{login}{joiner}{urlencode({'return_to': consent})}",
                f"{login}{joiner}{urlencode({'return_to': complete})}",
            )
        return consent, complete

    def _authorize(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, scopes: tuple[str, ...]
    ) -> SubFlow:
        """Create a device authorization; the value is the RFC 8628 response document."""
        device_code = "dc_" + _b64(secrets.token_bytes(32))
        now = self._clock()
        for _ in range(5):
            user_code = new_user_code()
            try:
                yield store(
                    self.store.create_device_authorization,
                    device_code_hash=secret_hash(device_code),
                    user_code=user_code,
                    brand_id=brand.id,
                    client_id=caller.issuer,
                    pa_sub=caller.sub,
                    scopes=scopes,
                    now=now,
                    expires_at=now + DEVICE_CODE_LIFETIME,
                    interval=float(config.interval),
                )
                break
            except UserCodeTaken:
                continue
        else:  # pragma: no cover - 5 collisions in 2.6e10 codes
            raise OAuthError("temporarily_unavailable", "try again", 503)
        verification_uri, complete = self._verification_uris(brand, config, user_code)
        return {
            "device_code": device_code,
            "user_code": user_code,
            "verification_uri": verification_uri,
            "verification_uri_complete": complete,
            "expires_in": DEVICE_CODE_LIFETIME,
            "interval": config.interval,
        }

    def device_authorization(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, body: bytes
    ) -> Flow:
        form = parse_form(body)
        self._client(form, caller)
        requested = " ".join(form.get("scope", [])).split()
        if not requested or any(scope not in config.scopes for scope in requested):
            raise OAuthError("invalid_scope", "request one or more scopes listed on the card")
        document = yield from self._authorize(
            brand, config, caller, tuple(dict.fromkeys(requested))
        )
        return _json(document, extra=_NO_STORE)

    def token(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, body: bytes
    ) -> Flow:
        form = parse_form(body)
        self._client(form, caller)
        grant_type = _one(form, "grant_type")
        if grant_type == DEVICE_CODE_GRANT:
            return (
                yield from self._device_code_grant(brand, config, caller, _one(form, "device_code"))
            )
        if grant_type == "refresh_token":
            return (
                yield from self._refresh_grant(brand, config, caller, _one(form, "refresh_token"))
            )
        raise OAuthError("unsupported_grant_type", "use the device_code or refresh_token grant")

    def _device_code_grant(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, device_code: str
    ) -> Flow:
        poll = yield store(
            self.store.poll_device_code,
            device_code_hash=secret_hash(device_code),
            client_id=caller.issuer,
            brand_id=brand.id,
            pa_sub=caller.sub,  # only the agent user who asked may collect the tokens
            now=self._clock(),
        )
        errors = {
            "unknown": ("invalid_grant", "Unknown device_code"),
            "expired": ("expired_token", "the device code has expired"),
            "denied": ("access_denied", "the user denied the request"),
            "consumed": ("invalid_grant", "the device code was already used"),
            "slow_down": ("slow_down", f"poll at most every {config.interval} s"),
            "pending": ("authorization_pending", "the user has not decided yet"),
        }
        if poll.kind in errors:
            raise OAuthError(*errors[poll.kind])
        authorization: DeviceAuthorization = poll.authorization
        assert authorization.grant_id is not None
        grant: Grant | None = yield store(self.store.get_grant, grant_id=authorization.grant_id)
        if grant is None or not grant.is_live(self._clock()):
            # Revoked (or expired) between the approval and this poll: issue nothing for it.
            raise OAuthError("invalid_grant", "the grant was revoked")
        return (yield from self._tokens(brand, config, grant))

    def _refresh_grant(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, refresh_token: str
    ) -> Flow:
        new_refresh = "rt_" + _b64(secrets.token_bytes(32))
        now = self._clock()
        rotation = yield store(
            self.store.rotate_refresh_token,
            token_hash=secret_hash(refresh_token),
            new_token_hash=secret_hash(new_refresh),
            client_id=caller.issuer,
            brand_id=brand.id,
            pa_sub=caller.sub,  # another user of the same agent gets `unknown`, burns nothing
            now=now,
            expires_at=now + config.grant_lifetime,
        )
        if rotation.kind == "reused" and rotation.grant is not None:
            # RFC 9700 §4.14: a spent refresh token came back, so it may be stolen; the whole
            # grant is revoked (the store did it atomically) and the user must consent again.
            self._emit("agent.grant_revoked", rotation.grant, reason="refresh_token_reuse")
        if rotation.kind != "rotated":
            raise OAuthError("invalid_grant", "the refresh token is not valid")
        return self._token_response(brand, rotation.grant, new_refresh)

    def _tokens(self, brand: Brand, config: DelegationConfig, grant: Grant) -> Flow:
        refresh = "rt_" + _b64(secrets.token_bytes(32))
        yield store(
            self.store.issue_refresh_token,
            token_hash=secret_hash(refresh),
            grant_id=grant.grant_id,
            client_id=grant.client_id,
            brand_id=brand.id,
            now=self._clock(),
            expires_at=grant.expires_at,
        )
        return self._token_response(brand, grant, refresh)

    def _token_response(self, brand: Brand, grant: Grant, refresh: str) -> Response:
        now = self._clock()
        lifetime = max(1, min(3600, int(grant.expires_at - now)))
        access = mint_access_token(
            key=self.keys.signer,
            interface_url=self.interface(brand),
            account=grant.account,
            client_id=grant.client_id,
            scopes=grant.scopes,
            grant_id=grant.grant_id,
            now=now,
            lifetime=lifetime,
        )
        return _json(
            {
                "token_type": "Bearer",
                "access_token": access,
                "refresh_token": refresh,
                "expires_in": lifetime,
                "scope": " ".join(grant.scopes),
            },
            extra=_NO_STORE,
        )

    # -- delegation tokens on agent requests (spec §5.5) -----------------------------------------

    def verify_delegation(self, brand: Brand, caller: PersonalAgent, header: str | None) -> SubFlow:
        """Check `X-A2A-User-Delegation` after the PACT JWT; the flow's value is a `Delegation`.

        Raises `DelegationRejected` (401, `error="invalid_token"`) for any failure, including a
        revoked or expired grant and a token presented by another user of the same agent.
        """
        if brand.delegation is None:
            raise DelegationRejected("not_offered", "this Brand offers no delegation")
        now = self._clock()
        key = token_key(f"{brand.id}\n{header}")
        delegation = self.token_cache.get(key, now)
        if delegation is None:
            delegation = verify_access_token(
                header,
                keys=self.keys.public,
                interface_url=self.interface(brand),
                client_id=caller.issuer,
                now=now,
            )
            self.token_cache.put(key, delegation, expires_at=delegation.claims["exp"], now=now)
        elif delegation.client_id != caller.issuer:
            # A cached token skips only its signature check: every other check runs again.
            raise DelegationRejected("wrong_client")
        grant: Grant | None = yield store(self.store.get_grant, grant_id=delegation.grant_id)
        if (
            grant is None
            or grant.revoked_at is not None
            or grant.expires_at <= self._clock()
            or grant.brand_id != brand.id
            or grant.client_id != caller.issuer
            or grant.account != delegation.account
            or grant.pa_sub != caller.sub
        ):
            raise DelegationRejected("grant_not_live", "the grant is revoked, expired or foreign")
        return delegation

    def step_up(
        self,
        brand: Brand,
        caller: PersonalAgent,
        context_id: str,
        missing: tuple[str, ...],
        message: str,
    ) -> Flow:
        """The `TASK_STATE_AUTH_REQUIRED` task of spec §5.5 with a fresh consent link."""
        config = brand.delegation
        if config is None:
            raise RuntimeError(f"brand {brand.id!r} asked for step-up but offers no delegation")
        document = yield from self._authorize(brand, config, caller, missing)
        return _a2a_task(context_id, message, missing, document["verification_uri_complete"])

    # -- consent (a person in a browser) ----------------------------------------------------------

    def _limit(self, request: Request) -> None:
        if self.consent_limiter.check(request.client or "?", "", self._clock()) is not None:
            raise RequestRefused(429, (("Retry-After", "60"),))

    def _pending(self, brand: Brand, user_code: str) -> SubFlow:
        """The pending, unexpired device authorization of this Brand with `user_code`."""
        found: DeviceAuthorization | None = yield store(
            self.store.device_authorization_by_user_code, user_code=user_code
        )
        if (
            found is None
            or found.brand_id != brand.id
            or found.status != "pending"
            or found.expires_at <= self._clock()
        ):
            raise ConsentRefused("This code is unknown, expired or already used.", 400)
        return found

    def consent(
        self,
        brand: Brand,
        config: DelegationConfig,
        request: Request,
        user: SignedInUser | None,
        body: bytes | None,
    ) -> Flow:
        """GET: code entry or consent (same-app), or off to the Brand's login (brand mode).
        POST (brand mode): the Brand's single-use assertion, then the consent page."""
        self._limit(request)
        consent_url = self.url(brand, "consent")
        if request.method == "POST":
            if config.mode != "brand" or body is None:
                raise ConsentRefused("This page does not accept that.", 405)
            assertion = parse_form(body).get("assertion", [""])
            signed_in = yield from self._assertion(
                brand, config, assertion[0] if len(assertion) == 1 else ""
            )
            user_code = signed_in[1]
            user = signed_in[0]
        else:
            typed = parse_qs(request.query).get("user_code", [""])[0]
            if not typed:
                return _page(config.pages.code_entry(consent_url))
            normalized = normalize_user_code(typed)
            if normalized is None:
                return _page(config.pages.code_entry(consent_url, "That is not a valid code."), 400)
            user_code = normalized
            here = f"{consent_url}?{urlencode({'user_code': user_code})}"
            if config.mode == "brand":
                joiner = "&" if "?" in config.login_url else "?"
                return _redirect(f"{config.login_url}{joiner}{urlencode({'return_to': here})}")
            if user is None:
                joiner = "&" if "?" in config.login_url else "?"
                return _redirect(f"{config.login_url}{joiner}{urlencode({'next': here})}")
        authorization = yield from self._pending(brand, user_code)
        assert user is not None
        if config.skip_consent_if_granted:
            grant: Grant | None = yield store(
                self.store.live_grant,
                brand_id=brand.id,
                account=user.account,
                client_id=authorization.client_id,
                pa_sub=authorization.pa_sub,
                now=self._clock(),
            )
            if grant is not None and set(authorization.scopes) <= set(grant.scopes):
                return (
                    yield from self._approve(
                        brand, config, authorization, user, authorization.scopes
                    )
                )
        session = self._session(brand, user, user_code)
        view = ConsentView(
            brand_name=brand.name,
            agent_name=self._agent_name(authorization.client_id) or authorization.client_id,
            agent_origin=_origin(authorization.client_id),
            signed_in_as=user.label,
            scopes=tuple((s, config.scopes[s]) for s in authorization.scopes if s in config.scopes),
            decision_url=self.url(brand, "consent/decision"),
            session=session,
        )
        return _page(config.pages.consent(view))

    def _session(self, brand: Brand, user: SignedInUser, user_code: str) -> str:
        now = int(self._clock())
        return sign_compact(
            {
                "aud": self.url(brand, "consent/decision"),
                "sub": user.account,
                "label": user.label,
                "user_code": user_code,
                "iat": now,
                "exp": now + CONSENT_SESSION_LIFETIME,
            },
            self.keys.signer,
            typ=CONSENT_SESSION_TYP,
        )

    def _read_session(self, brand: Brand, token: str) -> tuple[SignedInUser, str]:
        try:
            jws = parse_compact(token, allowed_algs=DELEGATION_ALGORITHMS)
            claims = jws.claims()
            if jws.header.get("typ") != CONSENT_SESSION_TYP:
                raise JoseError("bad_typ", "not a consent session")
            if not verify_with_any(jws, self.keys.public.candidates(jws.kid, jws.alg)):
                raise JoseError("bad_signature", "session signature")
        except JoseError as exc:
            raise ConsentRefused("This consent page is no longer valid. Start again.", 400) from exc
        exp, sub, label, code = (claims.get(k) for k in ("exp", "sub", "label", "user_code"))
        if (
            claims.get("aud") != self.url(brand, "consent/decision")
            or not isinstance(exp, int)
            or exp <= self._clock()
            or not all(isinstance(v, str) and v for v in (sub, label, code))
        ):
            raise ConsentRefused("This consent page has expired. Start again.", 400)
        return SignedInUser(account=str(sub), label=str(label)), str(code)

    def _assertion(self, brand: Brand, config: DelegationConfig, assertion: str) -> SubFlow:
        """Verify the Brand's login assertion (spec §5.3); value: (SignedInUser, user_code)."""
        refused = ConsentRefused("The sign-in could not be verified. Sign in again.", 401)
        try:
            jws = parse_compact(assertion, allowed_algs=frozenset({"ES256", "RS256"}))
            claims = jws.claims()
        except JoseError as exc:
            raise refused from exc
        if config.brand_jwks is not None:
            candidates = config.brand_jwks.candidates(jws.kid, jws.alg)
        else:
            uri = config.brand_jwks_uri
            assert uri is not None
            try:
                candidates = yield NeedKeys(lambda: self.brand_keys.get_keys(uri, jws.kid, jws.alg))
            except KeyUnavailable as exc:
                raise refused from exc
        if not verify_with_any(jws, candidates):
            raise refused
        now = self._clock()
        sub, jti, code = claims.get("sub"), claims.get("jti"), claims.get("user_code")
        iat, exp = claims.get("iat"), claims.get("exp")
        label = claims.get("email") or claims.get("name") or sub
        if (
            claims.get("iss") != config.brand_issuer
            or claims.get("aud") != self.url(brand, "consent")
            or not all(
                isinstance(v, str) and v and is_storable_text(v) for v in (sub, jti, code, label)
            )
            or not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in (iat, exp))
        ):
            raise refused
        assert isinstance(iat, (int, float))
        assert isinstance(exp, (int, float))
        if exp <= now or now - iat > ASSERTION_MAX_AGE or iat > now + ASSERTION_SKEW:
            raise ConsentRefused("The sign-in has expired. Sign in again.", 400)
        first_use = yield store(
            self.store.use_once,
            namespace="brand-assertion",
            value=f"{config.brand_issuer}\n{jti}",
            now=now,
            expires_at=now + ASSERTION_MAX_AGE + ASSERTION_SKEW,
        )
        if not first_use:
            raise ConsentRefused("This sign-in was already used. Sign in again.", 400)
        user_code = normalize_user_code(str(code))
        if user_code is None:
            raise ConsentRefused("This code is unknown, expired or already used.", 400)
        return (SignedInUser(account=str(sub), label=str(label)), user_code)

    def decision(
        self,
        brand: Brand,
        config: DelegationConfig,
        request: Request,
        user: SignedInUser | None,
        body: bytes,
    ) -> Flow:
        """Allow or Deny; answers 303 to the result page (`status=approved|denied`)."""
        self._limit(request)
        origin = request.header("origin")
        if origin is not None and origin != _origin(self.base_url):
            # A cross-site form post: the session token already binds the user and the code,
            # this refuses the request before it gets anywhere near them.
            raise ConsentRefused("This request did not come from the consent page.", 403)
        form = parse_form(body)
        sessions = form.get("session", [])
        if len(sessions) != 1:
            raise ConsentRefused("This consent page is no longer valid. Start again.", 400)
        signed_in, user_code = self._read_session(brand, sessions[0])
        if config.mode == "same-app" and (user is None or user.account != signed_in.account):
            raise ConsentRefused("Sign in as the person who was asked, then start again.", 403)
        authorization = yield from self._pending(brand, user_code)
        ticked = set(form.get("scope", []))
        granted = tuple(s for s in authorization.scopes if s in ticked)
        if form.get("decision") != ["allow"] or not granted:
            decided = yield store(
                self.store.decide_device_authorization,
                user_code=user_code,
                approved=False,
                account=signed_in.account,
                granted_scopes=(),
                grant_id=None,
                now=self._clock(),
            )
            if decided is None:
                raise ConsentRefused("This code is unknown, expired or already used.", 400)
            self._emit_for(brand, "agent.delegation_denied", authorization, signed_in.account)
            return _redirect(f"{self.url(brand, 'connected')}?{urlencode({'status': 'denied'})}")
        return (yield from self._approve(brand, config, authorization, signed_in, granted))

    def _approve(
        self,
        brand: Brand,
        config: DelegationConfig,
        authorization: DeviceAuthorization,
        user: SignedInUser,
        granted: tuple[str, ...],
    ) -> Flow:
        now = self._clock()
        # One atomic store operation: the grant is created or widened only if this approval
        # wins the decision (a concurrent Deny, or expiry, leaves every grant untouched).
        approval: Approval | None = yield store(
            self.store.approve_device_authorization,
            user_code=authorization.user_code,
            brand_id=brand.id,
            account=user.account,
            granted_scopes=granted,
            new_grant_id=f"a2agrant_{int(now * 1000):012x}{secrets.token_hex(8)}",
            now=now,
            grant_expires_at=now + config.grant_lifetime,
        )
        if approval is None:
            raise ConsentRefused("This code is unknown, expired or already used.", 400)
        self._emit("agent.delegation_approved", approval.grant, scopes=granted)
        query = urlencode({"status": "approved", "scope": " ".join(granted)})
        return _redirect(f"{self.url(brand, 'connected')}?{query}")

    def result(self, brand: Brand, config: DelegationConfig, request: Request) -> Response:
        query = parse_qs(request.query)
        approved = query.get("status") == ["approved"]
        scopes = tuple(s for s in " ".join(query.get("scope", [])).split() if s in config.scopes)
        return _page(config.pages.result(approved, brand.name, scopes))

    # -- revocation and audit ---------------------------------------------------------------------

    def _emit(
        self, name: str, grant: Grant, *, scopes: Iterable[str] = (), reason: str = ""
    ) -> None:
        self._publish(
            AuditEvent(
                name=name,
                brand_id=grant.brand_id,
                issuer=grant.client_id,
                account=grant.account,
                grant_id=grant.grant_id,
                scopes=tuple(scopes),
                reason=reason,
            )
        )

    def _emit_for(
        self, brand: Brand, name: str, authorization: DeviceAuthorization, account: str
    ) -> None:
        self._publish(
            AuditEvent(
                name=name,
                brand_id=brand.id,
                issuer=authorization.client_id,
                account=account,
                scopes=authorization.scopes,
            )
        )

    def _publish(self, event: AuditEvent) -> None:
        audit_logger.info(
            "%s brand=%s issuer=%s grant=%s %s",
            event.name,
            event.brand_id,
            event.issuer,
            event.grant_id,
            event.reason,
        )
        if self._audit is not None:
            try:
                self._audit(event)
            except Exception:  # an audit sink must never break the flow it observes
                logger.exception("audit hook failed for %s", event.name)

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke one grant now: its tokens fail on their next use (blocking)."""
        grant = self.store.get_grant(grant_id)
        revoked = bool(self.store.revoke_grant(grant_id, now=self._clock()))
        if revoked and grant is not None:
            self._emit("agent.grant_revoked", grant, reason="revoked")
        return revoked

    def revoke_account(
        self, account: str, *, brand_id: str | None = None, reason: str = "revoked"
    ) -> list[str]:
        """Revoke every grant of an account (for example when it is disabled)."""
        revoked = self.store.revoke_account_grants(account, now=self._clock(), brand_id=brand_id)
        for grant_id in revoked:
            grant = self.store.get_grant(grant_id)
            if grant is not None:
                self._emit("agent.grant_revoked", grant, reason=reason)
        return list(revoked)


class ConsentRefused(Exception):
    """A consent page error, rendered as an HTML page with `status`."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def response(self, pages: Any) -> Response:
        return _page(pages.error("That did not work", self.message), self.status)


def _a2a_task(context_id: str, message: str, missing: tuple[str, ...], link: str) -> Response:
    return ok(
        {
            "task": {
                "id": f"t-{uuid.uuid4()}",
                "contextId": context_id,
                "status": {
                    "state": "TASK_STATE_AUTH_REQUIRED",
                    "message": {
                        "messageId": str(uuid.uuid4()),
                        "contextId": context_id,
                        "role": "ROLE_AGENT",
                        "parts": [{"text": message}],
                    },
                },
                "metadata": {
                    "pact.missingScopes": list(missing),
                    "pact.verificationUriComplete": link,
                },
            }
        }
    )


__all__ = [
    "AuditEvent",
    "AuthorizationServer",
    "ConsentRefused",
    "Delegation",
    "OAuthError",
    "SignedInUser",
]
