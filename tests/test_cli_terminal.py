"""The `pactmw` command at a terminal or in a script: output into a closed pipe, Ctrl-C,
configuration files it cannot use, consoles that cannot show every character. Each ends
with the documented exit status and at most one line on stderr, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from pactmw.store import open_store
from tests.support.cli import PYTHON_M, assert_no_traceback, environment, run_in
from tests.support.folders import unwritable_folder
from tests.support.interrupt import Stopped, interrupt, start_interruptible
from tests.support.jwks_server import JwksServer, Mode
from tests.support.net import free_port
from tests.support.parties import ISSUER

CONFIG = """\
base_url = "https://shop.example"
audience = "https://shop.example/a2a"
store = "sqlite:///pactmw.db"

[brands.acme]
handler = "pactmw.demo:demo_bot"
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder with a private key (`agent.jwk`) and a configuration (`pactmw.toml`) whose
    sqlite store exists."""
    made = run_in(["keygen", "--out", "agent.jwk", "--jwks", "jwks.json"], tmp_path)
    assert made.returncode == 0, made.stderr
    (tmp_path / "pactmw.toml").write_text(CONFIG)
    open_store(f"sqlite:///{tmp_path / 'pactmw.db'}").close()
    return tmp_path


# -- output into a closed pipe -------------------------------------------------------------

CHECK = ["check", "URL", "--issuer", ISSUER, "--key", "agent.jwk", "--audience", "a"]
TOKEN = ["token", "--key", "agent.jwk", "--issuer", ISSUER, "--sub", "u", "--audience", "a"]


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["keygen", "--out", "new.jwk"], id="keygen"),
        pytest.param(TOKEN, id="token"),
        pytest.param(["agents", "list", "--config", "pactmw.toml"], id="agents-list"),
        pytest.param([*CHECK, "--json"], id="check-json"),
    ],
)
def test_output_into_a_closed_pipe_is_no_traceback(workdir: Path, argv: list[str]) -> None:
    """`pactmw ... | head -1`: the reader has gone before the command writes (its read end
    is closed before the command starts, so every write fails)."""
    read, write = os.pipe()
    os.close(read)
    try:
        with JwksServer() as server:  # no card there: every check fails, JSON is printed
            argv = [server.base_url if arg == "URL" else arg for arg in argv]
            result = run_in(argv, workdir, stdout=write)
    finally:
        os.close(write)
    assert_no_traceback(result.stderr)
    assert "BrokenPipeError" not in result.stderr
    assert result.returncode == 141, result.stderr  # as a shell reports a SIGPIPE death


@pytest.mark.parametrize(
    "argv", [pytest.param(TOKEN, id="token"), pytest.param([*CHECK, "--json"], id="check-json")]
)
def test_closed_stdout_is_no_traceback(workdir: Path, argv: list[str]) -> None:
    """`pactmw token ... >&-`: no stdout at all (Python's sys.stdout is None), so what the
    command prints goes nowhere, as it does for any Python program."""
    with JwksServer() as server:
        argv = [server.base_url if arg == "URL" else arg for arg in argv]
        result = subprocess.run(
            [*PYTHON_M, *argv],
            cwd=workdir,
            env=environment(),
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            preexec_fn=lambda: os.close(1),
        )
    assert_no_traceback(result.stderr)
    assert result.returncode in (0, 1), result.stderr  # 1: the checks fail (no card there)


# -- Ctrl-C ----------------------------------------------------------------------------------


def interrupted(argv: Sequence[str], cwd: Path, started: Callable[[], bool]) -> Stopped:
    """Run `pactmw ARGV`, send it SIGINT (Ctrl-C) once `started()` holds, and wait for it."""
    return interrupt(start_interruptible([*PYTHON_M, *argv], cwd=cwd, env=environment()), started)


def test_ctrl_c_during_check_of_a_slow_server(workdir: Path) -> None:
    with JwksServer() as server:
        server.delay = 60.0
        server.mode = Mode.SLOW  # the card request waits: the checker is waiting for it
        stopped = interrupted(
            [*CHECK[:1], server.base_url, *CHECK[2:]], workdir, lambda: server.total_hits > 0
        )
    assert_no_traceback(stopped.stderr)
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.stderr.splitlines()[-1] == "pactmw check: interrupted"
    assert stopped.stdout == ""


def test_ctrl_c_during_serve_startup(workdir: Path) -> None:
    """Interrupted while it imports a Brand's handler (one that takes its time)."""
    marker = workdir / "importing"
    (workdir / "slow_bot.py").write_text(
        f"import pathlib, time\n\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(60)\n"
    )
    (workdir / "pactmw.toml").write_text(CONFIG.replace("pactmw.demo:demo_bot", "slow_bot:bot"))
    stopped = interrupted(
        ["serve", "--config", "pactmw.toml", "--port", str(free_port())], workdir, marker.exists
    )
    assert_no_traceback(stopped.stderr)
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.stderr == "pactmw serve: interrupted\n"


#: The two launchers of `pactmw`, under `python -X importtime`, which reports each import on
#: stderr as it completes: the console script (`pactmw = "pactmw.cli:main"`) and `-m`.
IMPORT_TIMED = {
    "console-script": (
        sys.executable,
        "-X",
        "importtime",
        str(Path(sys.executable).parent / "pactmw"),
    ),
    "python-m": (sys.executable, "-X", "importtime", "-m", "pactmw"),
}


def interrupted_while_importing(
    launcher: Sequence[str], argv: Sequence[str], cwd: Path, nth: int
) -> Stopped:
    """Run `LAUNCHER ARGV` and send it SIGINT as soon as it has imported its `nth` module of
    pactmw; its stderr comes back without the import reports."""
    process = start_interruptible([*launcher, *argv], cwd=cwd, env=environment())
    assert process.stderr is not None
    said: list[str] = []

    def imported() -> bool:  # reads the import reports until the nth of pactmw
        count = 0
        while count < nth:
            line = process.stderr.readline() if process.stderr is not None else ""
            assert line, f"exited after {count} imports of pactmw: {said}"
            if line.startswith("import time:"):
                count += line.rsplit("|", 1)[-1].strip().split(".")[0] == "pactmw"
            else:
                said.append(line)
        return True

    stopped = interrupt(process, imported)
    said += [
        line
        for line in stopped.stderr.splitlines(keepends=True)
        if not line.startswith("import time:")
    ]
    return Stopped(stopped.returncode, stopped.stdout, "".join(said))


@pytest.mark.parametrize("launcher", IMPORT_TIMED)
@pytest.mark.parametrize("nth", [3, 40, 100])
def test_ctrl_c_while_pactmw_imports(workdir: Path, launcher: str, nth: int) -> None:
    """Ctrl-C at once after typing the command: pactmw is still importing (its first ~0.4 s).
    The check waits for a server that never answers, so the command is still running
    whenever the signal arrives: importing, or waiting."""
    with JwksServer() as server:
        server.delay = 60.0
        server.mode = Mode.SLOW
        argv = [*CHECK[:1], server.base_url, *CHECK[2:]]
        stopped = interrupted_while_importing(IMPORT_TIMED[launcher], argv, workdir, nth)
    assert_no_traceback(stopped.stderr)
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.stderr in ("pactmw: interrupted\n", "pactmw check: interrupted\n")
    assert stopped.stdout == ""


# -- configuration files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", ["serve", "agents list", "grants list", "cleanup"], ids=lambda c: c.replace(" ", "-")
)
def test_a_configuration_that_is_not_utf8_is_one_line(workdir: Path, command: str) -> None:
    (workdir / "pactmw.toml").write_bytes(CONFIG.replace("shop", "sh\xf6p").encode("latin-1"))
    result = run_in([*command.split(), "--config", "pactmw.toml"], workdir)
    assert_no_traceback(result.stderr)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"pactmw {command}: error: pactmw.toml is not UTF-8 text (byte 0xf6 at offset 22)\n"
    )
    assert result.stdout == ""


def test_serve_names_signing_keys_not_the_store(workdir: Path) -> None:
    """A public JWKS given as the Provider's signing key is a signing_keys error."""
    delegated = CONFIG + '[brands.acme.delegation]\nlogin_url = "/login"\nscopes = { a = "b" }\n'
    (workdir / "pactmw.toml").write_text('signing_keys = ["jwks.json"]\n' + delegated)
    result = run_in(["serve", "--config", "pactmw.toml", "--port", str(free_port())], workdir)
    assert_no_traceback(result.stderr)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("pactmw serve: error: signing_keys: jwks.json: "), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_serve_names_data_dir_for_the_development_key(workdir: Path) -> None:
    """No signing_keys: the development key is kept under data_dir, and a data_dir where it
    cannot be written is named (it was reported as a signing_keys error, with Python's
    `[Errno 13] ...` words)."""
    delegated = CONFIG + '[brands.acme.delegation]\nlogin_url = "/login"\nscopes = { a = "b" }\n'
    (workdir / "locked").mkdir()
    with unwritable_folder(workdir / "locked") as folder:
        (workdir / "pactmw.toml").write_text(f"data_dir = {str(folder / 'pactmw')!r}\n{delegated}")
        result = run_in(["serve", "--config", "pactmw.toml", "--port", str(free_port())], workdir)
    assert_no_traceback(result.stderr)
    assert result.returncode == 2, result.stderr
    keys = folder / "pactmw" / "keys"
    assert result.stderr.startswith(
        f"pactmw serve: error: data_dir: cannot write the development signing key to {keys}: "
    ), result.stderr
    assert "Errno" not in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


@pytest.mark.parametrize("missing", ["missing.jwk", "folder/missing.jwk"])
def test_serve_names_a_signing_key_file_it_cannot_read(workdir: Path, missing: str) -> None:
    delegated = CONFIG + '[brands.acme.delegation]\nlogin_url = "/login"\nscopes = { a = "b" }\n'
    (workdir / "pactmw.toml").write_text(f"signing_keys = [{missing!r}]\n{delegated}")
    result = run_in(["serve", "--config", "pactmw.toml", "--port", str(free_port())], workdir)
    assert_no_traceback(result.stderr)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"pactmw serve: error: signing_keys: cannot read {missing}: No such file or directory\n"
    )


# -- consoles that cannot show every character ---------------------------------------------

CAFE = """\
base_url = "http://127.0.0.1:{port}"
audience = "urn:aud"
store = "sqlite:///pactmw.db"
data_dir = "data"

allow_http_jwks_on_loopback = true

[[agents]]
issuer = "https://pa.example"
jwks_uri = "http://127.0.0.1:9/jwks.json"
name = "{agent}"

[brands.cafe]
name = "{brand}"
handler = "pactmw.demo:demo_bot"
"""


@pytest.fixture
def cafe(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Provider in this process whose Brand and agent have names beyond ASCII; its card URL."""
    from pactmw.adapters.asgi import A2AProviderApp
    from pactmw.provider import Provider, ProviderSettings, load_toml
    from tests.support.servers import uvicorn_server

    port = free_port()
    (workdir / "pactmw.toml").write_text(
        CAFE.format(port=port, brand=BRAND, agent=AGENT), encoding="utf-8"
    )
    monkeypatch.chdir(workdir)  # the relative store and data_dir, as the commands see them
    provider = Provider.from_settings(ProviderSettings.from_mapping(load_toml("pactmw.toml")))
    try:
        with uvicorn_server(A2AProviderApp(provider), port=port) as base_url:
            yield f"{base_url}/a2a/cafe/.well-known/agent-card.json"
    finally:
        provider.close()


BRAND, AGENT = "Caf\u00e9 Support \u2192 \u2713", "Zo\u00eb\u2019s agent"


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        pytest.param(["card", "CARD"], BRAND, id="card"),
        pytest.param(["card", "CARD", "--json"], BRAND, id="card-json"),
        # A failing check's expectation cites the spec: "(PACT \u00a73.4)".
        pytest.param([*CHECK[:1], "CARD", *CHECK[2:], "--json"], "\u00a7", id="check-json"),
        pytest.param(["agents", "list", "--config", "pactmw.toml"], AGENT, id="agents-list"),
        pytest.param(["agents", "list", "--config", "pactmw.toml", "--json"], AGENT, id="agents"),
    ],
)
def test_names_beyond_ascii_on_an_ascii_console(
    cafe: str, workdir: Path, argv: list[str], shown: str
) -> None:
    argv = [cafe if arg == "CARD" else arg for arg in argv]
    result = run_in(argv, workdir, PYTHONIOENCODING="ascii")
    assert_no_traceback(result.stderr)
    assert result.returncode in (0, 1), result.stderr  # 1: the checks of an unknown agent fail
    if "--json" in argv:
        # Valid JSON whatever the console can show, with the text as it is.
        assert shown in json.dumps(json.loads(result.stdout), ensure_ascii=False)
    else:
        assert shown.encode("ascii", "backslashreplace").decode() in result.stdout


# -- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_serve_port_out_of_range_is_a_usage_error(workdir: Path, port: str) -> None:
    result = run_in(["serve", "--config", "pactmw.toml", "--port", port], workdir)
    assert_no_traceback(result.stderr)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"pactmw serve: error: argument --port: must be a TCP port, 0 to 65535: {port!r}"
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("proxy.internal", "not an IP address or network: 'proxy.internal'", id="name"),
        pytest.param("10.0.0.0/33", "not an IP address or network: '10.0.0.0/33'", id="prefix"),
        pytest.param(
            "127.0.0.1, 10.0.0.7/8",
            "'10.0.0.7/8' has host bits set (the network is 10.0.0.0/8)",
            id="host-bits",
        ),
        pytest.param(
            "*,10.0.0.1",
            "not an IP address or network: '*' ('*' alone trusts every peer)",
            id="star-in-a-list",
        ),
    ],
)
def test_serve_forwarded_allow_ips_of_no_address_is_a_usage_error(
    workdir: Path, value: str, problem: str
) -> None:
    """uvicorn keeps an entry that is no IP address or network as a name no TCP peer has:
    a typo would trust no proxy, silently, and every client would count as the proxy."""
    argv = ["serve", "--config", "pactmw.toml", "--port", str(free_port())]
    result = run_in([*argv, "--forwarded-allow-ips", value], workdir)
    assert_no_traceback(result.stderr)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"pactmw serve: error: argument --forwarded-allow-ips: {problem}"
    )


def test_serve_forwarded_allow_ips_of_the_environment_is_checked_too(workdir: Path) -> None:
    """$FORWARDED_ALLOW_IPS (uvicorn's default for the option) gets the option's check."""
    argv = ["serve", "--config", "pactmw.toml", "--port", str(free_port())]
    result = run_in(argv, workdir, FORWARDED_ALLOW_IPS="proxy.internal")
    assert_no_traceback(result.stderr)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "pactmw serve: error: FORWARDED_ALLOW_IPS: not an IP address or network: 'proxy.internal'\n"
    )


def test_check_authorization_details_file_that_is_not_utf8(workdir: Path) -> None:
    (workdir / "details.json").write_bytes('[{"type": "caf\xe9"}]'.encode("latin-1"))
    argv = [*CHECK[:1], "http://127.0.0.1:9", *CHECK[2:], "--delegated"]
    result = run_in([*argv, "--authorization-details", "@details.json"], workdir)
    assert_no_traceback(result.stderr)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "pactmw check: error: cannot read --authorization-details details.json: "
        "not UTF-8 text (byte 0xe9 at offset 14)\n"
    )


# -- what a remote party wrote -------------------------------------------------------------------


def test_card_shows_control_characters_of_a_card_as_escapes(cafe: str, workdir: Path) -> None:
    """A Brand's card is the remote party's text: escape sequences, carriage returns and
    newlines in it must not reach the terminal, where they would recolour or clear it, or
    forge a line of the summary (`identity: ...`)."""
    import httpx

    card = httpx.get(cafe).json()
    card["name"] = "Acme\x1b[2J\ridentity:    forged\nPASS"
    card["description"] = "Orders\x07 and\x9b returns"
    with JwksServer() as site:
        site.set_json("/.well-known/agent-card.json", card)
        result = run_in(["card", site.base_url], workdir)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "Acme\\x1b[2J\\ridentity:    forged\\nPASS",
        "  Orders\\x07 and\\x9b returns",
    ]
    assert len(lines) == 6, lines  # name, description, card, interface, identity, delegation
    assert "\x1b" not in result.stdout
    assert "\r" not in result.stdout


def test_check_shows_control_characters_of_an_answer_as_escapes(cafe: str, workdir: Path) -> None:
    """A failing check quotes the Provider's answer: an escape sequence in it is shown."""
    import httpx

    card = httpx.get(cafe).json()
    with JwksServer() as site:
        for interface in card["supportedInterfaces"]:
            interface["url"] = f"{site.base_url}/a2a/cafe"
        site.set_json("/a2a/cafe/.well-known/agent-card.json", card)
        # An unmatched route must be 404: this one answers 200 with an escape sequence.
        site.set_body("/a2a/cafe/unknown", b"\x1b[2J\x1b]0;owned\x07 forged", "text/plain")
        argv = [*CHECK[:1], f"{site.base_url}/a2a/cafe/.well-known/agent-card.json", *CHECK[2:]]
        result = run_in(argv, workdir)
    assert result.returncode == 1, result.stderr
    (routes,) = [line for line in result.stdout.splitlines() if "(GET unknown)" in line]
    assert routes.endswith("body \\x1b[2J\\x1b]0;owned\\x07 forged"), routes
    assert "\x1b" not in result.stdout
    assert "\x07" not in result.stdout
