"""Handshakes: answering a `handshake_challenge` by completing it with the broker."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from attrs import evolve

from pactmw.core.encoding import loggable
from pactmw.core.errors import FetchError
from pactmw.protocols.parafe import (
    INVALID_CONSENT_TOKEN,
    HandshakeChallenge,
    HandshakeComplete,
    ParafeError,
)
from pactmw.protocols.parafe._broker_api import broker_error
from pactmw.provider.parafe._broker import BrokerClient, sign_challenge

if TYPE_CHECKING:
    from pactmw.provider.parafe._agent import ParafeAgent

logger = logging.getLogger("pactmw.provider.parafe")

#: The broker's handshake completion (the reference SDK's `completeHandshake`).
HANDSHAKE_COMPLETE_PATH = "/handshake/complete"


def answer_handshake(agent: ParafeAgent, challenge: HandshakeChallenge) -> HandshakeComplete:
    """`ParafeAgent.answer_handshake`: never raises. Blocking."""
    config = agent.config

    def answer(status: str, text: str) -> HandshakeComplete:
        return HandshakeComplete(
            handshake_id=challenge.handshake_id, status=status, error_message=text
        )

    if challenge.broker_url.rstrip("/") != agent.keys.broker_url:
        return answer("rejected", "This agent completes handshakes only with its own broker.")
    if config.scope_requirements and challenge.requested_scope not in config.scope_requirements:
        return answer("rejected", "This agent declares no such scope.")
    if config.handshake is None and (config.signing_key is None or not config.credential):
        return answer(
            "error",
            "This agent cannot complete Parafé handshakes (it has no broker credential).",
        )
    try:
        if config.handshake is not None:
            complete = config.handshake(challenge, agent)
        else:
            complete = agent.complete_handshake(challenge)
    except Exception as exc:
        logger.warning("Parafé handshake completion failed: %s", type(exc).__name__)
        return answer("error", "The handshake could not be completed with the broker.")
    if not isinstance(complete, HandshakeComplete) or (
        complete.handshake_id != challenge.handshake_id
    ):
        logger.error("the Parafé handshake completer returned something else")
        return answer("error", "The handshake could not be completed with the broker.")
    if complete.status == "authenticated":
        token = complete.consent_token
        try:
            if token is None:
                raise ParafeError(INVALID_CONSENT_TOKEN, "no consent token")
            claims = agent.verifier.verify_token(token, session_id=complete.session_id)
            if claims.initiator_agent_id != challenge.initiator_agent_id or (
                claims.scope != challenge.requested_scope
            ):
                raise ParafeError(INVALID_CONSENT_TOKEN, "another handshake's token")
        except ParafeError as exc:
            if exc.cause is not None:
                # The broker's keys could not be fetched: the token could not be checked,
                # which says nothing against it, so neither line says it does not verify.
                logger.warning(
                    "the broker's consent token could not be verified: %s (%s)",
                    loggable(exc.code),
                    loggable(exc.cause),
                )
                return answer(
                    "error",
                    "The broker's consent token could not be verified (its keys could not "
                    "be fetched); try again later.",
                )
            logger.warning("the broker's consent token does not verify: %s", loggable(exc.code))
            return answer("error", "The broker's consent token does not verify.")
        if complete.session_id is None:
            complete = evolve(complete, session_id=claims.session_id)
    return complete


def complete_handshake(broker: BrokerClient, challenge: HandshakeChallenge) -> HandshakeComplete:
    """`ParafeAgent.complete_handshake` through `broker`. Blocking."""
    key = broker.key
    credential = broker.credential
    if key is None or not credential:
        raise RuntimeError("completing a handshake needs the signing_key and the credential")
    handshake_id = challenge.handshake_id

    def failed(status: str, code: str, text: str) -> HandshakeComplete:
        return HandshakeComplete(
            handshake_id=handshake_id, status=status, error_code=code, error_message=text
        )

    body = {
        "handshake_id": handshake_id,
        "target_credential": credential,
        "challenge_response": sign_challenge(key, challenge.challenge),
    }
    try:
        # Tried again after a network failure, a 429 or a 5xx (`BrokerRetry`): a completion
        # that went through cannot complete twice.
        reply = broker.send(HANDSHAKE_COMPLETE_PATH, body, idempotent=True)
    except FetchError as exc:
        logger.warning("Parafé handshake: broker unreachable (%s)", type(exc).__name__)
        return failed("error", "network_error", "The Parafé broker could not be reached.")
    status, answer = reply.status, reply.body
    if 400 <= status < 500:
        code, text = broker_error(answer)
        # The broker's code is its text: escaped, so it cannot forge a log line.
        logger.info("Parafé handshake refused by the broker: %s %s", status, loggable(code))
        return failed("rejected", code, text)
    if status >= 500 or not 200 <= status < 300:
        code, _ = broker_error(answer)
        logger.warning("Parafé handshake: the broker answered %s %s", status, loggable(code))
        return failed("error", code, "The Parafé broker could not complete the handshake.")
    if not isinstance(answer, Mapping):
        answer = {}
    session = answer.get("session")
    token = answer.get("consent_token")
    session_id = session.get("session_id") if isinstance(session, Mapping) else None
    token_text = token.get("token") if isinstance(token, Mapping) else None
    if (
        not isinstance(session_id, str)
        or not isinstance(token_text, str)
        or not isinstance(token, Mapping)
        or token.get("session_id", session_id) != session_id
        or answer.get("handshake_id", handshake_id) != handshake_id
    ):
        logger.warning("Parafé handshake: the broker's answer is not a completed handshake")
        return failed("error", "invalid_response", "The Parafé broker's answer is unusable.")
    return HandshakeComplete(
        handshake_id=handshake_id,
        status="authenticated",
        session_id=session_id,
        consent_token=token_text,
    )


__all__ = [
    "HANDSHAKE_COMPLETE_PATH",
    "answer_handshake",
    "complete_handshake",
]
