"""What the `pactmw check` tests share: the personal agent made by `pactmw keygen`, Provider
configurations, Providers (in this process or as `pactmw serve`), and running the checker as a
user runs it (a subprocess, real files, real ports)."""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.brand_login import BrandUser
from pactmw.check import names
from pactmw.core.jwk import PrivateJWK, import_private_jwk
from pactmw.provider import Provider, ProviderSettings
from pactmw.store.base import Store
from tests.support.agent import identity_token
from tests.support.net import free_port, loopback_client
from tests.support.servers import REPO, process_server, uvicorn_server, wait_until_ok
from tests.support.toml import toml_value

PYTHON_M = (sys.executable, "-m", "pactmw")
AUDIENCE = "urn:pactmw:check:provider"
BRANDS = ("acme", "globex")
SUMMARY = re.compile(r"(\d+) passed, (\d+) failed")


def run_pactmw(
    *arguments: str, cwd: Path = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m pactmw ARGUMENTS` to completion, output as text."""
    return subprocess.run(
        [*PYTHON_M, *arguments],
        cwd=cwd,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


@dataclass(frozen=True)
class Agent:
    """The test personal agent: its files from `pactmw keygen` and where its JWKS is served."""

    key_file: Path
    jwks_file: Path
    issuer: str
    jwks_uri: str

    @property
    def key(self) -> PrivateJWK:
        return import_private_jwk(self.key_file.read_text())

    def token(self, sub: str = "user-1", **overrides: Any) -> str:
        return identity_token(self.key, self.issuer, AUDIENCE, sub=sub, **overrides)

    def check_args(self, card_url: str, *extra: str) -> list[str]:
        return [
            "check",
            card_url,
            "--issuer",
            self.issuer,
            "--key",
            str(self.key_file),
            "--audience",
            AUDIENCE,
            *extra,
        ]


def check(agent: Agent, card_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`pactmw check` as a user runs it."""
    return run_pactmw(*agent.check_args(card_url, *extra))


@dataclass(frozen=True)
class Outcome:
    """A `pactmw check --json` run: which checks passed and failed, and the exit status."""

    returncode: int
    passed: list[str]
    failed: dict[str, dict[str, Any]]
    document: dict[str, Any]


def check_json(agent: Agent, card_url: str, *extra: str) -> Outcome:
    result = check(agent, card_url, "--json", *extra)
    assert result.returncode in (0, 1), result.stderr
    document = json.loads(result.stdout)
    checks = document["checks"]
    assert document["passed"] + document["failed"] == document["total"] == len(checks)
    assert {"name", "passed", "expected", "actual"} == set(checks[0])
    return Outcome(
        returncode=result.returncode,
        passed=[c["name"] for c in checks if c["passed"]],
        failed={c["name"]: c for c in checks if not c["passed"]},
        document=document,
    )


def text_lines(stdout: str) -> tuple[list[str], str]:
    """The check lines and the summary line of a text run; checks the output's shape."""
    lines = stdout.splitlines()
    assert lines, "no output"
    summary = lines[-1]
    assert SUMMARY.fullmatch(summary), summary
    checks = lines[:-1]
    for line in checks:
        assert re.match(r"(PASS|FAIL)  \S", line), line
    return checks, summary


# -- Provider configurations -----------------------------------------------------------------------


def provider_toml(
    *,
    base_url: str,
    agent: Agent,
    handler: str,
    store: str = "memory://",
    brands: Sequence[str] = BRANDS,
    delegation: Mapping[str, Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """A Provider configuration: the agent, its disabled twin `{issuer}/disabled-pa`, and
    `brands` answered by `handler`; `delegation` adds `[brands.ID.delegation]` tables."""
    top: dict[str, Any] = {
        "base_url": base_url,
        "audience": AUDIENCE,
        "allow_http_jwks_on_loopback": True,
        "store": store,
        "organization": "pactmw check tests",
        **(extra or {}),
    }
    lines = [f"{key} = {toml_value(value)}" for key, value in top.items()]
    for table in (
        {"issuer": agent.issuer, "name": "Check agent", "jwks_uri": agent.jwks_uri},
        {"issuer": f"{agent.issuer}/disabled-pa", "jwks_uri": agent.jwks_uri, "enabled": False},
    ):
        lines += ["", "[[agents]]", *(f"{k} = {toml_value(v)}" for k, v in table.items())]
    for brand in brands:
        lines += ["", f"[brands.{brand}]", f"name = {toml_value(brand.title() + ' Support')}"]
        lines.append(f"handler = {toml_value(handler)}")
        if delegation and brand in delegation:
            lines += ["", f"[brands.{brand}.delegation]"]
            lines += [f"{k} = {toml_value(v)}" for k, v in delegation[brand].items()]
    return "\n".join(lines) + "\n"


def card_url(base_url: str, brand: str = "acme") -> str:
    return f"{base_url}/a2a/{brand}/.well-known/agent-card.json"


@contextlib.contextmanager
def in_process_provider(
    directory: Path,
    agent: Agent,
    *,
    handler: str = "pactmw.demo:demo_bot",
    store: Store | None = None,
    wrap: Any = None,
    delegation: Mapping[str, Mapping[str, Any]] | None = None,
    port: int | None = None,
    public_url: str | None = None,
) -> Iterator[str]:
    """Our Starlette app (`A2AProviderApp`) on uvicorn in this process; `wrap(app)` puts a
    middleware around it, `store` replaces the memory store, `public_url` is its `base_url`
    when not where it listens. Yields the base URL it listens on."""
    from pactmw.provider import load_toml

    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    config = directory / "pactmw.toml"
    config.write_text(
        provider_toml(
            base_url=public_url or base_url,
            agent=agent,
            handler=handler,
            delegation=delegation,
            extra={"data_dir": str(directory / ".pactmw")},
        )
    )
    settings = ProviderSettings.from_mapping(load_toml(str(config)))
    provider = Provider.from_settings(settings, store=store)
    app: Any = A2AProviderApp(provider)
    if wrap is not None:
        app = wrap(app)
    try:
        with uvicorn_server(app, port=port):
            wait_until_ok(card_url(base_url))
            yield base_url
    finally:
        provider.close()


@contextlib.contextmanager
def served_provider(
    directory: Path,
    agent: Agent,
    argv: Any,
    *,
    handler: str,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """A Provider in its own process: `argv(config, port)` is its command line. Yields the
    base URL once its card answers."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    config = directory / "pactmw.toml"
    config.write_text(
        provider_toml(
            base_url=base_url,
            agent=agent,
            handler=handler,
            store=f"sqlite:///{directory / 'pactmw.db'}",
        )
    )
    log = directory / "server.log"
    full_env = {"PACTMW_CONFIG": str(config), **(env or {})}
    with process_server(argv(config, port), port, env=full_env, log=log):
        try:
            wait_until_ok(card_url(base_url))
        except TimeoutError:
            sys.stderr.write(log.read_text(errors="replace")[-4000:])
            raise
        yield base_url


# -- what the checker reports, and the person of `pactmw check --delegated` -----------------

#: The checks every run of the Identity profile has, whatever the options.
IDENTITY = {
    names.CARD, names.CARD_HEADERS, names.CARD_INTERFACE, names.CARD_SCHEME, names.CARD_UNKNOWN,
    names.REPLY, names.ENCODED_COLON, names.RETRY, names.AGENT_MESSAGE_ID, names.FOREIGN_SUB,
    names.UNKNOWN_CONTEXT_ID, names.LIST_TASKS, names.PAGE_SIZES, names.BAD_PAGE_SIZES,
    names.TASK_ROUTES, names.STREAMING, names.EXTENDED_CARD, names.PUSH_CONFIGS,
    names.VERSION_TOLERANCE, names.CONTENT_TYPE_TOLERANCE, names.UNMATCHED_ROUTES,
    names.MISSING_TOKEN, names.MISSING_TOKEN_BODY, names.HS256, names.EXPIRED, names.FUTURE_IAT,
    names.LONG_LIFETIME, names.AUD_INTERFACE, names.DISABLED_ISSUER, names.OTHER_KEY,
    names.ALG_NONE, names.UNKNOWN_BRAND, names.BAD_JSON, names.TASK_ID, names.RAW_PART,
    names.CONTENT_TYPE,
}  # fmt: skip


#: The person at the Brand's (development) login, who decides on the consent page.
PERSON = BrandUser("jane", "correct horse", account="acct-jane", email="jane@example.com")


SCOPES = {"orders:read": "Look up your orders", "orders:cancel": "Cancel an order"}


LINK = re.compile(r"^  (https?://\S+)$", re.MULTILINE)


@dataclass
class Running:
    """A `pactmw check` process whose output is read as it comes."""

    process: subprocess.Popen[str]
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)

    @classmethod
    def start(cls, agent: Agent, url: str, *extra: str) -> Running:
        return cls.of([*PYTHON_M, *agent.check_args(url, "--delegated", *extra)])

    @classmethod
    def of(cls, argv: Sequence[str], cwd: Path = REPO) -> Running:
        """Any command line (`pactmw send --authorize` too), run in `cwd`."""
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        running = cls(process)
        for stream, into in ((process.stdout, running.stdout), (process.stderr, running.stderr)):
            thread = threading.Thread(target=_read, args=(stream, into), daemon=True)
            thread.start()
            running.readers.append(thread)
        return running

    def link(self, timeout: float = 30) -> str:
        """The login link the checker shows the person."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = LINK.search("".join(self.stderr))
            if found:
                return found.group(1)
            assert self.process.poll() is None, "".join(self.stdout + self.stderr)
            time.sleep(0.05)
        raise AssertionError("no link on stderr: " + "".join(self.stderr))

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        for thread in self.readers:
            thread.join(timeout=5)
        return status, "".join(self.stdout), "".join(self.stderr)


def _read(stream: object, into: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.append(line)


def _form(page: str) -> tuple[str, dict[str, str]]:
    """The first form's action and its hidden fields."""
    action = re.search(r'<form method="post" action="([^"]+)">', page)
    assert action is not None, page
    hidden = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page)
    return html.unescape(action.group(1)), {k: html.unescape(v) for k, v in hidden}


def person_decides(
    link: str,
    decision: str = "allow",
    *,
    scopes: Sequence[str] = tuple(SCOPES),
    offered: Sequence[str] = tuple(SCOPES),
) -> None:
    """Jane in her browser: the Brand's login, then the Provider's consent page, which
    `offered` the scopes the agent asked for."""
    with loopback_client(timeout=10, follow_redirects=False) as browser:
        page = browser.get(link)
        assert page.status_code == 200, page.text
        action, hidden = _form(page.text)
        signed_in = browser.post(
            action, data={**hidden, "username": PERSON.username, "password": PERSON.password}
        )
        assert signed_in.status_code == 200, signed_in.text
        action, hidden = _form(signed_in.text)
        consent = browser.post(action, data=hidden)
        assert consent.status_code == 200, consent.text
        action, hidden = _form(consent.text)
        assert re.findall(r'name="scope" value="([^"]+)"', consent.text) == list(offered)
        fields = [("session", hidden["session"]), *(("scope", s) for s in scopes)]
        decided = browser.post(
            action,
            content=urlencode([*fields, ("decision", decision)]),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert decided.status_code == 303, decided.text
