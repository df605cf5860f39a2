"""HTTP throughput and latency: pactmw's endpoints against the same endpoints without pactmw.

Run:  .venv/bin/python benchmarks/http_load.py [--seconds S] [--rounds R] [--connections C]
                                        [--only identity,send,flask,django] [--json]

Needs Debian's `wrk` (`make bench-http` installs it when missing) and, for the PostgreSQL
contender, PostgreSQL's server binaries (tests/support/pg.py starts a throwaway server; without them
that contender is skipped with a note).

Every server runs in its own process on 127.0.0.1 and the same load generator measures them
all: wrk, one thread, C keep-alive connections (default 16), closed loop, with
benchmarks/wrk_bench.lua (every request carries the same reused PACT JWT; every
`message:send` has its own messageId). Contenders run interleaved: R rounds (default 8); in
each round every contender gets one S-second run (default 2). A group's contenders run back
to back, the groups' order rotates from round to round and each group's order is reversed
every other round. Reported: per contender the median over the rounds of requests/s, p50 and
p99 latency; "of base" is the median over the rounds of the contender's req/s divided by its
baseline's in the same round (two runs seconds apart, so a noisy neighbour hits both alike);
non-2xx responses and socket errors are summed over all rounds (should be 0).

Contenders (baseline first in each group):
  identity   starlette-bare      GET /a2a/whoami, a Starlette endpoint without pactmw
             starlette+pactmw    the same endpoint behind PersonalAgentMiddleware (cached token)
  send       bare-echo           POST message:send to a Starlette endpoint that parses the JSON
                                 and answers the same reply shape, no bookkeeping
             send-memory         `pactmw serve`, the docs' echo bot, memory:// store (no I/O:
                                 what the Provider costs without its store)
             send-sqlite         the same on the sqlite store (a fresh file, its defaults)
             send-postgres       the same on PostgreSQL (tests/support/pg.py's throwaway server:
                                 fsync, synchronous_commit, full_page_writes off)
  flask      flask-bare          examples/flask_app without pactmw, GET /api/agent/whoami
             flask+pactmw        examples/flask_app as it is (the view is @personal_agent_required)
  django     django-bare         examples/django_app without pactmw's middleware and routes
             django+pactmw       examples/django_app as it is
ASGI servers: uvicorn, one worker, the same settings for all. WSGI servers: gunicorn, 2 sync
workers (the `bench` extra). The script always exits 0: it is a report, not a test.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(_HERE)

if __name__ == "__main__":
    # Run as a file: put the repository root on sys.path (benchmarks.bench_apps, tests.*).
    sys.path.insert(0, REPO)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from importlib import metadata  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

if TYPE_CHECKING:
    from pactmw.core.jwk import PrivateJWK

# What the servers' apps (benchmarks/bench_apps.py) expect; they are imported in main().
ISSUER = "https://agent.example"
SUB = "user-000001"
BRAND = "acme"
AUDIENCE = "https://provider.example/a2a"
LUA = Path(_HERE) / "wrk_bench.lua"
GROUPS = ("identity", "send", "sdk", "turns", "size", "workers", "flask", "django")
# Share of the baseline's req/s (issue 16: targets 1, 2 and 4).
TARGETS = {
    "starlette+pactmw": 0.85,
    "send-memory": 0.75,
    "send-sqlite": 0.50,
    "send-postgres": 0.30,
    "provider-sqlite": 2.0,
    "turn1000-memory": 1 / 1.1,
    "turn1000-sqlite": 1 / 1.1,
    "turn1000-postgres": 1 / 1.1,
    "size-sqlite": 0.9,
    "size-postgres": 0.9,
}
#: Groups that need PostgreSQL when it is installed.
_STORE_GROUPS = {"send", "sdk", "turns", "size", "workers"}
TURN_CONTEXTS = 8  # conversations each turn-position contender continues, round robin
WORKER_COUNTS = (1, 2, 4)
TOKEN_LIFETIME = 300  # PACT's maximum (exp - iat); the token is re-minted every minute
SEND_TEXT = "Where is my order A-1001?"  # what wrk_bench.lua sends


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the token every request carries ----------------------------------------------------------


class TokenSource:
    """One PACT JWT, reused by every request (as personal agents do), re-minted each minute."""

    def __init__(self, key: PrivateJWK) -> None:
        self.key = key
        self._token = ""
        self._minted = 0.0

    def current(self) -> str:
        from pactmw.core.jose import sign_compact

        now = time.time()
        if now - self._minted > 60:
            iat = int(now)
            claims = {
                "iss": ISSUER,
                "sub": SUB,
                "aud": AUDIENCE,
                "iat": iat,
                "exp": iat + TOKEN_LIFETIME,
                "jti": os.urandom(8).hex(),
            }
            self._token = sign_compact(claims, self.key, typ="JWT")
            self._minted = now
        return self._token


# -- servers -----------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    argv: Callable[[int], list[str]]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = Path(REPO)
    port: int = 0


@dataclass
class Contender:
    name: str
    group: str
    server: str
    path: str
    mode: str  # "get", "send" or "context" (see wrk_bench.lua)
    baseline: str | None  # the contender this one is compared with
    rounds: list[dict[str, Any]] = field(default_factory=list)
    #: "context" mode: the conversations to continue, and how to fill them before the runs.
    contexts: list[str] = field(default_factory=list)
    prefill: Callable[[int], list[str]] | None = None


def _toml(value: Any) -> str:
    """A TOML literal for the str / bool / list / dict values of the configs below."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(type(value))


def write_config(path: Path, *, port: int, store: str, brand: str, handler: str, jwk: Any) -> Path:
    """A Provider TOML: the bench agent (inline JWKS), one Brand, the given store."""
    data_dir = path.parent / (path.stem + "-data")
    path.write_text(
        f"""base_url = {_toml(f"http://127.0.0.1:{port}")}
audience = {_toml(AUDIENCE)}
store = {_toml(store)}
data_dir = {_toml(str(data_dir))}

[[agents]]
issuer = {_toml(ISSUER)}
name = "Bench agent"
jwks = {_toml({"keys": [jwk]})}

[brands.{brand}]
name = "Bench support"
handler = {_toml(handler)}
"""
    )
    return path


def _uvicorn(factory: str) -> Callable[[int], list[str]]:
    return lambda port: [
        sys.executable,
        "-m",
        "uvicorn",
        f"benchmarks.bench_apps:{factory}",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]


def _serve(config: Path) -> Callable[[int], list[str]]:
    return lambda port: [
        sys.executable,
        "-m",
        "pactmw",
        "serve",
        "--config",
        str(config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]


def _gunicorn(app: str, workers: int, chdir: str | None = None) -> Callable[[int], list[str]]:
    extra = ["--chdir", chdir] if chdir else []
    return lambda port: [
        sys.executable,
        "-m",
        "gunicorn",
        "--workers",
        str(workers),
        "--bind",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
        *extra,
        app,
    ]


def plan(
    groups: set[str],
    tmp: Path,
    jwk: Any,
    pg_dsn: str | None,
    workers: int,
    store_size: int = 1_000_000,
) -> tuple[list[Server], list[Contender]]:
    """The servers to start and the contenders to measure, for the chosen groups."""
    from tests.support.net import free_port

    servers: list[Server] = []
    contenders: list[Contender] = []

    def server(name: str, argv: Callable[[int], list[str]], **env: str) -> Server:
        found = Server(name, argv, dict(env), port=free_port())
        servers.append(found)
        return found

    common = {"BENCH_JWK": json.dumps(jwk), "BENCH_AUDIENCE": AUDIENCE}
    if groups & {"identity", "send"}:
        server("starlette-bare", _uvicorn("starlette_bare"), **common)
    if "identity" in groups:
        server("starlette-identity", _uvicorn("starlette_identity"), **common)
        contenders += [
            Contender("starlette-bare", "identity", "starlette-bare", "/a2a/whoami", "get", None),
            Contender(
                "starlette+pactmw",
                "identity",
                "starlette-identity",
                "/a2a/whoami",
                "get",
                "starlette-bare",
            ),
        ]
    send = f"/a2a/{BRAND}/message:send"
    handler = "benchmarks.bench_apps:echo_bot"

    def serve(label: str, store: str) -> Server:
        """The `pactmw serve` server `serve-<label>` on `store` (one per label)."""
        for found in servers:
            if found.name == f"serve-{label}":
                return found
        srv = server(f"serve-{label}", lambda port: [])
        config = write_config(
            tmp / f"serve-{label}.toml",
            port=srv.port,
            store=store,
            brand=BRAND,
            handler=handler,
            jwk=jwk,
        )
        srv.argv = _serve(config)
        return srv

    stores = {"memory": "memory://", "sqlite": f"sqlite:///{tmp / 'serve-sqlite.db'}"}
    if pg_dsn is not None:
        stores["postgres"] = pg_dsn
    if "send" in groups:
        contenders.append(Contender("bare-echo", "send", "starlette-bare", send, "send", None))
        for label, store in stores.items():
            srv = serve(label, store)
            contenders.append(
                Contender(f"send-{label}", "send", srv.name, send, "send", "bare-echo")
            )
    if "sdk" in groups:
        # Issue 16 target 4: the official A2A Python server, plain and behind pactmw's
        # middleware, and pactmw's Provider on sqlite against it.
        server("a2a-sdk", _uvicorn("a2a_sdk_echo"), **common)
        server("a2a-sdk-pactmw", _uvicorn("a2a_sdk_echo_with_pactmw"), **common)
        srv = serve("sqlite", stores["sqlite"])
        contenders += [
            Contender("a2a-sdk", "sdk", "a2a-sdk", send, "send", None),
            Contender("a2a-sdk+pactmw", "sdk", "a2a-sdk-pactmw", send, "send", "a2a-sdk"),
            Contender("provider-sqlite", "sdk", srv.name, send, "send", "a2a-sdk"),
        ]
    if "turns" in groups:
        # Target 2: a turn late in a long conversation against one just past the history
        # window (50 turns), on the same server, each continuing TURN_CONTEXTS conversations.
        for label, store in stores.items():
            srv = serve(label, store)
            for position, baseline in ((51, None), (1000, f"turn51-{label}")):
                contenders.append(
                    Contender(
                        f"turn{position}-{label}",
                        "turns",
                        srv.name,
                        send,
                        "context",
                        baseline,
                        prefill=_prefiller(label, store, position - 1),
                    )
                )
    if "size" in groups:
        # Target 2: new conversations in a store that holds `store_size` of them already,
        # against a store that starts empty.
        sized = [("sqlite", lambda name: f"sqlite:///{tmp / name}.db")]
        if pg_dsn is not None:
            sized.append(("postgres", lambda name: _pg_database(pg_dsn, name)))
        for label, url in sized:
            empty = serve(f"{label}-empty", url("size_empty"))
            full = serve(f"{label}-full", url("size_full"))
            contenders += [
                Contender(f"size-empty-{label}", "size", empty.name, send, "send", None),
                Contender(
                    f"size-{label}",
                    "size",
                    full.name,
                    send,
                    "send",
                    f"size-empty-{label}",
                    prefill=_conversation_filler(url("size_full"), store_size),
                ),
            ]
    if "flask" in groups:
        server(
            "flask-bare",
            _gunicorn("benchmarks.bench_apps:flask_example_without_pactmw()", workers),
            **common,
        )
        srv = server("flask-pactmw", lambda port: [])
        config = write_config(
            tmp / "flask.toml",
            port=srv.port,
            store=f"sqlite:///{tmp / 'flask.db'}",
            brand="shop",
            handler="examples.flask_app.app:support_bot",
            jwk=jwk,
        )
        srv.argv = _gunicorn("benchmarks.bench_apps:flask_example()", workers)
        srv.env["PACTMW_CONFIG"] = str(config)
        whoami = "/api/agent/whoami"
        contenders += [
            Contender("flask-bare", "flask", "flask-bare", whoami, "get", None),
            Contender("flask+pactmw", "flask", "flask-pactmw", whoami, "get", "flask-bare"),
        ]
    if "django" in groups:
        django_env = {"DJANGO_DEBUG": "0", "SHOP_DATABASE": str(tmp / "shop.sqlite3")}
        app = _gunicorn("shopsite.wsgi:application", workers, chdir="examples/django_app")
        server(
            "django-bare",
            app,
            DJANGO_SETTINGS_MODULE="benchmarks.django_bare_settings",
            **django_env,
        )
        srv = server("django-pactmw", app, DJANGO_SETTINGS_MODULE="shopsite.settings", **django_env)
        srv.env["PACTMW_CONFIG"] = str(
            write_config(
                tmp / "django.toml",
                port=srv.port,
                store=f"sqlite:///{tmp / 'django.db'}",
                brand="shop",
                handler="shop.bot:support_bot",
                jwk=jwk,
            )
        )
        whoami = "/api/agent/whoami"
        contenders += [
            Contender("django-bare", "django", "django-bare", whoami, "get", None),
            Contender("django+pactmw", "django", "django-pactmw", whoami, "get", "django-bare"),
        ]
    return servers, contenders


# -- filling stores before the runs (targets 2: turn position, store size) ---------------------


def _sql_connect(store: str) -> Any:
    """A DB-API connection to a sqlite or PostgreSQL store URL, and its placeholder."""
    if store.startswith("sqlite:///"):
        import sqlite3

        return sqlite3.connect(store.removeprefix("sqlite:///"), timeout=60), "?"
    import psycopg

    return psycopg.connect(store), "%s"


def _fill_turns(store: str, contexts: list[str], turns: int) -> None:
    """`turns` answered turns in each of `contexts`, owned by the benchmark's caller, written
    straight into a SQL store (the server made the schema)."""
    conn, ph = _sql_connect(store)
    now = time.time()
    with conn:
        cur = conn.cursor()
        cur.executemany(
            "INSERT INTO pactmw_conversations (context_id, brand_id, issuer, sub, created_at,"
            f" last_activity, closed, account) VALUES ({', '.join([ph] * 8)})",
            [(c, BRAND, ISSUER, SUB, now, now, False, None) for c in contexts],
        )
        cur.executemany(
            "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at,"
            f" reply_message_id, reply_text, reply, replied_at) VALUES ({', '.join([ph] * 8)})",
            [
                (
                    c,
                    f"pre-{t}",
                    "An earlier question",
                    now,
                    f"pre-reply-{t}",
                    "An answer",
                    b"{}",
                    now,
                )
                for c in contexts
                for t in range(turns)
            ],
        )
    conn.close()


def _fill_turns_over_http(port: int, turns: int) -> list[str]:
    """TURN_CONTEXTS conversations of `turns` turns each, through `message:send` (a memory
    store lives in the server process), one client thread per conversation."""
    from concurrent.futures import ThreadPoolExecutor

    def one(token: str) -> str:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        context: str | None = None
        for t in range(turns):
            message: dict[str, Any] = {
                "messageId": f"pre-{os.urandom(6).hex()}-{t}",
                "role": "ROLE_USER",
                "parts": [{"text": "An earlier question"}],
            }
            if context is not None:
                message["contextId"] = context
            conn.request(
                "POST",
                f"/a2a/{BRAND}/message:send",
                body=json.dumps({"message": message}),
                headers={"Content-Type": "application/a2a+json", "Authorization": token},
            )
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"prefill: status {response.status}: {body[:200]!r}")
            context = json.loads(body)["message"]["contextId"]
        conn.close()
        assert context is not None
        return context

    token = f"Bearer {_PREFILL_TOKEN[0]}"
    with ThreadPoolExecutor(TURN_CONTEXTS) as pool:
        return list(pool.map(one, [token] * TURN_CONTEXTS))


# The token the HTTP prefill sends (set in main, once the key exists).
_PREFILL_TOKEN: list[str] = [""]


def _prefiller(label: str, store: str, turns: int) -> Callable[[int], list[str]]:
    """Fills TURN_CONTEXTS conversations of `turns` turns for a turn-position contender."""

    def fill(port: int) -> list[str]:
        if label == "memory":
            return _fill_turns_over_http(port, turns)
        import uuid

        contexts = [str(uuid.uuid4()) for _ in range(TURN_CONTEXTS)]
        _fill_turns(store, contexts, turns)
        return contexts

    return fill


def _conversation_filler(store: str, count: int) -> Callable[[int], list[str]]:
    """Fills a SQL store with `count` conversations of one answered turn each."""

    def fill(port: int) -> list[str]:
        conn, ph = _sql_connect(store)
        now = time.time()
        with conn:
            cur = conn.cursor()
            if ph == "%s":  # PostgreSQL: generated where it is stored
                cur.execute(
                    "INSERT INTO pactmw_conversations SELECT 'fill-' || g, %s, %s, 'user-' || g,"
                    " %s, %s, FALSE, NULL FROM generate_series(1, %s) AS g",
                    (BRAND, ISSUER, now, now, count),
                )
                cur.execute(
                    "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at,"
                    " reply_message_id, reply_text, reply, replied_at)"
                    " SELECT 'fill-' || g, 'm', 'A question', %s, 'r', 'An answer', '\\x7b7d', %s"
                    " FROM generate_series(1, %s) AS g",
                    (now, now, count),
                )
                cur.execute("ANALYZE")
            else:
                cur.executemany(
                    "INSERT INTO pactmw_conversations VALUES (?, ?, ?, ?, ?, ?, 0, NULL)",
                    ((f"fill-{i}", BRAND, ISSUER, f"user-{i}", now, now) for i in range(count)),
                )
                cur.executemany(
                    "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at,"
                    " reply_message_id, reply_text, reply, replied_at)"
                    " VALUES (?, 'm', 'A question', ?, 'r', 'An answer', x'7b7d', ?)",
                    ((f"fill-{i}", now, now) for i in range(count)),
                )
        conn.close()
        return []

    return fill


def _pg_database(dsn: str, name: str) -> str:
    """A new database `name` on the server of `dsn` (created once); its DSN."""
    import psycopg

    base, _, _ = dsn.rpartition("/")
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            conn.execute(f"CREATE DATABASE {name}")  # a constant of this script
    return f"{base}/{name}"


# -- checking what each server answers ----------------------------------------------------------


def _request(port: int, method: str, path: str, token: str | None) -> tuple[int, str, bytes]:
    headers = {"Content-Type": "application/a2a+json", "A2A-Version": "1.0"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = None
    if method == "POST":
        message = {
            "messageId": os.urandom(8).hex(),
            "role": "ROLE_USER",
            "parts": [{"text": SEND_TEXT}],
        }
        body = json.dumps({"message": message})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        conn.close()


def check(contender: Contender, port: int, token: str, timeout: float = 60.0) -> None:
    """Check the contender answers what it should, with the token (and, for pactmw, 401
    without it); retries until the server's workers are up."""
    from benchmarks.bench_apps import ACTOR_ID

    method = "GET" if contender.mode == "get" else "POST"
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, ctype, body = _request(port, method, contender.path, token)
            if status == 200:
                break
            problem = f"status {status}: {body[:300]!r}"
        except OSError as exc:
            problem = repr(exc)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{contender.name}: no 200 after {timeout:g} s ({problem})")
        time.sleep(0.2)
    data = json.loads(body)
    if contender.mode != "get":
        message = data["message"]
        ok = (
            ctype == "application/a2a+json"
            and message["role"] == "ROLE_AGENT"
            and message["parts"] == [{"text": f"You said: {SEND_TEXT}"}]
            and bool(message["contextId"])
        )
    elif contender.group == "identity":
        ok = data == {"issuer": ISSUER, "user": ACTOR_ID}
    else:
        ok = data == {"issuer": ISSUER, "sub": SUB, "actor_id": ACTOR_ID}
    if not ok:
        raise RuntimeError(f"{contender.name}: unexpected answer {ctype} {body[:300]!r}")
    if contender.baseline is not None:
        # pactmw really checks: without the token the same request is refused.
        status, _, _ = _request(port, method, contender.path, None)
        if status != 401:
            raise RuntimeError(f"{contender.name}: {status} without a token, expected 401")


# -- load ----------------------------------------------------------------------------------------


def run_wrk(
    wrk: str, port: int, contender: Contender, token: str, seconds: int, connections: int
) -> dict[str, Any]:
    """One wrk run against one contender; the numbers wrk_bench.lua's done() prints."""
    command = [
        wrk,
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "5s",
        "-s",
        str(LUA),
        f"http://127.0.0.1:{port}{contender.path}",
        "--",
        contender.mode,
        token,
        os.urandom(6).hex(),  # messageId prefix: unique across runs
        ",".join(contender.contexts),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    result: dict[str, Any] = json.loads(lines[-1][len("WRKJSON ") :])
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    result["socket_errors"] = sum(result[k] for k in ("connect", "read", "write", "timeout"))
    return result


def measure_workers(
    wrk: str,
    tmp: Path,
    jwk: Any,
    pg_dsn: str,
    tokens: TokenSource,
    seconds: int,
    rounds: int,
    connections: int,
    stack: contextlib.ExitStack,
) -> list[Contender]:
    """Target 5: 1, 2 and 4 `pactmw serve` processes on one PostgreSQL database, the same
    wrk connections spread over them (one wrk per process, run together), their req/s summed;
    rounds interleaved like the other groups, each count against one process in its round."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.net import free_port
    from tests.support.servers import process_server

    dsn = _pg_database(pg_dsn, "workers")
    send = f"/a2a/{BRAND}/message:send"
    ports = []
    for i in range(max(WORKER_COUNTS)):
        port = free_port()
        config = write_config(
            tmp / f"workers-{i}.toml",
            port=port,
            store=dsn,
            brand=BRAND,
            handler="benchmarks.bench_apps:echo_bot",
            jwk=jwk,
        )
        _log(f"starting workers-{i} on 127.0.0.1:{port} ...")
        stack.enter_context(
            process_server(_serve(config)(port), port, cwd=Path(REPO), log=tmp / f"workers-{i}.log")
        )
        ports.append(port)
    probe = Contender("workers", "workers", "", send, "send", None)
    for port in ports:
        check(probe, port, tokens.current())
    contenders = [
        Contender(f"workers-{n}", "workers", "", send, "send", None if n == 1 else "workers-1")
        for n in WORKER_COUNTS
    ]

    def together(n: int, run_seconds: int) -> dict[str, Any]:
        each = max(1, connections // n)
        with ThreadPoolExecutor(n) as pool:
            runs = list(
                pool.map(
                    lambda port: run_wrk(wrk, port, probe, tokens.current(), run_seconds, each),
                    ports[:n],
                )
            )
        return {
            "rps": sum(r["rps"] for r in runs),
            "requests": sum(r["requests"] for r in runs),
            "non2xx": sum(r["non2xx"] for r in runs),
            "socket_errors": sum(r["socket_errors"] for r in runs),
            "p50_us": max(r["p50_us"] for r in runs),
            "p99_us": max(r["p99_us"] for r in runs),
        }

    together(max(WORKER_COUNTS), 1)  # warm-up
    for r in range(rounds):
        order = contenders if r % 2 == 0 else contenders[::-1]
        for c in order:
            c.rounds.append(together(int(c.name.rsplit("-", 1)[1]), seconds))
        _log(f"workers round {r + 1}/{rounds} done")
    return contenders


def schedule(contenders: list[Contender], round_index: int) -> list[Contender]:
    """The order of one round: a group's contenders back to back (so a contender and its
    baseline see the same machine), the groups' order rotating from round to round and
    each group's own order reversed every other round."""
    groups: dict[str, list[Contender]] = {}
    for c in contenders:
        groups.setdefault(c.group, []).append(c)
    ordered = list(groups.values())
    shift = round_index % len(ordered)
    ordered = ordered[shift:] + ordered[:shift]
    if round_index % 2:
        ordered = [group[::-1] for group in ordered]
    return [c for group in ordered for c in group]


def summarize(contenders: list[Contender]) -> dict[str, Any]:
    by_name = {c.name: c for c in contenders}
    out: dict[str, Any] = {}
    for c in contenders:
        rates = [r["rps"] for r in c.rounds]
        med = statistics.median(rates)
        row: dict[str, Any] = {
            "group": c.group,
            "path": c.path,
            "requests_per_s": med,
            "p50_ms": statistics.median(r["p50_us"] for r in c.rounds) / 1000,
            "p99_ms": statistics.median(r["p99_us"] for r in c.rounds) / 1000,
            "non2xx": sum(r["non2xx"] for r in c.rounds),
            "socket_errors": sum(r["socket_errors"] for r in c.rounds),
            "requests": sum(r["requests"] for r in c.rounds),
            "spread_pct": 100 * (max(rates) - min(rates)) / med,
            "rounds_requests_per_s": rates,
            "baseline": c.baseline,
        }
        if c.baseline is not None:
            base = by_name[c.baseline]
            # Each round's ratio compares two runs made back to back; the median of those
            # is steadier on a noisy machine than the ratio of the two medians.
            paired = [a["rps"] / b["rps"] for a, b in zip(c.rounds, base.rounds, strict=True)]
            row["of_baseline"] = statistics.median(paired)
            row["of_baseline_rounds"] = paired
            row["of_baseline_of_medians"] = med / statistics.median(r["rps"] for r in base.rounds)
        out[c.name] = row
    return out


def print_table(results: dict[str, Any]) -> None:
    print(
        f"\n  {'contender':<17} {'req/s':>8} {'of base':>8} {'p50 ms':>7} {'p99 ms':>7}"
        f" {'non-2xx':>7} {'sock err':>8} {'spread':>6}"
    )
    group = None
    for name, row in results.items():
        if group is not None and row["group"] != group:
            print()
        group = row["group"]
        share = f"{100 * row['of_baseline']:.0f}%" if "of_baseline" in row else "base"
        print(
            f"  {name:<17} {row['requests_per_s']:>8,.0f} {share:>8} {row['p50_ms']:>7.2f}"
            f" {row['p99_ms']:>7.2f} {row['non2xx']:>7} {row['socket_errors']:>8}"
            f" {row['spread_pct']:>5.0f}%"
        )


def target_lines(results: dict[str, Any], notes: list[str]) -> tuple[list[str], dict[str, Any]]:
    lines: list[str] = []
    verdicts: dict[str, Any] = {}

    def share(name: str) -> tuple[float, str] | None:
        row = results.get(name)
        if row is None:
            return None
        rounds = row["of_baseline_rounds"]
        return row["of_baseline"], (
            f"{100 * row['of_baseline']:.0f}%"
            f" (rounds {100 * min(rounds):.0f}–{100 * max(rounds):.0f}%)"
        )

    labels = {
        "starlette+pactmw": ("identity-protected", "of bare"),
        "send-sqlite": ("message:send sqlite", "of bare echo"),
        "send-postgres": ("message:send PostgreSQL", "of bare echo"),
        "send-memory": ("message:send memory:// store", "of bare echo"),
        "a2a-sdk+pactmw": ("a2a-sdk server + pactmw middleware", "of the a2a-sdk server"),
        "provider-sqlite": ("pactmw Provider on sqlite", "of the a2a-sdk server"),
        "turn1000-memory": ("turn 1,000, memory://", "of turn 51"),
        "turn1000-sqlite": ("turn 1,000, sqlite", "of turn 51"),
        "turn1000-postgres": ("turn 1,000, PostgreSQL", "of turn 51"),
        "size-sqlite": ("full store, sqlite", "of an empty one"),
        "size-postgres": ("full store, PostgreSQL", "of an empty one"),
        "workers-2": ("2 serve processes on one PostgreSQL", "of one process"),
        "workers-4": ("4 serve processes on one PostgreSQL", "of one process"),
        "flask+pactmw": ("Flask example + pactmw (gunicorn)", "of the example without pactmw"),
        "django+pactmw": ("Django example + pactmw (gunicorn)", "of the example without pactmw"),
    }
    for name, (label, of) in labels.items():
        found = share(name)
        if found is None:
            continue
        ratio, text = found
        target = TARGETS.get(name)
        if target is None:
            verdicts[name] = {"of_baseline": ratio, "verdict": "documented"}
            lines.append(f"{label}: {text} {of} (documented)")
        else:
            verdict = "PASS" if ratio >= target else "MISS"
            verdicts[name] = {"of_baseline": ratio, "target": target, "verdict": verdict}
            lines.append(f"{label}: {text} {of} (target ≥ {100 * target:.0f}%): {verdict}")
    lines.extend(notes)
    bad = {n: r["non2xx"] for n, r in results.items() if r["non2xx"]}
    errors = {n: r["socket_errors"] for n, r in results.items() if r["socket_errors"]}
    total = sum(r["requests"] for r in results.values())
    lines.append(
        f"non-2xx responses: {sum(bad.values())} of {total:,} requests (should be 0)"
        + (f": {bad}" if bad else "")
    )
    lines.append(
        f"socket errors: {sum(errors.values())} (should be 0)" + (f": {errors}" if errors else "")
    )
    return lines, verdicts


def environment(wrk: str, workers: int, connections: int) -> dict[str, Any]:
    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    wrk_version = subprocess.run([wrk, "--version"], capture_output=True, text=True).stdout
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "wrk": wrk_version.split("Copyright")[0].strip(),
        "load": f"wrk -t1 -c{connections}, keep-alive, closed loop, 127.0.0.1",
        "asgi": "uvicorn, 1 worker, default settings (--log-level warning)",
        "wsgi": f"gunicorn, {workers} sync workers (--log-level warning)",
        **{
            name: version(name)
            for name in ("uvicorn", "h11", "httptools", "uvloop", "starlette", "gunicorn")
        },
        "flask": version("flask"),
        "django": version("django"),
    }


@contextlib.contextmanager
def maybe_postgres(wanted: bool) -> Iterator[tuple[str | None, str | None]]:
    """(dsn, None), or (None, why not) when PostgreSQL is not wanted or not installed."""
    if not wanted:
        yield None, None
        return
    from tests.support.pg import PostgresNotFound, postgres_server

    try:
        with postgres_server(dbname="pactmw_bench") as server:
            yield server.dsn, None
    except PostgresNotFound as exc:
        yield None, f"message:send PostgreSQL: SKIPPED ({exc})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=int, default=2, help="seconds per contender per round (default 2)"
    )
    parser.add_argument("--rounds", type=int, default=8, help="interleaved rounds (default 8)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (default 16)")
    parser.add_argument(
        "--workers", type=int, default=2, help="gunicorn workers for Flask/Django (default 2)"
    )
    parser.add_argument(
        "--only",
        default=",".join(GROUPS),
        help=f"comma-separated subset of {','.join(GROUPS)} (default: all)",
    )
    parser.add_argument(
        "--store-size",
        type=int,
        default=1_000_000,
        help="conversations in the full store of the size group (default 1,000,000)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    args = parser.parse_args(argv)
    groups = {g.strip() for g in args.only.split(",") if g.strip()}
    if groups - set(GROUPS) or not groups:
        parser.error(f"--only takes a subset of {','.join(GROUPS)}")
    if args.seconds < 1 or args.rounds < 1 or args.connections < 1 or args.workers < 1:
        parser.error("need --seconds >= 1, --rounds >= 1, --connections >= 1, --workers >= 1")
    wrk = shutil.which("wrk")
    if wrk is None:
        print("wrk is not installed: apt-get install wrk (make bench-http installs it)")
        return 0

    env = environment(wrk, args.workers, args.connections)
    if not args.json:
        print(
            f"Python {env['python']} ({env['machine']}, {env['cpus']} CPUs); {env['wrk']};"
            f" {env['load']}"
        )
        print(
            f"ASGI: uvicorn {env['uvicorn']} (h11 {env['h11']}, httptools {env['httptools']},"
            f" uvloop {env['uvloop']}), 1 worker; WSGI: gunicorn {env['gunicorn']},"
            f" {args.workers} sync workers"
        )
        print(
            f"{args.rounds} interleaved rounds × {args.seconds} s per contender;"
            " medians over the rounds; 'of base' = median over the rounds of req/s ÷ the"
            " baseline's req/s in the same round (run back to back)"
        )
        sys.stdout.flush()

    import benchmarks.bench_apps as apps
    from tests.support.servers import process_server

    from pactmw.core.jwk import generate_private_jwk

    if (apps.ISSUER, apps.SUB, apps.BRAND) != (ISSUER, SUB, BRAND):
        raise RuntimeError("benchmarks/bench_apps.py and http_load.py disagree on the caller")
    started = time.perf_counter()
    key = generate_private_jwk("ES256", kid="bench")
    tokens = TokenSource(key)
    jwk = key.public.to_dict()
    with (
        tempfile.TemporaryDirectory(prefix="pactmw-bench-http-") as tmp_name,
        maybe_postgres(bool(groups & _STORE_GROUPS)) as (pg_dsn, pg_note),
        contextlib.ExitStack() as stack,
    ):
        tmp = Path(tmp_name)
        notes = [pg_note] if pg_note else []
        _PREFILL_TOKEN[0] = tokens.current()
        servers, contenders = plan(groups, tmp, jwk, pg_dsn, args.workers, args.store_size)
        ports = {}
        for srv in servers:
            _log(f"starting {srv.name} on 127.0.0.1:{srv.port} ...")
            stack.enter_context(
                process_server(
                    srv.argv(srv.port),
                    srv.port,
                    env=srv.env,
                    cwd=srv.cwd,
                    log=tmp / f"{srv.name}.log",
                )
            )
            ports[srv.name] = srv.port
        for c in contenders:
            check(c, ports[c.server], tokens.current())
            if c.prefill is not None:
                _log(f"filling the store of {c.name} ...")
                c.contexts = c.prefill(ports[c.server])
            run_wrk(wrk, ports[c.server], c, tokens.current(), 1, args.connections)  # warm-up
        _log(f"{len(contenders)} contenders × {args.rounds} rounds × {args.seconds} s")
        for r in range(args.rounds):
            for c in schedule(contenders, r):
                c.rounds.append(
                    run_wrk(
                        wrk, ports[c.server], c, tokens.current(), args.seconds, args.connections
                    )
                )
            _log(f"round {r + 1}/{args.rounds} done")
        if "workers" in groups and pg_dsn is not None:
            contenders += measure_workers(
                wrk,
                tmp,
                jwk,
                pg_dsn,
                tokens,
                args.seconds,
                args.rounds,
                args.connections,
                stack,
            )
        # Keep the tables' order (grouped), not the last round's rotation.
        results = summarize(contenders)
    lines, verdicts = target_lines(results, notes)
    elapsed = time.perf_counter() - started
    if args.json:
        out = {
            "environment": env,
            "config": {
                "seconds_per_contender_per_round": args.seconds,
                "rounds": args.rounds,
                "connections": args.connections,
                "wsgi_workers": args.workers,
                "groups": sorted(groups),
            },
            "results": results,
            "targets": verdicts,
            "notes": notes,
            "elapsed_s": elapsed,
        }
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print_table(results)
        print()
        for line in lines:
            print(line)
        print(f"\n(total {elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
