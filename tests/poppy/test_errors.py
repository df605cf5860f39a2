"""Poppy error answers: JSON body, `Cache-Control: no-store`, the `DPoP` challenge for token
errors at 401/403, and DPoP refusals answered the token endpoint's way or a resource's."""

from __future__ import annotations

import json

import pytest

from pactmw.core.dpop import DpopError, check_dpop_proof
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.poppy import PoppyError, dpop_refusal, poppy_response
from tests.support.dpop import dpop_proof


def headers(error: PoppyError) -> dict[str, str]:
    return dict(poppy_response(error).headers)


def test_body_and_no_store() -> None:
    response = poppy_response(PoppyError(400, "invalid_grant", "the jti was used before"))
    assert response.status == 400
    assert json.loads(response.body) == {"error": "invalid_grant"}  # the detail is not sent
    found = dict(response.headers)
    assert found["Cache-Control"] == "no-store"
    assert found["Content-Type"] == "application/json"
    assert int(found["Content-Length"]) == len(response.body)
    assert "WWW-Authenticate" not in found


@pytest.mark.parametrize(
    ("error", "challenge"),
    [
        (PoppyError(401, "invalid_token"), 'DPoP error="invalid_token"'),
        (PoppyError(401, "invalid_dpop_proof"), 'DPoP error="invalid_dpop_proof"'),
        (
            PoppyError(403, "insufficient_scope", members={"scope": "orders:write"}),
            'DPoP error="insufficient_scope", scope="orders:write"',
        ),
        (
            PoppyError(403, "sign_in_required", members={"scope": "orders:read orders:write"}),
            'DPoP error="sign_in_required", scope="orders:read orders:write"',
        ),
        (
            PoppyError(403, "extension_required", members={"extension": "operations"}),
            'DPoP error="extension_required", extension="operations"',
        ),
    ],
)
def test_token_errors_are_challenged(error: PoppyError, challenge: str) -> None:
    assert headers(error)["WWW-Authenticate"] == challenge
    body = json.loads(poppy_response(error).body)
    assert body == {"error": error.error, **error.members}


def test_the_challenge_quotes_safely() -> None:
    error = PoppyError(403, "insufficient_scope", members={"scope": 'a"b\\c'})
    assert (
        headers(error)["WWW-Authenticate"] == 'DPoP error="insufficient_scope", scope="a\\"b\\\\c"'
    )


def test_other_errors_and_statuses_are_not_challenged() -> None:
    assert "WWW-Authenticate" not in headers(PoppyError(400, "invalid_dpop_proof"))
    assert "WWW-Authenticate" not in headers(PoppyError(409, "message_id_conflict"))
    assert "WWW-Authenticate" not in headers(PoppyError(401, "invalid_client"))


def test_extra_headers_follow() -> None:
    error = PoppyError(429, "rate_limited", headers=(("Retry-After", "5"),))
    assert headers(error)["Retry-After"] == "5"


def _refusal() -> DpopError:
    proof = dpop_proof(generate_private_jwk("ES256"), "GET", "https://api.example/x", 0)
    with pytest.raises(DpopError) as caught:
        check_dpop_proof(proof, method="POST", url="https://api.example/x", now=0)
    return caught.value


def test_dpop_refusals_at_the_token_endpoint_and_elsewhere() -> None:
    # security.token-request-without-dpop / token-dpop-with-ath: 400, an OAuth error.
    at_token = dpop_refusal(_refusal(), token_endpoint=True)
    assert (at_token.status, at_token.error) == (400, "invalid_dpop_proof")
    assert "WWW-Authenticate" not in headers(at_token)
    # security.dpop-*: 401 with the DPoP challenge.
    at_api = dpop_refusal(_refusal(), token_endpoint=False)
    assert (at_api.status, at_api.error) == (401, "invalid_dpop_proof")
    assert headers(at_api)["WWW-Authenticate"] == 'DPoP error="invalid_dpop_proof"'


def test_use_dpop_nonce_carries_a_fresh_nonce() -> None:
    error = DpopError("nonce", "the proof must carry the server's nonce", error="use_dpop_nonce")
    refusal = dpop_refusal(error, token_endpoint=False, nonce="n-2")
    assert headers(refusal)["DPoP-Nonce"] == "n-2"
    assert headers(refusal)["WWW-Authenticate"] == 'DPoP error="use_dpop_nonce"'
    assert "DPoP-Nonce" not in headers(dpop_refusal(_refusal(), token_endpoint=False, nonce="n"))
