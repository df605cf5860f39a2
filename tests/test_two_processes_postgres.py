"""Two `pactmw serve` processes on one PostgreSQL database behave as one Provider."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from tests.support.agent import identity_token, user_message
from tests.support.net import free_port
from tests.support.parties import ISSUER
from tests.support.pg import postgres_server
from tests.support.servers import process_server, serve_argv
from tests.support.toml import toml_value

AUDIENCE = "pactmw-test-audience"


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="k1")


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, key: PrivateJWK
) -> Iterator[tuple[str, str, Path]]:
    tmp = tmp_path_factory.mktemp("two_processes")
    runs = tmp / "runs.txt"
    runs.write_text("")
    with postgres_server() as pg:
        ports = (free_port(), free_port())
        config = tmp / "pactmw.toml"
        jwks = {"keys": [key.public.to_dict()]}
        config.write_text(
            f'base_url = "http://127.0.0.1:{ports[0]}"\n'
            f'audience = "{AUDIENCE}"\n'
            f'store = "{pg.create_database()}"\n'
            "[[agents]]\n"
            f'issuer = "{ISSUER}"\n'
            f"jwks = {toml_value(jwks)}\n"
            "[brands.acme]\n"
            'name = "Acme"\n'
            'handler = "tests.multiprocess_bot:counting_bot"\n'
        )
        env = {"PACTMW_TEST_RUNS": str(runs), "PACTMW_TEST_BOT_DELAY": "1.0"}
        with (
            process_server(serve_argv(config, ports[0]), ports[0], env=env, log=tmp / "a.log"),
            process_server(serve_argv(config, ports[1]), ports[1], env=env, log=tmp / "b.log"),
        ):
            yield f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", runs


def _token(key: PrivateJWK, sub: str = "user-1") -> str:
    return "Bearer " + identity_token(key, ISSUER, AUDIENCE, sub=sub)


def _send(
    base: str, key: PrivateJWK, message_id: str, text: str, context_id: str | None = None
) -> httpx.Response:
    message = user_message(text, message_id=message_id, context_id=context_id)
    return httpx.post(
        f"{base}/a2a/acme/message:send",
        json={"message": message},
        headers={"Authorization": _token(key)},
        timeout=30,
    )


def test_a_conversation_started_on_one_process_continues_on_the_other(
    servers: tuple[str, str, Path], key: PrivateJWK
) -> None:
    first, second, _ = servers
    started = _send(first, key, "c-1", "hello")
    assert started.status_code == 200, started.text
    context_id = started.json()["message"]["contextId"]
    continued = _send(second, key, "c-2", "again", context_id)
    assert continued.status_code == 200, continued.text
    assert continued.json()["message"]["parts"][0]["text"].startswith("turn 2 ")
    # A retry on either process answers from the shared store, byte for byte.
    assert _send(first, key, "c-2", "again", context_id).content == continued.content


def test_concurrent_retries_across_both_processes_run_the_bot_once(
    servers: tuple[str, str, Path], key: PrivateJWK
) -> None:
    first, second, runs = servers
    context_id = _send(first, key, "d-1", "start").json()["message"]["contextId"]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(
            pool.map(
                lambda i: _send((first, second)[i % 2], key, "d-2", "same message", context_id),
                range(8),
            )
        )
    assert runs.read_text().splitlines().count("d-2") == 1
    bodies = {a.content for a in answers if a.status_code == 200}
    assert len(bodies) == 1
    for answer in answers:
        if answer.status_code != 200:
            assert answer.status_code == 400
            assert answer.json()["error"]["message"] == (
                "messageId was already received in this context and has no reply yet"
            )
    # Once answered, every retry on both processes gets the stored reply.
    for base in (first, second):
        assert _send(base, key, "d-2", "same message", context_id).content in bodies
    assert runs.read_text().splitlines().count("d-2") == 1
