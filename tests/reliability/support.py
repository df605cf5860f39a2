"""Helpers for the reliability tests: `pactmw serve` configs, signed requests, RSS, PostgreSQL.

Everything runs on 127.0.0.1: real `pactmw serve` processes (started with
`tests.support.servers.process_server`), real PostgreSQL servers (`tests.support.pg`), real key
servers (`tests.support.jwks_server`). The bot is `tests.reliability.bots:recording_bot`, which
logs each run to a file so tests can count bot runs per messageId across processes and restarts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from pactmw.core.jwk import PrivateJWK
from tests.support.a2a import PENDING
from tests.support.agent import identity_token, user_message
from tests.support.parties import ISSUER
from tests.support.toml import toml_value

AUDIENCE = "pactmw-reliability-audience"
BOT = "tests.reliability.bots:recording_bot"


# -- configuration ------------------------------------------------------------------------------


def inline_agent(key: PrivateJWK, issuer: str = ISSUER) -> dict[str, Any]:
    """An `[[agents]]` entry whose JWKS is inline (no key fetching)."""
    return {"issuer": issuer, "name": "Reliability PA", "jwks": {"keys": [key.public.to_dict()]}}


def write_config(
    path: Path,
    *,
    port: int,
    store: str,
    agents: Sequence[Mapping[str, Any]],
    bot: str = BOT,
    **settings: Any,
) -> Path:
    """Write a `pactmw serve` TOML for one Brand `acme` served by `bot` (the recording bot)."""
    lines = [
        f"base_url = {toml_value(f'http://127.0.0.1:{port}')}",
        f"audience = {toml_value(AUDIENCE)}",
        f"store = {toml_value(store)}",
        *(f"{name} = {toml_value(value)}" for name, value in settings.items()),
    ]
    for agent in agents:
        lines.append("[[agents]]")
        lines.extend(f"{name} = {toml_value(value)}" for name, value in agent.items())
    lines += ["[brands.acme]", 'name = "Acme"', f"handler = {toml_value(bot)}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def bot_env(runs: Path, slow_seconds: float = 2.0) -> dict[str, str]:
    return {"PACTMW_TEST_RUNS": str(runs), "PACTMW_TEST_SLOW_SECONDS": str(slow_seconds)}


# -- the personal agent -------------------------------------------------------------------------


def bearer(key: PrivateJWK, sub: str = "user-1", issuer: str = ISSUER) -> str:
    """A fresh PACT JWT (a new `jti`, so the Provider's verified-token cache never hits)."""
    return "Bearer " + identity_token(key, issuer, AUDIENCE, sub=sub, fresh_jti=True)


def message_body(text: str, message_id: str, context_id: str | None = None) -> dict[str, Any]:
    return {"message": user_message(text, message_id=message_id, context_id=context_id)}


def send(
    client: httpx.Client,
    base: str,
    authorization: str,
    text: str,
    message_id: str,
    context_id: str | None = None,
) -> httpx.Response:
    return client.post(
        f"{base}/a2a/acme/message:send",
        json=message_body(text, message_id, context_id),
        headers={"Authorization": authorization},
    )


def reply_of(response: httpx.Response) -> dict[str, Any]:
    """The agent message of a 200 reply, after checking its shape."""
    assert response.status_code == 200, (response.status_code, response.text)
    data = response.json()
    assert list(data) == ["message"], data
    message: dict[str, Any] = data["message"]
    assert message["role"] == "ROLE_AGENT", message
    return message


def expected_text(message_id: str, text: str, earlier: Sequence[str]) -> str:
    """What `recording_bot` answers to `message_id` after the answered turns `earlier`."""
    return f"re {message_id} turn {len(earlier) + 1} after [{','.join(earlier)}]: {text}"


def assert_reply(
    response: httpx.Response,
    *,
    message_id: str,
    text: str,
    earlier: Sequence[str],
    context_id: str | None = None,
) -> dict[str, Any]:
    message = reply_of(response)
    if context_id is not None:
        assert message["contextId"] == context_id, (message, context_id)
    assert message["parts"] == [{"text": expected_text(message_id, text, earlier)}], message
    return message


def is_pending(response: httpx.Response) -> bool:
    """The 400 a duplicate gets while another worker holds the turn."""
    if response.status_code != 400:
        return False
    error = response.json().get("error", {})
    return bool(error.get("status") == "INVALID_ARGUMENT" and error.get("message") == PENDING)


# -- what the bot did ---------------------------------------------------------------------------


def bot_runs(runs: Path, event: str = "start") -> Counter[str]:
    """How often the bot logged `event` (`start` or `done`) per message id."""
    counts: Counter[str] = Counter()
    if not runs.exists():
        return counts
    for line in runs.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == event:
            counts[parts[1]] += 1
    return counts


# -- processes ----------------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    """The resident set size of a process, from /proc/PID/status (KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")
