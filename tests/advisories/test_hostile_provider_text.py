"""What a hostile Provider writes never reaches the terminal of the person running `pactmw`
raw: escape sequences (`ESC [2J` clears the screen, `ESC ]0;...BEL` retitles the window, `ESC
]8;;` plants a hyperlink), carriage returns that overwrite a line, and bidirectional controls
that reorder what is shown ("Trojan Source"). Every case runs the command against a real
server on 127.0.0.1 that answers what the test tells it to."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.client import A2AErrorResponse, fetch_card
from pactmw.client.errors import ERROR_TEXT_LIMIT
from pactmw.protocols.a2a import ERROR_INFO_TYPE
from tests.client.support import Route, StaticServer, base_card, delegated_card
from tests.support.cli import assert_no_traceback, run_in

#: A screen clear, a window title, a hyperlink and a right-to-left override, in one string.
HOSTILE = "gone\x1b[2J\x1b]0;owned\x07\x1b]8;;https://evil.example\x1b\\here\u202eexe.txt"
#: What the person sees instead: every control as an escape.
SHOWN = "gone\\x1b[2J\\x1b]0;owned\\x07\\x1b]8;;https://evil.example\\x1b\\here\\u202eexe.txt"
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\u2066")


def assert_nothing_raw(text: str) -> None:
    for control in RAW:
        assert control not in text, (control, text)


@pytest.fixture
def site() -> Iterator[StaticServer]:
    server = StaticServer()
    yield server
    server.close()


def a2a_error(message: str) -> dict[str, object]:
    return {
        "error": {
            "code": 404,
            "status": "NOT_FOUND",
            "message": message,
            "details": [{"@type": ERROR_INFO_TYPE, "reason": "TASK_NOT_FOUND"}],
        }
    }


def test_card_error_quoting_the_providers_message_is_escaped(
    site: StaticServer, tmp_path: Path
) -> None:
    """The refusal's message comes from the Provider: the one error line shows it escaped."""
    url = site.json("/card", a2a_error(HOSTILE), status=404)
    result = run_in(["card", url], tmp_path)
    assert_no_traceback(result.stderr)
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"pactmw card: error: {url}: TASK_NOT_FOUND (404): {SHOWN}\n"
    assert_nothing_raw(result.stderr)


def test_a_card_error_names_the_card_url_once(site: StaticServer, tmp_path: Path) -> None:
    """The client's error names the URL it is about; the command adds it only when the error
    does not, so the line does not say it twice."""
    url = site.route("/card", Route(200, b"<html>", {"Content-Type": "text/html"}))
    result = run_in(["card", url], tmp_path)
    assert_no_traceback(result.stderr)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"pactmw card: error: {url}: the answer is not JSON (invalid JSON): a text/html page, not"
        " an Agent Card (is this the card's URL?)\n"
    )
    missing = site.url("/nowhere")
    result = run_in(["card", missing], tmp_path)
    assert result.stderr == (
        f"pactmw card: error: {missing}: HTTP 404 (is this the card's URL? A Brand's card is "
        "at its interface URL + /.well-known/agent-card.json: "
        "/a2a/{brand}/.well-known/agent-card.json)\n"
    )


def test_card_error_naming_a_redirect_target_is_escaped(site: StaticServer, tmp_path: Path) -> None:
    """A redirect's Location is the Provider's text too: an error naming where the card was
    fetched from must not colour the terminal with it."""
    url = site.redirect("/card", "/x\x1b[31mred")
    # The client sends the escape percent-encoded; the server sees it so.
    site.route("/x%1B[31mred", Route(200, b"<html>", {"Content-Type": "text/html"}))
    result = run_in(["card", url], tmp_path)
    assert_no_traceback(result.stderr)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"pactmw card: error: {url}: {site.base}/x\\x1b[31mred: "
        "the answer is not JSON (invalid JSON): a text/html page, not an Agent Card (is this the"
        " card's URL?)\n"
    )


def test_card_summary_escapes_bidirectional_controls(site: StaticServer, tmp_path: Path) -> None:
    """A right-to-left override in a card's name shows `Acme\u202eexe.txt` as `Acmetxt.exe`;
    an isolate leaves the rest of the line to the name's direction."""
    card = base_card(site.url("/a2a/acme"))
    card["name"] = "Acme\u202eexe.txt"
    card["description"] = "Orders \u2066and\u2069 returns"
    result = run_in(["card", site.json("/card", card)], tmp_path)
    assert result.returncode in (0, 1), result.stderr  # 1: no identity scheme on this card
    lines = result.stdout.splitlines()
    assert lines[:2] == ["Acme\\u202eexe.txt", "  Orders \\u2066and\\u2069 returns"]
    assert_nothing_raw(result.stdout)


def test_card_json_escapes_what_a_terminal_would_act_on(site: StaticServer, tmp_path: Path) -> None:
    """JSON escapes C0 controls itself; a C1 control (`\\x9b` is CSI on terminals that take
    8-bit controls) and bidirectional controls are escaped too, so the output stays the same
    JSON document and shows the same on a terminal."""
    card = base_card(site.url("/a2a/acme"))
    card["name"] = "Acme\u202eexe.txt"
    card["description"] = "Orders\x9b2J and\x1b[2J returns \u2066x\u2069"
    result = run_in(["card", site.json("/card", card), "--json"], tmp_path)
    assert result.returncode in (0, 1), result.stderr
    assert_nothing_raw(result.stdout)
    summary = json.loads(result.stdout)
    assert (summary["name"], summary["description"]) == (card["name"], card["description"])


def agent_answer(site: StaticServer, tmp_path: Path, answer: dict[str, object]) -> list[str]:
    """`pactmw send` argv to a Brand on `site` whose `message:send` answers `answer`, with a
    key made in `tmp_path`."""
    made = run_in(["keygen", "--out", "agent.jwk"], tmp_path)
    assert made.returncode == 0, made.stderr
    site.json("/a2a/acme/message:send", answer)
    card = site.json("/card", base_card(site.url("/a2a/acme")))
    options = ["--key", "agent.jwk", "--issuer", "https://pa.example", "--sub", "u"]
    return ["send", card, "Hello", *options, "--audience", "a"]


def test_a_reply_and_its_context_id_are_escaped(site: StaticServer, tmp_path: Path) -> None:
    """The agent's text keeps its line breaks, each line escaped; the context id, which the
    Provider chose, is escaped on stderr too."""
    message = {
        "messageId": "m-1",
        "contextId": "c\x1b[2J-1",
        "role": "ROLE_AGENT",
        "parts": [{"text": f"first\n{HOSTILE}\rsecond"}],
    }
    argv = agent_answer(site, tmp_path, {"message": message})
    result = run_in(argv, tmp_path)
    assert_no_traceback(result.stderr)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"first\n{SHOWN}\\rsecond\n"
    assert result.stderr == "to continue: --context-id c\\x1b[2J-1\n"
    as_json = run_in([*argv, "--json"], tmp_path)
    assert_nothing_raw(as_json.stdout)
    assert json.loads(as_json.stdout) == {"message": message}


def test_a_step_up_line_is_escaped(site: StaticServer, tmp_path: Path) -> None:
    task = {
        "id": "t-1",
        "contextId": "c-1",
        "status": {
            "state": "TASK_STATE_AUTH_REQUIRED",
            "message": {"role": "ROLE_AGENT", "parts": [{"text": HOSTILE}]},
        },
        "metadata": {
            "pact.missingScopes": [HOSTILE],
            "pact.verificationUriComplete": site.url("/consent?code=\u202e"),
        },
    }
    result = run_in(agent_answer(site, tmp_path, {"task": task}), tmp_path)
    assert_no_traceback(result.stderr)
    assert result.returncode == 1, result.stderr
    assert result.stdout == f"{SHOWN}\n"
    [line] = result.stderr.splitlines()
    assert f"the Brand asks for {SHOWN} on the user's account" in line
    assert f"approves at {site.url('/consent?code=')}\\u202e, then" in line
    assert_nothing_raw(result.stderr)


def test_the_device_flows_link_and_user_code_are_escaped(
    site: StaticServer, tmp_path: Path
) -> None:
    """`send --authorize` prints the device authorization's link and user code, which the
    Provider chose, for the person: escaped on stderr, as its error line is."""
    argv = agent_answer(site, tmp_path, {"task": {
        "id": "t-1",
        "contextId": "c-1",
        "status": {"state": "TASK_STATE_AUTH_REQUIRED"},
        "metadata": {
            "pact.missingScopes": ["a:read"],
            "pact.verificationUriComplete": site.url("/consent"),
        },
    }})  # fmt: skip
    card = delegated_card()
    card["supportedInterfaces"] = base_card(site.url("/a2a/acme"))["supportedInterfaces"]
    flow = card["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]["flows"]
    flow["deviceCode"]["deviceAuthorizationUrl"] = site.url("/device_authorization")
    flow["deviceCode"]["tokenUrl"] = site.url("/token")
    del card["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]["oauth2MetadataUrl"]
    argv[1] = site.json("/card", card)
    site.json("/device_authorization", {
        "device_code": "d-1",
        "user_code": "WDJB-MJHT",
        "verification_uri": site.url("/device"),
        "verification_uri_complete": site.url("/device?code=\u202e"),
        "expires_in": 1,  # shorter than the interval: no poll, the code expires first
        "interval": 5,
    })  # fmt: skip
    result = run_in([*argv, "--authorize"], tmp_path)
    assert_no_traceback(result.stderr)
    assert result.returncode == 1, result.stderr
    assert_nothing_raw(result.stderr)
    assert f"  {site.url('/device?code=')}\\u202e\n" in result.stderr
    assert "(user code WDJB-MJHT; waiting up to 1 s)" in result.stderr


# -- text without end ----------------------------------------------------------------------------

#: A refusal whose message is 3 MB: within the 4 MiB a client reads, far past a line.
FLOOD = "x" * 3_000_000


def test_an_error_quoting_megabytes_is_one_bounded_line(site: StaticServer, tmp_path: Path) -> None:
    url = site.json("/card", a2a_error(FLOOD), status=404)
    result = run_in(["card", url], tmp_path)
    assert_no_traceback(result.stderr)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"pactmw card: error: {url}: TASK_NOT_FOUND (404): xxx")
    said = f"{url}: TASK_NOT_FOUND (404): "  # the error names its URL itself
    assert result.stderr.endswith(f"...({len(said) + len(FLOOD)} chars)\n")
    assert len(result.stderr) < 2 * ERROR_TEXT_LIMIT, len(result.stderr)


def test_a_check_failing_on_megabytes_is_one_bounded_line(
    site: StaticServer, tmp_path: Path
) -> None:
    """`pactmw check` quotes the error its card fetch raised in the FAIL line."""
    made = run_in(["keygen", "--out", "agent.jwk"], tmp_path)
    assert made.returncode == 0, made.stderr
    url = site.json("/card", a2a_error(FLOOD + "\x1b[2J"), status=404)
    argv = ["--issuer", "https://pa.example", "--key", "agent.jwk", "--audience", "a"]
    result = run_in(["check", url, *argv], tmp_path)
    assert_no_traceback(result.stderr)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1].endswith("failed"), lines[-1]
    for line in lines:
        assert len(line) < 2 * ERROR_TEXT_LIMIT, line[:200]
    assert any(f"TaskNotFound: {url}: TASK_NOT_FOUND (404): xxx" in line for line in lines), lines
    assert_nothing_raw(result.stdout)


def test_a_client_error_says_megabytes_in_bounded_escaped_text(site: StaticServer) -> None:
    """What a program logs of a client error (`str(exc)`) is bounded and escaped as log lines
    are; the attributes keep the Provider's text whole."""
    url = site.json("/card", a2a_error(FLOOD + "\x1b[2J\u202e"), status=404)
    with pytest.raises(A2AErrorResponse) as caught:
        fetch_card(url)
    assert caught.value.message == FLOOD + "\x1b[2J\u202e"
    escaped = f"{url}: TASK_NOT_FOUND (404): " + FLOOD + "\\x1b[2J\\u202e"
    marker = f"...({len(escaped)} chars)"
    assert str(caught.value) == escaped[:ERROR_TEXT_LIMIT] + marker
