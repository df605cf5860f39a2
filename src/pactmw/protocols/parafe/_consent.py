"""Consent-token checks, steps 7-16 of parafe-verifier.md §4. Pure: keys come in as values.

Where the reference (§4, a2a-extension 3.3) and the seed text disagree, the reference wins,
because it is what other implementations interoperate with (§12):
- `exp` is checked before `token_type` and the type guards (seed §5 lists type first), so an
  expired non-consent token reports EXPIRED_CONSENT_TOKEN (§12 item 2);
- besides signature, `iss` and `token_type`, `scope`, `permissions`, `session_id` and
  `exclusions` must have their types; a token without `exclusions` is refused (§12 item 1);
- `exp` is not required and `ver` is not checked (§12 item 3); the token's `aud` is not
  compared with our DID, `target_agent_id` is (§12 item 4);
- the JWKS `status` is ignored: any listed ES256 key with the right kid verifies (§12 item 12).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar, overload

from attrs import field, frozen

from pactmw.core.errors import JoseError
from pactmw.core.jose import JWS, HeaderCache, parse_compact, verify_signature
from pactmw.core.jwk import PublicJWK
from pactmw.protocols.parafe import _errors as err
from pactmw.protocols.parafe._ap2_receipts import MandateRef, parse_mandate_refs
from pactmw.protocols.parafe._card import ScopeRequirement
from pactmw.protocols.parafe._constants import CONSENT_ALGORITHMS, CONSENT_ISSUER, MODALITY_RANK
from pactmw.protocols.parafe._jwt import (
    EXPIRED,
    TIME_MESSAGES,
    TIME_OK,
    as_float,
    claims_failure,
    is_number,
    strict_equal,
    time_check,
    whole_seconds,
)

V = TypeVar("V")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    return as_float(value) if is_number(value) else None


def _as_is(value: Any) -> Any:
    return value


class _Claim(Generic[V]):
    """A read-only attribute of `ConsentClaims`: the claim of the same name, through `read`
    (which gets None for an absent claim)."""

    def __init__(self, read: Callable[[Any], V], doc: str | None = None) -> None:
        self._read = read
        self.__doc__ = doc

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> _Claim[V]: ...

    @overload
    def __get__(self, instance: ConsentClaims, owner: type[Any]) -> V: ...

    def __get__(self, instance: ConsentClaims | None, owner: type[Any]) -> _Claim[V] | V:
        if instance is None:
            return self
        return self._read(instance.claims.get(self._name))


@frozen
class ConsentClaims:
    """The claims of a verified consent token.

    `claims` is the verified payload, unchanged (parties, `mandate_refs` and anything a later
    broker adds included). The typed attributes are the ones the checks guaranteed; the
    others read a claim, None when it is absent (or, for the text ones, not a string).
    """

    claims: Mapping[str, Any] = field(repr=False)
    scope: str
    permissions: tuple[Any, ...]
    exclusions: tuple[Any, ...]
    session_id: str

    target_agent_id = _Claim(_text)
    initiator_agent_id = _Claim(_text)
    sub = _Claim(_text)
    aud = _Claim(_text, "The target agent's DID, as the broker wrote it.")
    authorization_modality = _Claim(_text)
    initiator_proof = _Claim(_text)
    jti = _Claim(_text)
    exp = _Claim(_number)
    initiator_parties = _Claim(_as_is)
    target_parties = _Claim(_as_is)
    mandate_refs = _Claim(_as_is)

    @property
    def initiator(self) -> str | None:
        """The initiator's agent id: `sub`, else `initiator_agent_id` (the reference's choice)."""
        value = self.claims.get("sub")
        if value is None:
            value = self.claims.get("initiator_agent_id")
        return value if isinstance(value, str) and value else None

    @property
    def mandates(self) -> tuple[MandateRef, ...]:
        """`mandate_refs` read as `MandateRef`s: the AP2 mandates the broker verified behind
        a `delegated` or `verified` token (spec §5.3); empty for other tokens."""
        return parse_mandate_refs(self.claims.get("mandate_refs"))

    @property
    def jkt(self) -> str | None:
        """`cnf.jkt`: the thumbprint of the initiator key this token is bound to."""
        cnf = self.claims.get("cnf")
        jkt = cnf.get("jkt") if isinstance(cnf, Mapping) else None
        return jkt if isinstance(jkt, str) and jkt else None


def parse_token(token: str, header_cache: HeaderCache | None = None) -> JWS:
    """Steps 7-8: a compact JWS with a JSON header, no `crit`, `alg` ES256."""
    try:
        return parse_compact(token, allowed_algs=CONSENT_ALGORITHMS, header_cache=header_cache)
    except JoseError as exc:
        if exc.code == "alg_not_allowed":
            raise err.invalid_token("the token is not signed with ES256.") from exc
        raise err.invalid_token(f"not a signed token ({exc}).") from exc


def select_key(candidates: tuple[PublicJWK, ...]) -> PublicJWK:
    """Step 9: exactly one key may fit (jose's local key set refuses several)."""
    if not candidates:
        raise err.invalid_token("no broker key matches the token's kid.")
    if len(candidates) > 1:
        raise err.invalid_token("more than one broker key matches the token's kid.")
    return candidates[0]


def check_signature_and_claims(jws: JWS, key: PublicJWK, *, now: float) -> dict[str, Any]:
    """Steps 10-11: the signature, `iss`, then jose's time checks with no clock tolerance."""
    try:
        verify_signature(jws, key)
    except JoseError as exc:
        raise err.invalid_token("signature verification failed.") from exc
    try:
        claims = jws.claims()
    except JoseError as exc:
        # The signature is good; what fails is the payload (jose's check after the signature).
        raise err.invalid_token(claims_failure(exc) + ".") from exc
    if not strict_equal(claims.get("iss"), CONSENT_ISSUER):
        raise err.invalid_token('unexpected "iss" claim value.')
    outcome = time_check(claims, now=whole_seconds(now))
    if outcome == EXPIRED:
        raise err.expired(as_float(claims["exp"]))
    if outcome != TIME_OK:
        raise err.invalid_token(TIME_MESSAGES[outcome] + ".")
    return claims


def check_types(claims: Mapping[str, Any]) -> ConsentClaims:
    """Step 12: the type guards, in the reference's order."""
    if not isinstance(claims.get("scope"), str):
        raise err.invalid_token('Expected "scope" claim to be a string.')
    if not isinstance(claims.get("permissions"), list):
        raise err.invalid_token('Expected "permissions" claim to be an array.')
    if not isinstance(claims.get("session_id"), str):
        raise err.invalid_token('Expected "session_id" claim to be a string.')
    if not strict_equal(claims.get("token_type"), "consent"):
        raise err.invalid_token('Expected token_type "consent".')
    # Since reference 3.0 only `exclusions` counts; the legacy `excluded` is ignored.
    if not isinstance(claims.get("exclusions"), list):
        raise err.invalid_token('Expected "exclusions" claim to be an array.')
    return ConsentClaims(
        claims=MappingProxyType(dict(claims)),
        scope=claims["scope"],
        permissions=tuple(claims["permissions"]),
        exclusions=tuple(claims["exclusions"]),
        session_id=claims["session_id"],
    )


def check_binding(
    consent: ConsentClaims,
    *,
    agent_id: str | None,
    session_id: str | None,
    action: str | None,
    scope_requirements: Mapping[str, ScopeRequirement] | None,
) -> None:
    """Steps 13-16: this agent, this session, this agent's own scopes, this action."""
    if agent_id is not None and not strict_equal(consent.claims.get("target_agent_id"), agent_id):
        raise err.wrong_audience(agent_id, consent.claims.get("target_agent_id"))
    if session_id is not None and consent.session_id != session_id:
        raise err.invalid_token(
            f'token belongs to session "{consent.session_id}", but the message says "{session_id}".'
        )
    if scope_requirements is not None:
        check_scope(consent, scope_requirements)
    if action is not None:
        check_action(consent, action)


def _in(value: Any, items: tuple[Any, ...]) -> bool:
    """JavaScript `items.includes(value)` for parsed JSON (no 1 == true, objects never match)."""
    return any(strict_equal(value, item) for item in items)


def check_scope(consent: ConsentClaims, requirements: Mapping[str, ScopeRequirement]) -> None:
    """Step 15: the token fits one of this agent's declared scopes."""
    scope = requirements.get(consent.scope)
    if scope is None:
        raise err.scope_violation(
            consent.scope,
            requirements.keys(),
            f'Consent token is for scope "{consent.scope}", which this agent does not declare.',
        )
    declared = tuple(scope.permissions)
    outside = [p for p in consent.permissions if not _in(p, declared)]
    if outside:
        raise err.scope_violation(
            outside,
            declared,
            f'Consent token grants permissions outside scope "{consent.scope}".',
        )
    have = consent.claims.get("authorization_modality")
    need = scope.minimum_authorization_modality
    have_rank = MODALITY_RANK.get(have) if isinstance(have, str) else None
    need_rank = MODALITY_RANK.get(need) if isinstance(need, str) else None
    # An unknown value on either side, a missing minimum included, is a violation.
    if have_rank is None or need_rank is None or have_rank < need_rank:
        raise err.scope_violation(
            consent.scope,
            consent.permissions,
            f'Scope "{consent.scope}" requires "{need}" authorization, token has '
            f'"{have if isinstance(have, str) else "unknown"}".',
        )
    if scope.minimum_initiator_proof == "pop" and not strict_equal(
        consent.claims.get("initiator_proof"), "pop"
    ):
        raise err.scope_violation(
            consent.scope,
            consent.permissions,
            f'Scope "{consent.scope}" requires the initiator to have proved it holds its key.',
        )


def check_action(consent: ConsentClaims, action: str) -> None:
    """Step 16: excluded first, then not permitted; both are SCOPE_VIOLATION."""
    if _in(action, consent.exclusions) or not _in(action, consent.permissions):
        raise err.scope_violation(action, consent.permissions)


__all__ = [
    "ConsentClaims",
    "check_action",
    "check_binding",
    "check_scope",
    "check_signature_and_claims",
    "check_types",
    "parse_token",
    "select_key",
]
