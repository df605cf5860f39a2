"""A bounded HTTP exchange with the broker, for answers `core.fetch.http_get` cannot give.

`http_get` answers only 200 and only GET; the broker's DID documents say "revoked" with 410
and online verification is a POST. This keeps `http_get`'s guarantees, reusing its pieces:
every resolved address checked against the `FetchPolicy`, then connected to directly (no
second DNS lookup), https except to loopback when allowed, no redirects, one total deadline,
a body cap.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Mapping
from urllib.parse import urlsplit

from attrs import field, frozen

from pactmw.core.errors import FetchError
from pactmw.core.fetch import FetchPolicy, _PinnedConnection, _resolve


@frozen
class HttpAnswer:
    """Any HTTP answer: status, lower-cased headers, body (at most the policy's cap)."""

    status: int
    headers: Mapping[str, str]
    body: bytes = field(repr=False)


def http_request(
    method: str,
    url: str,
    policy: FetchPolicy,
    *,
    body: bytes | None = None,
    content_type: str = "application/json",
    accept: str = "application/json",
) -> HttpAnswer:
    """One request under `policy`; any status is returned, `FetchError` when there is none.

    Blocking: async callers run it in a worker thread.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:
        raise FetchError("invalid URL") from exc
    if not host or parts.username is not None or parts.password is not None:
        raise FetchError("URL must name a host and carry no credentials")
    if parts.scheme not in ("https", "http"):
        raise FetchError("only http(s) URLs may be used")
    tls = parts.scheme == "https"
    port = port or (443 if tls else 80)
    addresses = _resolve(host, port)
    if not addresses or not all(policy.address_allowed(a) for a in addresses):
        raise FetchError(f"{host} resolves to an address that may not be reached")
    if not tls and not all(a.is_loopback for a in addresses):
        raise FetchError("plain http is allowed only to loopback")
    connection = _PinnedConnection(host, port, addresses[0], policy.timeout, tls)
    # One deadline for the whole exchange, as in `http_get`: a broker that drips its answer
    # must not hold a worker thread past `policy.timeout`.
    watchdog = threading.Timer(policy.timeout, connection.abort)
    watchdog.daemon = True
    watchdog.start()
    try:
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        headers = {"Accept": accept, "User-Agent": policy.user_agent}
        if body is not None:
            headers["Content-Type"] = content_type
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        declared = response.getheader("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > policy.max_bytes:
            raise FetchError(f"{url} body larger than {policy.max_bytes} bytes")
        chunks: list[bytes] = []
        received = 0
        while chunk := response.read1(16 * 1024):
            received += len(chunk)
            if received > policy.max_bytes:
                raise FetchError(f"{url} body larger than {policy.max_bytes} bytes")
            chunks.append(chunk)
        if connection.aborted:
            raise FetchError(f"{url} took longer than {policy.timeout} s")
        return HttpAnswer(
            status=response.status,
            headers={name.lower(): value for name, value in response.getheaders()},
            body=b"".join(chunks),
        )
    except (OSError, http.client.HTTPException) as exc:
        if connection.aborted:
            raise FetchError(f"{url} took longer than {policy.timeout} s") from exc
        raise FetchError(f"{url} could not be reached: {type(exc).__name__}") from exc
    finally:
        watchdog.cancel()
        connection.close()
