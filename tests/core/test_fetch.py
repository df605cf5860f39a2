"""The SSRF-aware fetch, against a real server on 127.0.0.1 (no mocked sockets)."""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Iterator

import pytest

from pactmw.core.errors import FetchError, MalformedInput
from pactmw.core.fetch import FetchPolicy, _failure, http_get, max_age
from tests.support.jwks_server import JwksServer, Mode
from tests.support.net import free_port, slow_then_silent_port
from tests.support.tls import LOOPBACK_NETWORK

LOOPBACK = FetchPolicy(allow_http_on_loopback=True, timeout=2.0)
DOCUMENT = {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}]}


@pytest.fixture(scope="module")
def module_server() -> Iterator[JwksServer]:
    with JwksServer(DOCUMENT) as server:
        yield server


@pytest.fixture
def server(module_server: JwksServer) -> JwksServer:
    module_server.reset()
    module_server.set_keys(DOCUMENT)
    return module_server


def test_200_returns_body_and_lowercased_headers(server: JwksServer) -> None:
    server.extra_headers = {"Cache-Control": "public, max-age=120", "X-Custom": "yes"}
    response = http_get(server.url, LOOPBACK)
    assert json.loads(response.body) == DOCUMENT
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "public, max-age=120"
    assert response.headers["x-custom"] == "yes"
    assert int(response.headers["content-length"]) == len(response.body)
    assert max_age(response.headers) == 120
    assert server.hits[server.jwks_path] == 1


def test_body_without_content_length(server: JwksServer) -> None:
    server.send_content_length = False
    response = http_get(server.url, LOOPBACK)
    assert json.loads(response.body) == DOCUMENT
    assert "content-length" not in response.headers


def test_query_string_is_sent(server: JwksServer) -> None:
    server.set_json("/q", {"ok": True})
    assert json.loads(http_get(server.url_for("/q?x=1&y=2"), LOOPBACK).body) == {"ok": True}
    assert server.hits["/q"] == 1


def test_http_to_loopback_needs_the_policy_flag(server: JwksServer) -> None:
    with pytest.raises(FetchError, match="may not be fetched"):
        http_get(server.url, FetchPolicy())
    with pytest.raises(FetchError, match="may not be fetched"):
        http_get(server.url.replace("http://", "https://"), FetchPolicy())
    assert server.total_hits == 0
    http_get(server.url, FetchPolicy(allow_http_on_loopback=True))
    assert server.total_hits == 1


def test_localhost_name_is_resolved_and_checked(server: JwksServer) -> None:
    url = server.url.replace("127.0.0.1", "localhost")
    with pytest.raises(FetchError, match="may not be fetched"):
        http_get(url, FetchPolicy())
    assert server.total_hits == 0


def test_redirect_is_not_followed(server: JwksServer) -> None:
    server.mode = Mode.REDIRECT
    with pytest.raises(FetchError, match="302"):
        http_get(server.url, LOOPBACK)
    assert server.hits[server.jwks_path] == 1
    assert server.hits["/moved/jwks.json"] == 0


def test_server_error(server: JwksServer) -> None:
    server.mode = Mode.FAIL
    with pytest.raises(FetchError, match="500"):
        http_get(server.url, LOOPBACK)


def test_not_found(server: JwksServer) -> None:
    with pytest.raises(FetchError, match="404"):
        http_get(server.url_for("/nothing-here"), LOOPBACK)


@pytest.mark.parametrize("send_length", [True, False])
def test_body_over_max_bytes(server: JwksServer, send_length: bool) -> None:
    server.mode = Mode.OVERSIZED
    server.oversized_bytes = 200_000
    server.send_content_length = send_length
    policy = FetchPolicy(allow_http_on_loopback=True, max_bytes=64 * 1024)
    with pytest.raises(FetchError, match="larger than 65536 bytes"):
        http_get(server.url, policy)


def test_body_exactly_at_max_bytes_is_accepted(server: JwksServer) -> None:
    server.set_body("/exact", b"x" * 1000)
    for send_length in (True, False):
        server.send_content_length = send_length
        policy = FetchPolicy(allow_http_on_loopback=True, max_bytes=1000)
        assert http_get(server.url_for("/exact"), policy).body == b"x" * 1000
        with pytest.raises(FetchError, match="larger"):
            http_get(
                server.url_for("/exact"), FetchPolicy(allow_http_on_loopback=True, max_bytes=999)
            )


def test_slow_server_times_out(server: JwksServer) -> None:
    server.mode = Mode.SLOW
    server.delay = 5.0
    policy = FetchPolicy(allow_http_on_loopback=True, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(FetchError, match=r"took longer than 1\.0 s"):
        http_get(server.url, policy)
    assert time.monotonic() - started < policy.timeout + 2


def test_a_slow_connect_leaves_the_tls_handshake_only_what_is_left() -> None:
    # The watchdog cuts a connection only once it is made: connect and handshake must keep
    # to the deadline themselves (a slow connect left the handshake a whole timeout more).
    policy = FetchPolicy(allowed_networks=(LOOPBACK_NETWORK,), timeout=1.6)
    with slow_then_silent_port() as port:
        started = time.monotonic()
        with pytest.raises(FetchError, match=r"took longer than 1\.6 s"):
            http_get(f"https://127.0.0.1:{port}/jwks.json", policy)
        took = time.monotonic() - started
    assert took < policy.timeout + 0.5, took


@pytest.mark.parametrize("aborted", [True, False])
def test_a_timeout_is_named_so_whichever_clock_ran_out(aborted: bool) -> None:
    """The socket's timeout and the whole exchange's deadline are both `policy.timeout`: on a
    loaded machine the socket's can end a silent server's wait first (a CI run said "could
    not be fetched: TimeoutError" for a Parafé broker that was only slow)."""
    policy = FetchPolicy(timeout=0.5)
    failure = _failure(
        "https://broker.example/x", policy, TimeoutError("timed out"), aborted=aborted
    )
    assert str(failure) == "https://broker.example/x took longer than 0.5 s"
    refused = _failure("https://broker.example/x", policy, ConnectionRefusedError(), aborted=False)
    assert str(refused) == "https://broker.example/x could not be fetched: ConnectionRefusedError"


def test_dripping_body_is_cut_at_the_total_deadline(server: JwksServer) -> None:
    server.mode = Mode.DRIP
    server.delay = 0.1  # a byte every 0.1 s: every read succeeds, the total does not
    policy = FetchPolicy(allow_http_on_loopback=True, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(FetchError, match="longer than"):
        http_get(server.url, policy)
    assert time.monotonic() - started < policy.timeout + 2


def test_dripping_headers_are_cut_at_the_total_deadline(server: JwksServer) -> None:
    # Slowloris on the response head: each header byte arrives well within the socket timeout,
    # so only a deadline for the whole exchange stops it. The module promises "a total deadline".
    server.mode = Mode.DRIP_HEADERS
    server.delay = 0.08
    policy = FetchPolicy(allow_http_on_loopback=True, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(FetchError):
        http_get(server.url, policy)
    assert time.monotonic() - started < policy.timeout + 2


def test_connection_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}/jwks.json"
    started = time.monotonic()
    with pytest.raises(FetchError, match="could not be fetched"):
        http_get(url, LOOPBACK)
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.1/jwks.json",
        "http://10.0.0.1/jwks.json",
        "https://169.254.169.254/latest/meta-data/",
        "http://169.254.169.254/latest/meta-data/",
        "https://192.168.1.1/jwks.json",
        "https://172.16.0.1/jwks.json",
        "https://100.64.0.1/jwks.json",  # carrier-grade NAT
        "https://0.0.0.0/jwks.json",
        "https://[::1]:9/jwks.json",
        "https://[fe80::1]/jwks.json",
        "https://[fd00::1]/jwks.json",
        "https://[::ffff:169.254.169.254]/jwks.json",
        "https://[::ffff:127.0.0.1]/jwks.json",
        "https://127.0.0.1/jwks.json",
        "https://127.1.2.3/jwks.json",
    ],
)
def test_non_public_literal_addresses_refused_without_connecting(url: str) -> None:
    # Nothing listens on these addresses here: a connection attempt would hang until the timeout
    # or fail with a different message. The refusal must come first, and fast.
    started = time.monotonic()
    with pytest.raises(FetchError, match="may not be fetched"):
        http_get(url, FetchPolicy(timeout=5.0))
    assert time.monotonic() - started < 0.5


def test_ipv6_loopback_is_allowed_with_the_flag() -> None:
    # With the flag the address passes the check and a connection is attempted (and refused,
    # or unreachable where IPv6 is off): a different error than the policy refusal.
    with pytest.raises(FetchError) as info:
        http_get(f"http://[::1]:{free_port()}/jwks.json", LOOPBACK)
    assert "may not be fetched" not in str(info.value)


def test_allowed_networks_open_a_private_range_for_https_only() -> None:
    policy = FetchPolicy(allowed_networks=(ipaddress.ip_network("10.0.0.0/8"),), timeout=5.0)
    assert policy.address_allowed(ipaddress.ip_address("10.1.2.3"))
    assert not policy.address_allowed(ipaddress.ip_address("192.168.1.1"))
    started = time.monotonic()
    with pytest.raises(FetchError, match="plain http is allowed only to loopback"):
        http_get("http://10.0.0.1/jwks.json", policy)
    with pytest.raises(FetchError, match="may not be fetched"):
        http_get("https://192.168.1.1/jwks.json", policy)
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/jwks.json",
        "file:///etc/passwd",
        "gopher://127.0.0.1/",
        "https://user:pass@example.com/jwks.json",
        "https://user@example.com/jwks.json",
        "https:///jwks.json",
        "jwks.json",
        "",
        "https://example.com:99999/jwks.json",
        "https://example.com:port/jwks.json",
    ],
)
def test_bad_urls_refused(url: str) -> None:
    with pytest.raises(FetchError):
        http_get(url, FetchPolicy())


@pytest.mark.parametrize(
    "url",
    [
        "https://" + "a" * 64 + ".example/jwks.json",  # DNS label too long for IDNA
        "https://a..b/jwks.json",  # empty label
        "https://\ud800.example/jwks.json",  # not encodable
        "https://[::1/jwks.json",  # unbalanced IPv6 bracket
        "https://[not-an-ip]/jwks.json",
    ],
)
def test_unresolvable_hosts_raise_fetch_error_not_other_exceptions(url: str) -> None:
    # http_get's contract: a 200 response or FetchError. Open-mode discovery feeds it issuer
    # strings from unauthenticated tokens, so any other exception escapes as a server error.
    with pytest.raises(FetchError):
        http_get(url, FetchPolicy(timeout=2.0))


def test_https_to_a_trusted_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    with JwksServer(DOCUMENT, tls=True) as tls_server:
        monkeypatch.setenv("SSL_CERT_FILE", tls_server.ca_file)
        response = http_get(tls_server.url, LOOPBACK)
        assert json.loads(response.body) == DOCUMENT
        # The certificate names 127.0.0.1 and localhost: plain http to the TLS port fails.
        with pytest.raises(FetchError):
            http_get(tls_server.url.replace("https://", "http://"), LOOPBACK)


def test_https_with_an_untrusted_certificate_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    with JwksServer(DOCUMENT, tls=True) as tls_server:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        with pytest.raises(FetchError, match="could not be fetched"):
            http_get(tls_server.url, LOOPBACK)


# -- Cache-Control ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("max-age=120", 120.0),
        ("public, max-age=300", 300.0),
        ("max-age=0", 0.0),
        ("MAX-AGE=5", 5.0),
        ('max-age="60"', 60.0),
        (" public ,  max-age = 90 ", 90.0),  # lenient about spaces
        ("public,max-age=90", 90.0),
        ("no-store", 0.0),
        ("no-cache", 0.0),
        ("max-age=100, no-cache", 0.0),
        ("No-Store, max-age=100", 0.0),
        ("private", None),
        ("max-age=abc", None),
        ("max-age=-1", None),
        ("max-age=1.5", None),
        ("max-age=", None),
        ("s-maxage=10", None),
        ("max-age=10, max-age=20", 20.0),
    ],
)
def test_max_age(value: str | None, expected: float | None) -> None:
    headers = {} if value is None else {"cache-control": value}
    assert max_age(headers) == expected


def test_allowed_networks_take_cidr_strings_as_the_setting_does(server: JwksServer) -> None:
    # `allowed_jwks_networks` is written as CIDR strings; a FetchPolicy built by hand with
    # the same strings once raised TypeError inside every fetch, after construction passed.
    policy = FetchPolicy(allow_http_on_loopback=True, allowed_networks=["127.0.0.0/8"])
    assert policy.allowed_networks == (ipaddress.ip_network("127.0.0.0/8"),)
    assert json.loads(http_get(server.url, policy).body) == DOCUMENT
    assert policy.address_allowed(ipaddress.ip_address("127.0.0.2"))


@pytest.mark.parametrize("networks", ["10.0.0.0/8", ["10.0.0.0/33"], ["10.0.0.1/8"], [8]])
def test_allowed_networks_that_are_no_networks_are_refused_when_the_policy_is_made(
    networks: object,
) -> None:
    with pytest.raises(MalformedInput, match="allowed_networks"):
        FetchPolicy(allowed_networks=networks)  # type: ignore[arg-type]
