"""The person's browser: a cookie jar, forms posted as a browser posts them, and the few
readings of HTML pages the story needs (forms, inputs, checkboxes, headings), done the way
the reference suite reads them.

Standard library only (urllib); never through a proxy, everything is on 127.0.0.1.
"""

from __future__ import annotations

import html
import http.cookiejar
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from email.message import Message
from typing import IO, NamedTuple
from urllib.parse import urlencode

from pactmw.demo._common import REQUEST_TIMEOUT, DemoFailed, expect


class Page(NamedTuple):
    """What the browser got back: redirects come back as answers too."""

    status: int
    headers: Message
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Let redirects come back as answers, so the transcript can show each hop."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


class Browser:
    """Jane's browser: one cookie jar for every site she visits."""

    def __init__(self) -> None:
        self.cookies = http.cookiejar.CookieJar()
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),  # urllib honours http_proxy: not for 127.0.0.1
            urllib.request.HTTPCookieProcessor(self.cookies),
            _NoRedirect(),
        )

    def get(self, url: str) -> Page:
        return self._open("GET", url)

    def post(self, url: str, fields: Sequence[tuple[str, str]]) -> Page:
        body = urlencode(list(fields)).encode()
        return self._open("POST", url, body, "application/x-www-form-urlencoded")

    def _open(
        self, method: str, url: str, body: bytes | None = None, content_type: str | None = None
    ) -> Page:
        """One request; 4xx/5xx answers are returned, not raised."""
        headers = {"Content-Type": content_type} if content_type else {}
        # S310: the URLs come from the story or from our own servers' pages, on 127.0.0.1.
        request = urllib.request.Request(url, body, headers, method=method)  # noqa: S310
        try:
            with self._opener.open(request, timeout=REQUEST_TIMEOUT) as response:
                return Page(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:
            with error:
                return Page(error.code, error.headers, error.read())
        except OSError as exc:
            raise DemoFailed(f"{method} {url} failed: {exc}") from exc


# -- reading HTML pages ----------------------------------------------------------------------

_TAG_ATTRIBUTE = r'\b{}="([^"]*)"'


def _attribute(tag: str, name: str) -> str | None:
    found = re.search(_TAG_ATTRIBUTE.format(re.escape(name)), tag)
    return html.unescape(found.group(1)) if found else None


def first_form(page: str, what: str) -> tuple[str, str]:
    """The method and absolute action of the first `<form ... action="...">` of a page."""
    found = re.search(r"<form\b[^>]*>", page)
    expect(found is not None, f"{what}: no form on the page")
    assert found is not None
    action = _attribute(found.group(0), "action")
    expect(bool(action), f"{what}: the form has no action")
    return (_attribute(found.group(0), "method") or "get").lower(), str(action)


def input_value(page: str, name: str) -> str | None:
    """The value of the first `<input ... name="NAME" value="...">`."""
    for tag in re.findall(r"<input\b[^>]*>", page):
        if _attribute(tag, "name") == name:
            return _attribute(tag, "value")
    return None


def checkboxes(page: str, name: str) -> list[tuple[str, str, bool]]:
    """(value, label text, checked) of each `<input type="checkbox" name="NAME" ...>`."""
    boxes = []
    for tag, label in re.findall(r"(<input\b[^>]*>)([^<]*)", page):
        if _attribute(tag, "type") == "checkbox" and _attribute(tag, "name") == name:
            checked = re.search(r"\schecked\b", tag) is not None
            boxes.append((_attribute(tag, "value") or "", html.unescape(label).strip(), checked))
    return boxes


def text_of(page: str, element: str) -> str:
    """The text of the first `<element>...</element>`, tags stripped."""
    found = re.search(rf"<{element}\b[^>]*>(.*?)</{element}>", page, re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip() if found else ""


__all__ = [
    "Browser",
    "Page",
    "checkboxes",
    "first_form",
    "input_value",
    "text_of",
]
