"""Generated hostile requests against every route on every adapter, over real servers.

`test_properties.py` feeds arbitrary requests to `Provider.handle` in-process; this module
sends generated requests as raw bytes over real sockets to the six servers of the adapter
contract suite (Starlette and FastAPI on uvicorn, plain WSGI and Flask on Werkzeug, Django
under runserver and under uvicorn: `contract_harness`, its Brand speaking Poppy too), so
what each framework and each adapter's translation does to a hostile request is under test
too: percent-encoding and dot segments in paths, odd methods and query strings, repeated,
non-ASCII and long headers, lying `Content-Type` and `Content-Length`, chunked bodies, and
bodies of random bytes, broken or hostile JSON, valid `message:send` bodies with one field
of another JSON type, and token and consent forms with one field wrong or repeated.

Every answer must come within `ANSWER_TIMEOUT`, below 500, with no traceback or secret, in
its route's error format (the A2A envelope, RFC 6749 JSON, Poppy's JSON errors, the exact
PACT challenge on an empty 401, HTML pages, no redirect off the site). Every example goes
to all six servers, which must answer it alike: the same status and the same A2A reason,
OAuth or Poppy error, or Parafé code. Requests that are not valid HTTP/1.1
(`Hostile.valid_http`) are answered by each HTTP server its own way, so only the first
three rules hold for them. And no spelling of a guarded path (dot segments, encodings, case,
trailing junk) reaches its view without a valid credential, on any server.

Examples are derandomized (the same on every run) and bounded: `GENERATED_EXAMPLES` per
property, each sent to six servers (6 x 60 x 6 requests: 8 s for the module at a load
average of 1.5, 14 s at 8, on 2 cores). Set `PACTMW_GENERATED_EXAMPLES` for a longer hunt
(500 passed).
Findings so far, each pinned by an explicit case (`tests/adapters/test_contract.py` unless
said): a `Content-Length` that is not digits was a 500 at Django's Parafé endpoints; an
upload that ended before its `Content-Length` was a 500 from the plain WSGI adapter; Flask
answered methods outside its rule with its own 405 page instead of the Provider's empty
404, and routed before guarding, so its 404 told an anonymous caller which paths under the
guarded prefix exist; Poppy answered a repeated `Authorization` 400 on ASGI and 401 on
WSGI, whose servers join repeated lines (`tests/poppy/test_requests.py`).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from pactmw.protocols.a2a import A2A_REASONS
from pactmw.protocols.parafe import EXTENSION_URI
from pactmw.provider.delegated import DEVICE_CODE_GRANT
from tests.adapters.contract_harness import BASE_URL, POPPY, SERVERS, Harness, harness
from tests.support.parties import ISSUER

pytestmark = pytest.mark.timeout(300)

#: How long a server may take to answer one request before it counts as a hang (seconds).
ANSWER_TIMEOUT = 10.0
GENERATED_EXAMPLES = int(os.environ.get("PACTMW_GENERATED_EXAMPLES", "60"))
GENERATED = settings(
    max_examples=GENERATED_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    # No shrinking: each step is a round trip to six servers (and a hang costs a timeout);
    # the failing request is printed whole.
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
#: Rate limits no run reaches: each server answers every example on its merits (one that
#: refused more requests at the HTTP level would otherwise hit a limit later than others).
UNLIMITED = {
    name: {"per_agent": 10**9, "per_user": 10**9, "window": 60}
    for name in ("rate_limit", "consent_rate_limit", "device_rate_limit", "token_rate_limit")
}
#: The Provider's bare answers (no body): no route, 411 (Django under WSGI and a chunked
#: body), 413, 429.
BARE_STATUSES = (404, 411, 413, 429)
CHALLENGES = {'Bearer realm="a2a"', 'Bearer realm="a2a", error="invalid_token"'}
A2A_MEDIA_TYPE = "application/a2a+json"
#: Text no answer may hold: tracebacks, debug pages, the Django test site's secret key.
LEAKS = (
    b"Traceback",
    b'File "/',
    b"site-packages",
    b"Werkzeug Debugger",
    b"pactmw-adapter-tests-not-a-secret",
)


# -- one raw HTTP/1.1 exchange ---------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """A server's answer (status 0: it closed the connection without one)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]


@dataclass(frozen=True)
class Hostile:
    """One request exactly as it goes on the wire (`Host` and `Connection: close` added).

    `length` is the `Content-Length` sent (None: the true one; empty: none); `half_close`
    ends the upload after the request (for a body shorter than declared); `chunk_size`
    sends the body chunked instead.
    """

    method: str
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""
    length: bytes | None = None
    half_close: bool = False
    chunk_size: int = 0

    def __repr__(self) -> str:
        def cut(data: bytes) -> str:
            return repr(data if len(data) <= 120 else data[:100] + b"...(%d bytes)" % len(data))

        headers = ", ".join(f"{cut(name)}: {cut(value)}" for name, value in self.headers)
        return (
            f"Hostile({self.method} {cut(self.target)} [{headers}] body={cut(self.body)}"
            f" length={self.length!r} half_close={self.half_close} chunks={self.chunk_size})"
        )

    @property
    def valid_http(self) -> bool:
        """Whether this is valid HTTP/1.1: a true length, a request-target of visible ASCII,
        header values without control characters. uvicorn refuses anything else itself while
        Werkzeug may pass it on, so answers to it may differ (but stay prompt and < 500)."""
        true_length = self.length is None or (self.length == b"" and not self.body)
        visible_target = all(0x21 <= byte <= 0x7E for byte in self.target)
        clean_values = not any(
            (byte < 0x20 and byte != 0x09) or byte == 0x7F
            for _, value in self.headers
            for byte in value
        )
        return true_length and visible_target and clean_values

    def wire(self, host: str) -> bytes:
        head = [self.method.encode("latin-1") + b" " + self.target + b" HTTP/1.1"]
        head.append(b"Host: " + host.encode("ascii"))
        head.extend(name + b": " + value for name, value in self.headers)
        body = self.body
        if self.chunk_size:
            head.append(b"Transfer-Encoding: chunked")
            size = self.chunk_size
            pieces = [body[i : i + size] for i in range(0, len(body), size)]
            body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
            body += b"0\r\n\r\n"
        else:
            length = str(len(body)).encode() if self.length is None else self.length
            if length:
                head.append(b"Content-Length: " + length)
        head.append(b"Connection: close")
        return b"\r\n".join(head) + b"\r\n\r\n" + body


def exchange(base: str, request: Hostile) -> Answer:
    """Send `request` to the server at `base` on a new connection and read its answer."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT) as sock:
        try:
            sock.sendall(request.wire(f"{host}:{port}"))
            if request.half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered (and closed) before taking the whole request
        data = b""
        while not complete(data, request.method):
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                hang = f"no answer in {ANSWER_TIMEOUT} s from {base}: {request!r}"
                raise AssertionError(hang) from None
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    return parse_answer(data)


def _final_head(data: bytes) -> tuple[bytes, bool, bytes]:
    """The head of the final answer (after interim ones, `100 Continue`), found, the rest."""
    head, found, rest = data.partition(b"\r\n\r\n")
    while found and head.startswith(b"HTTP/1.1 1"):
        head, found, rest = rest.partition(b"\r\n\r\n")
    return head, bool(found), rest


def complete(data: bytes, method: str) -> bool:
    """Whether `data` holds a whole answer: a server may keep the connection open after
    answering (Werkzeug while a body it did not read is still arriving)."""
    head, found, body = _final_head(data)
    if not found:
        return False
    status_line, *lines = head.decode("latin-1").lower().split("\r\n")
    if method == "HEAD" or status_line.split(" ")[1] in ("204", "304"):
        return True
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip() == "content-length":
            return len(body) >= int(value)
        if name.strip() == "transfer-encoding" and "chunked" in value:
            return body.endswith(b"0\r\n\r\n")
    return False


def parse_answer(data: bytes) -> Answer:
    head, found, body = _final_head(data)
    if not found:
        return Answer(0, (), b"")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = tuple(
        (name.strip().lower(), value.strip())
        for name, _, value in (line.partition(":") for line in lines)
    )
    if ("transfer-encoding", "chunked") in headers:
        body = dechunk(body)
    return Answer(int(status_line.split(" ")[1]), headers, body)


def dechunk(data: bytes) -> bytes:
    body = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        body, data = body + data[:size], data[size + 2 :]
    return body


# -- the six servers -------------------------------------------------------------------------


@dataclass
class Servers:
    harness: Harness
    bases: dict[str, str]
    #: Per server: placeholder -> its genuine value there (a delegation lives in one store).
    fills: dict[str, dict[bytes, bytes]]
    #: What no answer may ever hold (the Provider's private signing key).
    secrets: tuple[bytes, ...]
    pool: ThreadPoolExecutor

    def send(self, request: Hostile) -> dict[str, Answer]:
        """`request` to every server at once, placeholders filled with that server's values."""
        pact = next(iter(self.harness.targets.values())).token().encode()  # valid for 2 min
        futures = {
            name: self.pool.submit(
                exchange, base, fill(request, {b"<pact>": pact, **self.fills[name]})
            )
            for name, base in self.bases.items()
        }
        return {name: future.result() for name, future in futures.items()}


def fill(request: Hostile, values: Mapping[bytes, bytes]) -> Hostile:
    def put(data: bytes) -> bytes:
        for placeholder, value in values.items():
            data = data.replace(placeholder, value)
        return data

    headers = tuple((put(name), put(value)) for name, value in request.headers)
    return replace(request, target=put(request.target), headers=headers, body=put(request.body))


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    # The Brand also speaks Poppy (its own site: `shop.example`), so its routes are under test.
    with harness(tmp_path_factory.mktemp("generated"), UNLIMITED, POPPY) as started:
        targets = {name: started.get(name) for name in SERVERS}
        fills = {
            name: {b"<delegation>": target.delegation("orders:read")[0].encode()}
            for name, target in targets.items()
        }
        private = json.loads((started.workdir / "signing.jwk").read_text())["d"]
        with ThreadPoolExecutor(max_workers=len(targets)) as pool:
            yield Servers(
                harness=started,
                bases={name: str(t.client.base_url).rstrip("/") for name, t in targets.items()},
                fills=fills,
                secrets=(private.encode(),),
                pool=pool,
            )


# -- what every answer must be -----------------------------------------------------------------


def check_answer(
    name: str, kind: str, request: Hostile, answer: Answer, secrets: Sequence[bytes]
) -> None:
    """One server's answer: prompt, below 500, no leak, in the error format of `kind`."""
    where = (name, request, answer.status, answer.header("content-type"), answer.body[:300])
    assert answer.status != 0 or request.half_close, where
    assert answer.status < 500, where
    for leak in (*LEAKS, *secrets):
        assert leak not in answer.body, where
    if not request.valid_http:
        return  # the HTTP server's own refusal, in its own format
    if kind == "oauth" and answer.status >= 400 and answer.status not in BARE_STATUSES:
        if answer.status == 401 and not answer.body:  # no PACT JWT
            assert answer.header("www-authenticate")[0] in CHALLENGES, where
        else:  # RFC 6749 §5.2 (401 `invalid_client` too)
            assert answer.header("content-type") == ["application/json"], where
            assert isinstance(json.loads(answer.body)["error"], str), where
    elif answer.status == 401 and kind != "poppy":
        assert len(answer.header("www-authenticate")) == 1, where
        assert answer.header("www-authenticate")[0] in CHALLENGES, where
        assert answer.body == b"", where
    elif kind == "a2a" and answer.status >= 400 and answer.body:
        assert answer.header("content-type") == [A2A_MEDIA_TYPE], where
        error = json.loads(answer.body)["error"]
        (detail,) = error["details"]
        assert A2A_REASONS[detail["reason"]][0] == answer.status == error["code"], where
    elif kind == "poppy" and answer.status >= 400 and answer.status not in BARE_STATUSES:
        assert answer.header("content-type") == ["application/json"], where
        assert isinstance(json.loads(answer.body)["error"], str), where
        # A 401 challenges DPoP, or is a client's `invalid_client` (RFC 6749 §5.2).
        challenges = answer.header("www-authenticate")
        assert all(challenge.startswith("DPoP ") for challenge in challenges), where
    elif kind == "page" and answer.status >= 400 and answer.body:
        assert answer.header("content-type")[0].startswith("text/html"), where
    if kind == "page" and 300 <= answer.status < 400:
        # Never a redirect off the site (an open redirect), whatever the request said.
        (location,) = answer.header("location")
        assert location.startswith(f"{BASE_URL}/") or (
            location.startswith("/") and not location.startswith("//")
        ), where


def outcome(kind: str, answer: Answer) -> tuple[int, str]:
    """What must be the same on every server: the status and the protocol's error code."""
    code = ""
    data: Any = None
    if answer.status >= 400 and answer.body:
        try:
            data = json.loads(answer.body)
        except ValueError:
            data = None
    if isinstance(data, dict):
        # The contract apps' own error bodies (kind "guard") differ by framework.
        error = data.get("error") if kind != "guard" else None
        if isinstance(error, dict):
            code = str(error["details"][0]["reason"])
        elif isinstance(error, str):
            code = error
        elif isinstance(data.get("message"), dict):
            parafe = data["message"].get("metadata", {}).get(EXTENSION_URI, {})
            code = str(parafe.get("error", {}).get("code", ""))
    return answer.status, code


def check_all(servers: Servers, kind: str, request: Hostile) -> None:
    answers = servers.send(request)
    for name, answer in answers.items():
        check_answer(name, kind, request, answer, servers.secrets)
    if not request.valid_http:
        return
    outcomes = {name: outcome(kind, answer) for name, answer in answers.items()}
    event(f"{kind}: {outcomes['starlette']}")  # --hypothesis-show-statistics
    if request.chunk_size and outcomes["django-wsgi"][0] == 411:
        # Django under WSGI cannot read a chunked body and asks for a length (the README's
        # documented limitation); the other five must still agree.
        del outcomes["django-wsgi"]
    assert len(set(outcomes.values())) == 1, (request, outcomes)


# -- strategies ------------------------------------------------------------------------------------

#: (method, path below `/a2a/{brand}/`) of every route the Provider serves.
A2A_ROUTES = [
    ("POST", "message:send"), ("POST", "message:stream"), ("GET", "tasks"),
    ("GET", "tasks/t-1"), ("POST", "tasks/t-1:cancel"), ("POST", "tasks/t-1:subscribe"),
    ("GET", "tasks/t-1/pushNotificationConfigs"), ("POST", "tasks/t-1/pushNotificationConfigs"),
    ("DELETE", "tasks/t-1/pushNotificationConfigs/c-1"), ("GET", "extendedAgentCard"),
    ("GET", ".well-known/agent-card.json"),
]  # fmt: skip
OAUTH_ROUTES = [
    ("POST", "oauth/device_authorization"), ("POST", "oauth/token"), ("POST", "oauth/token"),
    ("GET", "oauth/.well-known/oauth-authorization-server"), ("GET", "oauth/jwks.json"),
]  # fmt: skip
PAGE_ROUTES = [
    ("GET", "oauth/consent"), ("POST", "oauth/consent"), ("POST", "oauth/consent/decision"),
    ("GET", "oauth/connected"), ("GET", "oauth/agents"), ("POST", "oauth/agents"),
]  # fmt: skip
#: Poppy's routes below the Brand's issuer. (Its root documents, `poppy.json` and the RFC
#: 8414 metadata, are served where an app mounts them, which the contract apps do each
#: their own way: tests/poppy/test_discovery_serving.py.)
POPPY_ROUTES = [
    ("POST", "poppy/token"), ("POST", "poppy/token"), ("POST", "poppy/revoke"),
    ("POST", "poppy/device"), ("POST", "poppy/feedback"), ("GET", "poppy/conversations"),
    ("POST", "poppy/conversations"), ("GET", "poppy/conversations/c-1"),
    ("POST", "poppy/conversations/c-1/messages"), ("POST", "poppy/operations/op_1/confirm"),
]  # fmt: skip
#: The contract apps' own routes (absolute paths), behind each adapter's middleware and
#: decorators: `/api/` guarded by the middleware, the rest by decorators. (Not `POST
#: /api/echo`: that view parses the body with the app's own `json.loads`.)
GUARD_ROUTES = [
    ("GET", "/api/echo"), ("GET", "/api/scoped-sync"), ("GET", "/decorated-sync"),
    ("GET", "/optional"), ("GET", "/api/scoped-sync"), ("POST", "/parafe-sync"),
]  # fmt: skip
OTHER_METHODS = ["GET", "POST", "PUT", "HEAD", "OPTIONS", "PATCH", "DELETE", "FOO"]
BRANDS = ["acme"] * 12 + ["%61cme", "nobody", "ACME", "acme%2F"]
DOT_SEGMENTS = ["/.", "/x/..", "/.//", "/%2e", "/%2E%2E/acme"]
PATH_TAILS = ["/", "/.", "/..", "/./x", "//", "%2F", "%00", "%FF", "%C3%A9", "é", "\x7f", ";x=1"]
TASK_IDS = ["%FF", "%ED%A0%80", "é", "%00", "a" * 3000, "%2F", "..", "t-1%3Acancel", "%25"]
QUERIES = [
    "pageSize=5", "pageSize=0", "pageSize=-1", "pageSize=1e9", "pageSize=%FF", "a=1&a=2",
    "user_code=BCDF-GHJK", "user_code=%00", "user_code=" + "B" * 5000, "&&&", "=", "%",
]  # fmt: skip

#: Header values and query text: mostly visible ASCII and obs-text (valid HTTP, so every
#: server must answer alike), sometimes control characters too (`Hostile.valid_http`).
printable = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=40,
)
latin1 = st.one_of(
    *[printable] * 9,
    st.text(alphabet=st.characters(max_codepoint=255, exclude_characters="\r\n"), max_size=40),
)
header_names = st.text(
    alphabet="!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    min_size=1,
    max_size=20,
)


def encode_some(path: str, picks: list[int]) -> str:
    """`path` with the characters at `picks` percent-encoded once (servers decode them
    once), never a `/` nor part of an escape already there."""
    chars = list(path)
    for pick in picks:
        index = pick % len(chars)
        escaped = "%" in chars[max(0, index - 2) : index + 1]
        if len(chars[index]) == 1 and chars[index] != "/" and not escaped:
            chars[index] = "".join(f"%{byte:02X}" for byte in chars[index].encode())
    return "".join(chars)


@st.composite
def request_targets(draw: st.DrawFn, route: str) -> bytes:
    """A request-target for `route`: encoded, dot segments, junk at the end, odd task ids,
    and a query. The host apps route their own paths (`/api/...`) each in their
    framework's way (Starlette refuses a method Django's views take), so only
    percent-encoding varies there."""
    own = route.startswith("/")
    path = route if own else f"/a2a/{draw(st.sampled_from(BRANDS))}/{route}"
    # Mostly the route itself, so the answers come from its flow, not from routing.
    choice = draw(st.sampled_from(range(11 if own else 13)))
    if choice in (7, 10):
        path = encode_some(path, draw(st.lists(st.integers(0, 200), min_size=1, max_size=3)))
    elif own:
        pass
    elif choice == 8:
        position = "/".join(path.split("/")[: draw(st.integers(2, 3))])
        path = position + draw(st.sampled_from(DOT_SEGMENTS)) + path[len(position) :]
    elif choice == 9:
        path += draw(st.sampled_from(PATH_TAILS))
    elif choice > 10:
        path = path.replace("t-1", draw(st.sampled_from(TASK_IDS)))
    query = draw(
        st.one_of(
            *[st.just("")] * 4,
            st.sampled_from(QUERIES),
            latin1.map(lambda text: quote(text, safe="=&")),
            latin1.map(lambda text: text.replace(" ", "+").replace("#", "")),
        )
    )
    return (path + ("?" + query if query else "")).encode("utf-8")


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)

#: A valid `message:send` body (a new conversation); `m-1` becomes a fresh id per example.
VALID_MESSAGE: dict[str, Any] = {
    "message": {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"text": "Where is my order A-1001?"}],
        "metadata": {},
        "extensions": [],
    },
    "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 1, "blocking": True},
    "metadata": {},
}
#: The fields a generated body sets to another JSON value (a missing one is added).
MESSAGE_FIELDS = [
    ("message",), ("message", "messageId"), ("message", "role"), ("message", "parts"),
    ("message", "parts", 0), ("message", "parts", 0, "text"), ("message", "parts", 0, "data"),
    ("message", "parts", 0, "url"), ("message", "contextId"), ("message", "taskId"),
    ("message", "metadata"), ("message", "extensions"), ("message", "referenceTaskIds"),
    ("configuration",), ("configuration", "acceptedOutputModes"),
    ("configuration", "historyLength"), ("configuration", "blocking"), ("metadata",),
]  # fmt: skip
#: A token request as JSON (RFC 6749 wants a form: a client may send JSON all the same).
TOKEN_REQUEST = {"client_id": ISSUER, "grant_type": DEVICE_CODE_GRANT, "device_code": "dc_x"}


def with_field(document: Any, path: Sequence[str | int], value: Any) -> bytes:
    copy = json.loads(json.dumps(document))
    here = copy
    for step in path[:-1]:
        here = here[step]
    here[path[-1]] = value
    return json.dumps(copy).encode()


HOSTILE_JSON = [
    b"[" * 5000 + b"]" * 5000,
    b'{"message":' * 2000 + b"1" + b"}" * 2000,
    b'{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"x"}]},"message":1}',
    b'{"message":{"messageId":"m-1","messageId":"m-2","role":"ROLE_USER","parts":[]}}',
    b'{"message":{"messageId":' + b"9" * 5000 + b',"role":"ROLE_USER","parts":[]}}',
    b'{"message":{"messageId":1e999,"role":"ROLE_USER","parts":[]}}',
    b'{"message":{"messageId":NaN,"role":"ROLE_USER","parts":[]}}',
    b'{"message":{"messageId":"\\ud800","role":"ROLE_USER","parts":[{"text":"\\udfff"}]}}',
    b'\xef\xbb\xbf{"message":{}}',
    b'{"message":{"messageId":"m\x00","role":"ROLE_USER","parts":[{"text":"\xff"}]}}',
    json.dumps(VALID_MESSAGE).encode("utf-16"),
    b"null",
    b"",
]
json_bodies = st.one_of(
    st.builds(with_field, st.just(VALID_MESSAGE), st.sampled_from(MESSAGE_FIELDS), json_values),
    st.just(json.dumps(VALID_MESSAGE).encode()),
    st.integers(1, 80).map(lambda cut: json.dumps(VALID_MESSAGE).encode()[:-cut]),
    st.sampled_from(HOSTILE_JSON),
    st.binary(max_size=300),
    json_values.map(lambda value: json.dumps(value).encode()),
)

FORM_FIELDS = [
    "client_id", "scope", "grant_type", "device_code", "refresh_token", "session", "decision",
    "user_code", "resource", "authorization_details", "assertion", "agent", "csrf",
]  # fmt: skip
VALID_FORMS: list[dict[str, str]] = [
    {"client_id": ISSUER, "scope": "orders:read"},
    {"client_id": ISSUER, "grant_type": DEVICE_CODE_GRANT, "device_code": "dc_x"},
    {"client_id": ISSUER, "grant_type": "refresh_token", "refresh_token": "rt_x"},
    {"session": "s", "decision": "allow", "scope": "orders:read"},
    {"user_code": "BCDF-GHJK"},
]
form_bodies = st.one_of(
    st.sampled_from(VALID_FORMS).map(lambda form: urlencode(form).encode()),
    st.builds(
        lambda form, name, value: urlencode({**form, name: value}).encode(),
        st.sampled_from(VALID_FORMS),
        st.sampled_from(FORM_FIELDS),
        latin1,
    ),
    st.builds(
        lambda form, name: (urlencode(form) + f"&{name}={name}&{name}=x").encode(),
        st.sampled_from(VALID_FORMS),
        st.sampled_from(FORM_FIELDS),
    ),
    st.builds(
        with_field,
        st.just(TOKEN_REQUEST),
        st.sampled_from(FORM_FIELDS).map(lambda name: (name,)),
        json_values,
    ),
    st.sampled_from([b"%", b"%zz=1", b"a=%FF", b"&&=&", b"=" * 100, b"a" * 70_000, b"\xff=\x00"]),
    st.binary(max_size=200),
    json_bodies,
)

FORM = b"application/x-www-form-urlencoded"
CONTENT_TYPES = [
    b"application/json", b"application/a2a+json", b"application/x-www-form-urlencoded",
    b"application/x-www-form-urlencoded; charset=utf-16", b"application/json; charset=latin-1",
    b"text/plain", b"multipart/form-data; boundary=x", b"", b"\xff\xfe",
    b"application/a2a+json, text/html",
]  # fmt: skip
AUTHORIZATIONS = [
    *[b"Bearer <pact>"] * 10, None, b"Bearer", b"Bearer <pact> x",
    b"bearer <pact>", b"Basic YTpi", b"Bearer \xe9\xff", b"Bearer " + b"a" * 9000,
    b"Bearer <pact>\x00", b"Bearer  <pact>", b"DPoP <pact>",
]  # fmt: skip
DELEGATIONS = [
    *[None] * 6, *[b"<delegation>"] * 3, b"Bearer x.y.z", b"<delegation>\xe9", b"",
    b"Bearer " + b"b" * 9000,
]  # fmt: skip
OTHER_HEADERS = [
    "Cookie", "Origin", "X-Forwarded-For", "Accept", "A2A-Extensions", "X-A2A-Extensions",
    "Expect", "Idempotency-Key", "Accept-Language", "Referer", "DPoP", "DPoP",
]  # fmt: skip
OTHER_VALUES = ["a" * 8000, EXTENSION_URI, "sid=x; sid=y", "100-continue", "éÿ", "null"]
LENGTH_LIES = [b"+1", b"-1", b" 3", b"1_0", b"0x10", b"\xd9\xa5", b"99999999999999999999", b"1, 1"]


@st.composite
def header_sets(draw: st.DrawFn, content_type: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """Credentials (mostly genuine), `content_type` (mostly), and a few other headers."""
    headers: list[tuple[bytes, bytes]] = []
    authorization = draw(st.sampled_from(AUTHORIZATIONS))
    if authorization is not None:
        headers.extend([(b"Authorization", authorization)] * draw(st.sampled_from([1] * 9 + [2])))
    delegation = draw(st.sampled_from(DELEGATIONS))
    if delegation is not None:
        repeats = draw(st.sampled_from([1] * 9 + [2]))
        headers.extend([(b"X-A2A-User-Delegation", delegation)] * repeats)
    sent = draw(st.sampled_from([*[content_type] * 12, *CONTENT_TYPES, None]))
    if sent is not None:
        headers.extend([(b"Content-Type", sent)] * draw(st.sampled_from([1] * 9 + [2])))
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.one_of(header_names, st.sampled_from(OTHER_HEADERS)))
        value = draw(st.one_of(latin1, st.sampled_from(OTHER_VALUES)))
        headers.append((name.encode("latin-1"), value.encode("latin-1")))
    return tuple(headers)


@st.composite
def hostile_requests(
    draw: st.DrawFn,
    routes: Sequence[tuple[str, str]],
    bodies: st.SearchStrategy[bytes],
    content_type: bytes,
) -> Hostile:
    method, route = draw(st.sampled_from(routes))
    if not route.startswith("/"):
        method = draw(st.sampled_from([method] * 6 + OTHER_METHODS))
    target = draw(request_targets(route))
    headers = draw(header_sets(content_type))
    body = draw(bodies).replace(b'"m-1"', b'"m-%d"' % draw(st.integers(0, 10**9)))
    length: bytes | None = None
    half_close = False
    # Mostly a true length (`sampled_from`: `integers` favours its small values).
    framing = draw(st.sampled_from(["true"] * 10 + ["short", "long", "lie", "none", "chunked"]))
    if framing == "short" and body:  # the rest of the body looks like a next request
        length = str(len(body) - draw(st.integers(1, len(body)))).encode()
    elif framing == "long":  # the upload ends first
        length, half_close = str(len(body) + draw(st.integers(1, 100))).encode(), True
    elif framing == "lie":
        length, half_close = draw(st.sampled_from(LENGTH_LIES)), True
    elif framing == "none" and not body:
        length = b""
    chunk_size = draw(st.integers(1, 5000)) if framing == "chunked" else 0
    return Hostile(method, target, headers, body, length, half_close, chunk_size)


# -- the properties ------------------------------------------------------------------------------


@GENERATED
@given(request=hostile_requests(A2A_ROUTES, json_bodies, A2A_MEDIA_TYPE.encode()))
def test_the_a2a_routes_answer_hostile_requests_alike(servers: Servers, request: Hostile) -> None:
    check_all(servers, "a2a", request)


@GENERATED
@given(request=hostile_requests(OAUTH_ROUTES, form_bodies, FORM))
def test_the_authorization_server_answers_hostile_requests_alike(
    servers: Servers, request: Hostile
) -> None:
    check_all(servers, "oauth", request)


@GENERATED
@given(request=hostile_requests(PAGE_ROUTES, form_bodies, FORM))
def test_the_pages_answer_hostile_requests_alike(servers: Servers, request: Hostile) -> None:
    check_all(servers, "page", request)


@GENERATED
@given(request=hostile_requests(POPPY_ROUTES, form_bodies, FORM))
def test_the_poppy_routes_answer_hostile_requests_alike(servers: Servers, request: Hostile) -> None:
    check_all(servers, "poppy", request)


@GENERATED
@given(request=hostile_requests(GUARD_ROUTES, json_bodies, b"application/json"))
def test_the_guarded_app_routes_answer_hostile_requests_alike(
    servers: Servers, request: Hostile
) -> None:
    check_all(servers, "guard", request)


#: Spellings of a guarded path that some server, framework or router might take for it.
GUARDED_SPELLINGS = [
    "{p}", "/{p}", "{p}/", "{p}//", "/.{p}", "/x/..{p}", "/%2e{p}", "{p}%00", "{p};x=1",
    "{p}%2F", "{p}/.", "{p}/..", "{p}%20", "{p}%09", "{p}.json", "{p}?x=/public",
]  # fmt: skip
#: The views only a verified caller reaches (`/public` and `/optional` take anyone).
GUARDED_VIEWS = ["/api/echo", "/api/scoped-sync", "/decorated-sync", "/parafe-sync"]
#: How a path's letters are cased: as written mostly (routers that ignore case are rare).
SPELLINGS: list[Callable[[str], str]] = [str, str, str, str.upper, str.title]
NOT_CREDENTIALS = [None, b"Bearer", b"Bearer x.y.z", b"Basic YTpi", b"Bearer <pact>x", b""]


@st.composite
def anonymous_requests(draw: st.DrawFn) -> Hostile:
    """A request for a guarded view, its path spelled oddly, without a valid credential."""
    view = draw(st.sampled_from(GUARDED_VIEWS))
    path = draw(st.sampled_from(GUARDED_SPELLINGS)).format(p=view)
    path = encode_some(path, draw(st.lists(st.integers(0, 60), max_size=2)))
    spell = draw(st.sampled_from(SPELLINGS))
    headers: list[tuple[bytes, bytes]] = [(b"Content-Type", b"application/json")]
    authorization = draw(st.sampled_from(NOT_CREDENTIALS))
    if authorization is not None:
        headers.append((b"Authorization", authorization))
    method = draw(st.sampled_from(["GET", "POST", "HEAD", "PUT"]))
    body = json.dumps(VALID_MESSAGE).encode() if method in ("POST", "PUT") else b""
    return Hostile(method, spell(path).encode(), tuple(headers), body)


@GENERATED
@given(request=anonymous_requests())
def test_no_spelling_of_a_guarded_path_reaches_its_view_without_a_credential(
    servers: Servers, request: Hostile
) -> None:
    """Whatever each framework makes of an odd path (decoded, dot segments, case), the view
    behind the guard never answers a caller without a valid credential."""
    for name, answer in servers.send(request).items():
        check_answer(name, "guard", request, answer, servers.secrets)
        assert not 200 <= answer.status < 300, (name, request, answer.body[:300])


def test_the_generated_requests_start_from_genuine_ones(servers: Servers) -> None:
    """The control for the properties above: their placeholders are genuine credentials and
    their valid bodies reach the bot, the authorization server and the guard."""
    pact = ((b"Authorization", b"Bearer <pact>"),)
    send = Hostile(
        "POST", b"/a2a/acme/message:send", pact, json.dumps(VALID_MESSAGE).encode()
    )  # fmt: skip
    for name, answer in servers.send(send).items():
        assert answer.status == 200, (name, answer.body[:300])
        assert json.loads(answer.body)["message"]["role"] == "ROLE_AGENT", name
    token = Hostile("POST", b"/a2a/acme/oauth/token", pact, urlencode(VALID_FORMS[1]).encode())
    token = replace(token, headers=(*pact, (b"Content-Type", b"application/x-www-form-urlencoded")))
    for name, answer in servers.send(token).items():
        assert (answer.status, json.loads(answer.body)["error"]) == (400, "invalid_grant"), name
    scoped = Hostile(
        "GET", b"/api/scoped-sync", (*pact, (b"X-A2A-User-Delegation", b"<delegation>"))
    )
    for name, answer in servers.send(scoped).items():
        assert answer.status == 200, (name, answer.body[:300])
        assert json.loads(answer.body)["scopes"] == ["orders:read"], name
    poppy_form = ((b"Content-Type", b"application/x-www-form-urlencoded"),)
    poppy = Hostile("POST", b"/a2a/acme/poppy/token", poppy_form, b"grant_type=x")
    for name, answer in servers.send(poppy).items():
        assert (answer.status, json.loads(answer.body)) == (401, {"error": "invalid_client"}), name
