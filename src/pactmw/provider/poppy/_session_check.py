"""The app's own APIs (§6): a request carrying a Session Token and a DPoP proof, checked
into a `PoppyCaller`, and the grant's "last used" recorded without a write per request."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from attrs import frozen

from pactmw.config import ConfigError
from pactmw.core.dpop import DpopError, check_dpop_proof, spend_dpop_proof
from pactmw.core.encoding import loggable
from pactmw.core.http import Request
from pactmw.core.replay import StoreReplayMemory
from pactmw.protocols.poppy import PoppyError, dpop_refusal, session_credentials
from pactmw.provider.delegated._resource import USE_RECORD_INTERVAL
from pactmw.provider.flow import SubFlow, store
from pactmw.provider.poppy._brands import PoppyBrand
from pactmw.provider.poppy._credentials import token_hash
from pactmw.provider.poppy._operations import IDEMPOTENCY_KEY, WRITE_METHODS
from pactmw.store import GrantUsageStore
from pactmw.store.base import Store

if TYPE_CHECKING:
    from pactmw.provider.brand import Brand

logger = logging.getLogger("pactmw.poppy")

#: Grants whose last recorded use one process remembers (see `SessionCheck._used`).
_USED_MEMO_SIZE = 100_000


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


def session_brand_problem(brands: Iterable[Brand], brand_id: str) -> str | None:
    """Why no Session check or `poppy.json` helper can serve `brand_id`: it is not one of
    `brands` (a typo) or does not enable Poppy, said with the Brands that do; None when it
    does. `check_session_brand` raises it where a check is made, and Flask's and Django's
    views say it at a request where no startup check saw them."""
    by_id = {brand.id: brand for brand in brands}
    brand = by_id.get(brand_id)
    if brand is not None and brand.poppy is not None:
        return None
    poppy_ids = [known.id for known in by_id.values() if known.poppy is not None]
    with_poppy = ", ".join(repr(known) for known in poppy_ids) or "none"
    if brand is None:
        problem = f"Brand {brand_id!r} is not one of the Provider's brands"
    else:
        problem = f"Brand {brand_id!r} does not enable Poppy (no [brands.{brand_id}.poppy])"
    return f"{problem}; Brands with Poppy: {with_poppy}"


def check_session_brand(brands: Iterable[Brand], brand_id: str, setting: str) -> None:
    """Refuse a Session check or a `poppy.json` helper for `brand_id` when it is not one of
    `brands` (a typo) or does not enable Poppy: no Session Token of it could ever be checked
    and it publishes no document, so each adapter calls this where `setting` (the decorator,
    dependency or helper, as the app wrote it) is built, and the app learns at startup which
    Brands it can name, never from a 500 on each request."""
    problem = session_brand_problem(brands, brand_id)
    if problem is not None:
        raise ConfigError(f"{setting}: {problem}")


class SessionCheck:
    """Checks Session Token requests for every Poppy Brand of a Provider. Thread-safe."""

    def __init__(
        self,
        *,
        brands: Mapping[str, PoppyBrand],
        store: Store,
        clock: Callable[[], float],
        origin: str,
        base_url: str,
        dpop_replay: StoreReplayMemory,
    ) -> None:
        self._brands = brands
        self._store = store
        self._clock = clock
        #: The public URLs requests' URLs are rebuilt from (DPoP `htu`), never `Host`: an app
        #: API's path is from the site's root (`origin`), the Provider's own endpoints' from
        #: the root of the app that serves it, which is `base_url` (without its last `/`),
        #: however that app is mounted (a Starlette `Mount`, a WSGI `SCRIPT_NAME`, a proxy).
        self._origin = origin
        self._base_url = base_url
        self._dpop_replay = dpop_replay
        #: When this process last recorded each grant's use for the connected agents page's
        #: "last used": a Session's request reads no grant row, so without this memo every
        #: API request would cost a store write. Cleared wholesale past `_USED_MEMO_SIZE`.
        self._used: dict[str, float] = {}
        self._records_use = isinstance(store, GrantUsageStore)

    def session_flow(
        self, brand_id: str, request: Request, scopes: tuple[str, ...], *, own: bool = False
    ) -> SubFlow:
        """Check a request to one of the Brand's APIs; the value is a `PoppyCaller`. `own`:
        a request to the Provider's own endpoints (feedback, conversations, operations),
        whose path is below `base_url`, not the site's root.

        In order: the credentials (a token in the URL or two `Authorization` headers: `400
        invalid_request`; no `Authorization: DPoP` token: `401 invalid_token`, PAP-4.3-11/12/
        17); the Session Token (unknown, replaced, expired, another Brand's, or an Account
        Token: `401 invalid_token`, PAP-4.8-01); its agent (one the Brand no longer admits
        or an operator blocked: `401 invalid_token`, one store read); the DPoP proof for
        this method and URL, bound to the token (`ath`) and to its key (`jkt`), spent in the
        store (`401 invalid_dpop_proof`, PAP-4.3-02..07/19); then `scopes`: signed out is `403
        sign_in_required`, a scope not approved `403 insufficient_scope`, both naming the
        scopes to ask for. The Session is read on every request, so a sign-out shows at once
        (PAP-4.9-01). Each refusal is logged at INFO with its reason, never the token.
        """
        try:
            caller: PoppyCaller = yield from self._checked(brand_id, request, scopes, own)
        except PoppyError as exc:
            _log_refusal(exc, brand_id)
            raise
        return caller

    def _checked(
        self, brand_id: str, request: Request, scopes: tuple[str, ...], own: bool
    ) -> SubFlow:
        brand = self._brands[brand_id]
        credentials = session_credentials(request)
        now = self._clock()
        session = yield store(
            self._store.session_for_token, token_hash=token_hash(credentials.token), now=now
        )
        if session is None or session.brand_id != brand_id:
            raise PoppyError(401, "invalid_token", "not a live Session Token of this Brand")
        # A Session lives on while its agent is blocked (or no longer admitted) but serves
        # nothing, as a blocked PACT agent's grants: allowed again, it works again.
        refusal: str | None = yield from brand.refusal(session.client_id)
        if refusal is not None:
            raise PoppyError(401, "invalid_token", refusal)
        try:
            proof = check_dpop_proof(
                credentials.proofs,
                method=request.method,
                url=(self._base_url if own else self._origin) + request.path,
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
        usage: GrantUsageStore = self._store  # type: ignore[assignment]
        yield store(usage.record_grant_use, grant_id=grant_id, now=now, every=USE_RECORD_INTERVAL)


def _log_refusal(exc: PoppyError, brand_id: str) -> None:
    # The answer an agent gets says only `invalid_token`: the operator learns here which
    # mistake it was (a Bearer token, none, an expired Session). Never the token; the reason
    # may quote what the caller sent, so `loggable`, as the assertions' refusals are logged.
    logger.info(
        "poppy session refused: error=%s brand=%s reason=%r",
        exc.error,
        loggable(brand_id),
        loggable(exc.detail),
    )


__all__ = [
    "PoppyCaller",
    "SessionCheck",
    "check_session_brand",
    "session_brand_problem",
]
