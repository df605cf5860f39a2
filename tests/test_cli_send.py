"""`pactmw send` against a real Provider on 127.0.0.1 (Acme's demo bot, which remembers the
order number of a conversation and asks for delegation to list "my orders"): the reply and
the context id that continues it, --json, a step-up, a refused agent, and the failures that
end it in one line; with --authorize, the device flow with the person played by the test
(Acme's development login, then the Provider's consent page) and the delegation it saves."""

from __future__ import annotations

import contextlib
import json
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.brand_login import DevelopmentBrandLogin, consent_url_for
from pactmw.core.jwk import generate_private_jwk, public_key_set
from tests.check.support import PERSON, Running, person_decides
from tests.client.support import Route, StaticServer
from tests.client.support import delegated_card as delegated_card_document
from tests.support.cli import PYTHON_M, assert_one_line_error, run
from tests.support.jwks_server import JwksServer
from tests.support.net import closed_port_url, free_port
from tests.support.parties import ISSUER

AUDIENCE = "urn:aud"
PROVIDER_CONFIG = """\
base_url = "http://127.0.0.1:{port}"
audience = "{audience}"
store = "memory://"
data_dir = "{data}"
allow_http_jwks_on_loopback = true

[[agents]]
issuer = "{issuer}"
jwks_uri = "{jwks_uri}"

[brands.acme]
name = "Acme Support"
handler = "pactmw.demo:demo_bot"

[brands.acme.delegation]
login_url = "/login"
tools = "pactmw.demo:demo_tools"
scopes = {{ "orders:read" = "Look up your orders", "orders:cancel" = "Cancel an order" }}
"""


#: Acme's delegation through its own (development) login, where the test signs jane in.
BRAND_LOGIN = """\
[brands.acme.delegation]
login = "brand"
login_url = "{login_url}"
brand_issuer = "{brand_issuer}"
brand_jwks_uri = "{brand_jwks_uri}"
interval = 1
tools = "pactmw.demo:demo_tools"
scopes = {{ "orders:read" = "Look up your orders", "orders:cancel" = "Cancel an order" }}
"""


def write_key(path: Path, kid: str = "pa-1") -> Path:
    key = generate_private_jwk("ES256", kid=kid)
    path.write_text(json.dumps(key.to_dict()))
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's private key (`agent.jwk`), registered with the Provider below."""
    folder = tmp_path_factory.mktemp("send")
    write_key(folder / "agent.jwk")
    return folder


@pytest.fixture(scope="module")
def card(folder: Path) -> Iterator[str]:
    """Our Provider in this process, trusting the agent of `agent.jwk`; Acme's card URL."""
    with provider(folder, PROVIDER_CONFIG, free_port()) as url:
        yield url


@pytest.fixture(scope="module")
def delegated_card(folder: Path) -> Iterator[str]:
    """The same Provider, Acme's delegation going through Acme's own login (jane's)."""
    with brand_login_provider(folder) as url:
        yield url


@contextlib.contextmanager
def brand_login_provider(folder: Path, delegation: str = "", settings: str = "") -> Iterator[str]:
    """A Provider whose Acme delegates through Acme's own login, its delegation table ending
    with the TOML lines `delegation`, its top-level settings with `settings`; Acme's card URL."""
    port = free_port()
    consent = consent_url_for(f"http://127.0.0.1:{port}", "acme")
    with DevelopmentBrandLogin(consent_url=consent, users=[PERSON], brand_name="Acme") as login:
        login.start()
        head = PROVIDER_CONFIG[: PROVIDER_CONFIG.index("[brands.acme.delegation]")]
        head = head.replace("[[agents]]", settings + "\n[[agents]]", 1)
        template = head + BRAND_LOGIN + delegation
        with provider(folder, template, port, **login.delegation_settings()) as url:
            yield url


@contextlib.contextmanager
def provider(folder: Path, template: str, port: int, **values: str) -> Iterator[str]:
    """A Provider of the configuration `template` on `port`; Acme's card URL."""
    from pactmw.adapters.asgi import A2AProviderApp
    from pactmw.core.jwk import import_private_jwk
    from pactmw.provider import Provider, ProviderSettings, load_toml
    from tests.support.servers import uvicorn_server

    key = import_private_jwk((folder / "agent.jwk").read_text())
    with JwksServer(public_key_set([key])) as jwks:
        config = folder / f"pactmw-{port}.toml"
        config.write_text(
            template.format(
                port=port,
                audience=AUDIENCE,
                data=folder / f"data-{port}",
                issuer=ISSUER,
                jwks_uri=jwks.url,
                **values,
            )
        )
        provider = Provider.from_settings(ProviderSettings.from_mapping(load_toml(str(config))))
        try:
            with uvicorn_server(A2AProviderApp(provider), port=port) as base_url:
                yield f"{base_url}/a2a/acme/.well-known/agent-card.json"
        finally:
            provider.close()


def send_argv(url: str, text: str, *options: str, key: str = "agent.jwk") -> list[str]:
    argv = ["send", url, text, "--key", key, "--issuer", ISSUER, "--sub", "u-1"]
    return [*PYTHON_M, *argv, "--audience", AUDIENCE, *options]


def send(
    folder: Path, url: str, text: str, *options: str, key: str = "agent.jwk"
) -> subprocess.CompletedProcess[str]:
    return run(send_argv(url, text, *options, key=key), cwd=folder)


def continued(stderr: str) -> str:
    """The context id of the line `to continue: --context-id ID`, the whole of stderr."""
    prefix = "to continue: --context-id "
    assert stderr.startswith(prefix), stderr
    assert stderr.count("\n") == 1, stderr
    return stderr.removeprefix(prefix).rstrip("\n")


def test_the_reply_is_printed_and_its_context_id_continues_the_conversation(
    folder: Path, card: str
) -> None:
    first = send(folder, card, "Where is my order?")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Happy to help! What's your order number? It looks like A-1001.\n"
    context_id = continued(first.stderr)
    second = send(folder, card, "It is A-1001", "--context-id", context_id)
    assert second.returncode == 0, second.stderr
    assert second.stdout == "Order A-1001 (walnut desk lamp) is shipped.\n"
    assert continued(second.stderr) == context_id
    # No order number in this message: the bot finds it in the conversation's history.
    third = send(folder, card, "When will it arrive?", "--context-id", context_id)
    assert third.stdout == "Order A-1001 should arrive Thursday.\n", third.stderr
    assert continued(third.stderr) == context_id
    # Without --context-id, a new conversation, which has no order number yet.
    fresh = send(folder, card, "When will it arrive?")
    assert fresh.stdout.startswith("Happy to help!"), fresh.stderr
    assert continued(fresh.stderr) != context_id


def test_json_prints_the_a2a_answer(folder: Path, card: str) -> None:
    result = send(folder, card, "It is A-1001", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    message = json.loads(result.stdout)["message"]
    assert message["role"] == "ROLE_AGENT"
    assert message["parts"] == [{"text": "Order A-1001 (walnut desk lamp) is shipped."}]
    again = send(folder, card, "When will it arrive?", "--context-id", message["contextId"])
    assert again.stdout == "Order A-1001 should arrive Thursday.\n", again.stderr


def test_a_step_up_says_what_is_needed_and_exits_1(folder: Path, card: str) -> None:
    result = send(folder, card, "Show my orders")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == "I need your permission to do that: orders:read.\n"
    [line] = result.stderr.splitlines()
    consent = card.replace("/.well-known/agent-card.json", "/oauth/consent?user_code=")
    assert line.startswith(
        "pactmw send: error: delegation needed: the Brand asks for orders:read on the user's "
        f"account; the person approves at {consent}"
    ), line
    assert line.endswith(
        "then the agent sends the message again with a delegation token from the device flow "
        "(--authorize runs it)"
    )
    as_json = send(folder, card, "Show my orders", "--json")
    assert as_json.returncode == 1, as_json.stderr
    task = json.loads(as_json.stdout)["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    assert task["metadata"]["pact.missingScopes"] == ["orders:read"]
    assert as_json.stderr.startswith("pactmw send: error: delegation needed: ")


def test_an_agent_the_provider_does_not_know_is_refused(folder: Path, card: str) -> None:
    """The same issuer, a key its JWKS does not have: the Provider refuses the token."""
    write_key(folder / "stranger.jwk", kid="stranger-1")
    result = send(folder, card, "Where is my order?", key="stranger.jwk")
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    interface = card.removesuffix("/.well-known/agent-card.json")
    assert result.stderr == (
        f"pactmw send: error: {interface}/message:send: the personal-agent JWT was refused (is "
        "its issuer registered, its key published at the registered jwks_uri, its audience the "
        "one the Provider assigned, and the clock right?)\n"
    )


def test_an_unknown_context_id_is_the_providers_error(folder: Path, card: str) -> None:
    result = send(folder, card, "Hello", "--context-id", "no-such-context")
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"pactmw send: error: {card.removesuffix('/.well-known/agent-card.json')}/message:send: "
        "INVALID_PARAMS (400): Unknown contextId"
    ]


def test_an_unreachable_provider_is_one_line(folder: Path) -> None:
    url = closed_port_url()
    result = send(folder, url, "Hello")
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    port = url.rsplit(":", 1)[1]
    assert line.startswith(
        f"pactmw send: error: {url}/.well-known/agent-card.json: cannot connect to "
        f"127.0.0.1:{port}: "
    ), line


def test_a_providers_root_for_a_brands_domain_says_where_the_cards_are(
    folder: Path, card: str
) -> None:
    """As `pactmw card` says it: the same rule, for any command that takes a card URL."""
    root = card.removesuffix("/a2a/acme/.well-known/agent-card.json")
    result = send(folder, root, "Hello")
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"pactmw send: error: {root}/.well-known/agent-card.json: HTTP 404 (a Brand's domain "
        "serves /.well-known/agent-card.json or redirects to its card; a Provider serves each "
        "Brand's card at /a2a/{brand}/.well-known/agent-card.json)"
    ]


def test_a_guarded_url_given_for_a_card_says_a_card_is_public(folder: Path, card: str) -> None:
    """Found in a Flask trial: `pactmw send` given an API route of the app (or any URL that
    answers PACT's 401) for the card said the personal-agent JWT was refused, though the card
    is fetched without one: the line says the URL answered 401 to an anonymous request."""
    guarded = card.replace("/.well-known/agent-card.json", "/tasks")  # ListTasks needs a JWT
    result = send(folder, guarded, "Hello")
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"pactmw send: error: {guarded}: HTTP 401 (an Agent Card is public and fetched without "
        "a token: is this the card's URL? A Provider serves each Brand's card at "
        "/a2a/{brand}/.well-known/agent-card.json)"
    ]


def test_an_interface_url_given_for_a_card_says_where_the_card_is(folder: Path, card: str) -> None:
    """Found in a plain WSGI trial: the Brand's interface URL (the card's own
    `supportedInterfaces` URL) given for its card was a bare `HTTP 404`."""
    interface = card.removesuffix("/.well-known/agent-card.json")
    result = send(folder, interface, "Hello")
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"pactmw send: error: {interface}: HTTP 404 (is this the card's URL? A Brand's card "
        "is at its interface URL + /.well-known/agent-card.json: "
        "/a2a/{brand}/.well-known/agent-card.json)"
    ]


@pytest.mark.parametrize(
    ("url", "key", "expected"),
    [
        pytest.param(
            "http://shop.example",
            "agent.jwk",
            "pactmw send: error: URL: plain http is allowed only to loopback hosts",
            id="plain-http",
        ),
        pytest.param("http://[::1", "agent.jwk", "URL: not a valid URL: ", id="malformed"),
        pytest.param("http://127.0.0.1:9", "missing.jwk", "cannot read missing.jwk", id="no-key"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(folder: Path, url: str, key: str, expected: str) -> None:
    assert_one_line_error(send(folder, url, "Hello", key=key), expected)


def test_send_help_documents_the_output_and_exit_statuses() -> None:
    text = " ".join(run([*PYTHON_M, "send", "--help"]).stdout.split())
    for needle in ("--key", "--issuer", "--sub", "--audience", "--context-id", "--json",
                   "--timeout", "on stderr the --context-id", "step-up", "--authorize",
                   "--delegation FILE", "(mode 0600)", "refresh token", "JSON alone on stdout",
                   "Exit status 0 for a reply; 1 when there is none"):  # fmt: skip
        assert needle in text, needle


JANES_ORDERS = (
    "Your orders: A-1001 (walnut desk lamp, shipped); A-1002 (linen throw, being packed).\n"
)


def authorizing(folder: Path, url: str, *options: str) -> Running:
    """`pactmw send "Show my orders" --authorize`, running: the person reads its link."""
    return Running.of(send_argv(url, "Show my orders", "--authorize", *options), cwd=folder)


def test_authorize_runs_the_device_flow_and_the_saved_delegation_is_reused(
    folder: Path, delegated_card: str
) -> None:
    running = authorizing(folder, delegated_card, "--delegation", "acme.json")
    person_decides(running.link(), scopes=["orders:read"], offered=["orders:read"])
    status, stdout, stderr = running.finish()
    assert status == 0, stderr
    assert stdout == JANES_ORDERS
    lines = stderr.splitlines()
    assert lines[0] == (
        "The Brand asks for orders:read on the user's account. The person opens this link, "
        "signs in at the Brand and allows it:"
    ), stderr
    assert lines[1].startswith("  http://127.0.0.1:"), stderr
    assert re.fullmatch(r"\(user code \S+; waiting up to \d+ s\)", lines[2]), stderr
    continued("\n".join(lines[3:]) + "\n")
    saved = folder / "acme.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600  # the token acts on jane's account
    kept = json.loads(saved.read_text())
    assert kept["scope"] == "orders:read"
    assert kept["access_token"]
    assert kept["refresh_token"]
    # The next send carries the saved delegation: a reply at once, no step-up, no link.
    again = send(folder, delegated_card, "Show my orders", "--delegation", "acme.json")
    assert again.returncode == 0, again.stderr
    assert again.stdout == JANES_ORDERS
    continued(again.stderr)
    # A saved token the Provider refuses (expired, or here forged) is renewed with the saved
    # refresh token, with no person to ask, and the renewed tokens are saved in its place.
    forged = kept["access_token"].rsplit(".", 1)[0] + ".AAAA"
    saved.write_text(json.dumps({**kept, "access_token": forged}))
    renewed = send(folder, delegated_card, "Show my orders", "--delegation", "acme.json")
    assert renewed.returncode == 0, renewed.stderr
    assert renewed.stdout == JANES_ORDERS
    continued(renewed.stderr)
    assert json.loads(saved.read_text())["access_token"] not in (forged, "")
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    # Nothing to renew it with: one line, and --authorize asks the person again.
    saved.write_text(json.dumps({"access_token": forged}))
    refused = send(folder, delegated_card, "Show my orders", "--delegation", "acme.json")
    assert refused.returncode == 1, refused.stderr
    assert refused.stdout == ""
    assert refused.stderr == (
        "pactmw send: error: the delegation saved in acme.json was refused and cannot be "
        "renewed (its grant ended or was revoked); --authorize asks the person again\n"
    )
    running = authorizing(folder, delegated_card, "--delegation", "acme.json")
    person_decides(running.link(), scopes=["orders:read"], offered=["orders:read"])
    status, stdout, stderr = running.finish()
    assert (status, stdout) == (0, JANES_ORDERS), stderr
    assert json.loads(saved.read_text())["access_token"] != forged


def test_authorize_with_json_prints_only_the_final_answer_on_stdout(
    folder: Path, delegated_card: str
) -> None:
    """For a script: stdout is the A2A answer to the message, JSON alone; what the person
    must do (the link, the user code) is on stderr, as without --json."""
    running = authorizing(folder, delegated_card, "--json")
    person_decides(running.link(), scopes=["orders:read"], offered=["orders:read"])
    status, stdout, stderr = running.finish()
    assert status == 0, stderr
    answer = json.loads(stdout)
    assert list(answer) == ["message"], stdout
    assert answer["message"]["role"] == "ROLE_AGENT"
    assert answer["message"]["parts"] == [{"text": JANES_ORDERS.rstrip("\n")}]
    lines = stderr.splitlines()
    assert len(lines) == 3, stderr  # no `to continue` line: the JSON has the contextId
    assert lines[0].startswith("The Brand asks for orders:read on the user's account."), stderr
    assert lines[1].startswith("  http://127.0.0.1:"), stderr
    assert re.fullmatch(r"\(user code \S+; waiting up to \d+ s\)", lines[2]), stderr
    # The conversation goes on from the JSON's contextId (no delegation needed for this).
    context_id = answer["message"]["contextId"]
    again = send(folder, delegated_card, "It is A-1001", "--context-id", context_id)
    assert again.stdout == "Order A-1001 (walnut desk lamp) is shipped.\n", again.stderr


def test_authorize_when_the_person_denies_is_one_line(folder: Path, delegated_card: str) -> None:
    running = authorizing(folder, delegated_card, "--delegation", "denied.json")
    person_decides(running.link(), "deny", scopes=["orders:read"], offered=["orders:read"])
    status, stdout, stderr = running.finish()
    assert status == 1, stderr
    assert stdout == ""
    assert "Traceback" not in stderr
    assert stderr.splitlines()[3:] == [
        "pactmw send: error: the person denied the delegation; the Brand's agent did not answer"
    ]
    assert not (folder / "denied.json").exists()


def test_authorize_when_the_device_code_expires_is_one_line(folder: Path) -> None:
    """The Provider gives its device codes 1 s (`device_code_seconds`), no more than its poll
    interval: the client knows before its first poll that no decision can come in time."""
    with brand_login_provider(folder, "device_code_seconds = 1\n") as card:
        result = send(folder, card, "Show my orders", "--authorize")
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[2].endswith("; waiting up to 1 s)"), result.stderr
    [line] = lines[3:]
    assert line.startswith(
        "pactmw send: error: the person did not decide before the device code expired (user code "
    ), line
    assert line.endswith("); send again for a new link"), line


def test_authorize_when_the_device_endpoint_refuses_names_it(folder: Path) -> None:
    """The Provider allows one device authorization per agent user an hour: the step-up's
    own takes it, so the one --authorize asks for is refused (429 temporarily_unavailable)."""
    limit = "device_rate_limit = {{ per_user = 1, window = 3600 }}\n"  # a format template
    with brand_login_provider(folder, settings=limit) as card:
        result = send(folder, card, "Show my orders", "--authorize")
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    interface = card.removesuffix("/.well-known/agent-card.json")
    [line] = result.stderr.splitlines()  # no link: there is no device code to show
    said = re.escape(
        "pactmw send: error: the Brand's device authorization endpoint "
        f"({interface}/oauth/device_authorization) refused: temporarily_unavailable: too many "
        "device authorization requests for this agent user; retry after "
    )
    assert re.fullmatch(said + r"\d+ s \(HTTP 429\)", line), line


def test_authorize_for_a_scope_the_card_does_not_offer_is_one_line(folder: Path) -> None:
    """A Brand whose step-up asks for a scope its card does not list (the card changed, or
    the Brand is wrong): no device flow can ask for it, and `--authorize` says so in one line
    instead of ending in a ValueError's traceback."""
    site = StaticServer()
    try:
        card = delegated_card_document()
        interface = site.url("/a2a/acme")
        card["supportedInterfaces"][0]["url"] = interface
        flow = card["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]["flows"]
        flow["deviceCode"]["deviceAuthorizationUrl"] = site.url("/oauth/device_authorization")
        flow["deviceCode"]["tokenUrl"] = site.url("/oauth/token")
        step_up = {
            "task": {
                "id": "t-1",
                "contextId": "c-1",
                "status": {"state": "TASK_STATE_AUTH_REQUIRED"},
                "metadata": {
                    "pact.missingScopes": ["admin:all"],
                    "pact.verificationUriComplete": site.url("/consent?user_code=X"),
                },
            }
        }
        body = json.dumps(step_up).encode()
        a2a = {"Content-Type": "application/a2a+json"}
        site.route("/a2a/acme/message:send", Route(200, body, a2a))
        result = send(folder, site.json("/card", card), "Delete everything", "--authorize")
    finally:
        site.close()
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line == (
        f"pactmw send: error: {interface}: scopes not on the card: admin:all (a card fetched"
        " before the Brand added them? fetch it again)"
    ), line
    assert "/oauth/device_authorization" not in site.hits


def test_a_refusal_escapes_the_providers_words() -> None:
    """What a Provider says in its OAuth error is shown escaped, as all its text is: it can
    neither drive the terminal nor forge a line (`pactmw send` prints `refusal`'s line)."""
    from pactmw.cli._send_delegation import oauth_error, refusal
    from pactmw.client import OAuthErrorResponse, RateLimited

    token_url = "http://127.0.0.1:9/a2a/acme/oauth/token"
    error = OAuthErrorResponse(400, "invalid_grant\x1b[2J", "used\nup\u202e", url=token_url)
    assert refusal("token endpoint", error) == (
        f"the Brand's token endpoint ({token_url}) refused: invalid_grant\\x1b[2J: "
        "used\\nup\\u202e (HTTP 400)"
    )
    # A 429 whose body is no OAuth error keeps its own text (`retry after N s`).
    assert oauth_error(RateLimited(429, b"busy", (), retry_after=5.0)) is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("not json", "not a delegation saved by --authorize", id="not-json"),
        pytest.param('{"scope": "orders:read"}', "(no access_token)", id="no-token"),
        pytest.param(None, "cannot read", id="a-folder"),
        pytest.param("", "no such directory to save the delegation in", id="no-folder"),
    ],
)
def test_an_unusable_delegation_file_is_bad_usage(
    folder: Path, tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "delegation.json"
    if content is None:
        path.mkdir()
    elif content:
        path.write_text(content)
    else:  # no file, and no folder for --authorize to write it in
        path = tmp_path / "missing" / "delegation.json"
    result = send(folder, "http://127.0.0.1:9", "Hello", "--delegation", str(path))
    assert_one_line_error(result, expected)
    assert not content or content not in result.stderr  # a token file is never quoted
