"""The neutral request: headers arrive lower-cased and are looked up in any case, so the
delegation header has one spelling for the client that sends it and the guard that reads it."""

from __future__ import annotations

from pactmw.core.http import DELEGATION_HEADER, Request


def test_headers_are_looked_up_in_any_case() -> None:
    request = Request("POST", "/a2a/acme/message:send", headers=(("a2a-version", "1.0"),))
    assert request.header("A2A-Version") == "1.0"
    assert request.header("a2a-version") == "1.0"
    assert request.has_header("A2A-VERSION")
    assert not request.has_header("Authorization")


def test_the_delegation_header_is_found_under_its_one_name() -> None:
    request = Request("POST", "/", headers=(("x-a2a-user-delegation", "Bearer t"),))
    assert DELEGATION_HEADER == "X-A2A-User-Delegation"
    assert request.has_header(DELEGATION_HEADER)
    assert request.delegation_token() == "Bearer t"


def test_a_repeated_delegation_header_is_ambiguous() -> None:
    headers = (("x-a2a-user-delegation", "Bearer a"), ("x-a2a-user-delegation", "Bearer b"))
    assert Request("POST", "/", headers=headers).delegation_token() == ""
    assert Request("POST", "/").delegation_token() is None


def test_header_names_in_any_case_are_taken_lower_cased() -> None:
    # Found in a custom-server trial: `http.server`'s `self.headers.items()` keeps the names as
    # sent ("Authorization"), and a `Request` made of them found no `Authorization`, so every
    # caller was refused as `missing_token`, with nothing to say why.
    headers = [("Authorization", "Bearer a"), ("X-A2A-User-Delegation", "Bearer d")]
    request = Request("GET", "/orders", headers=headers)
    assert request.headers == (("authorization", "Bearer a"), ("x-a2a-user-delegation", "Bearer d"))
    assert request.header("authorization") == "Bearer a"
    assert request.delegation_token() == "Bearer d"
    twice = (("Authorization", "Bearer a"), ("authorization", "Bearer b"))
    assert Request("GET", "/", headers=twice).header("Authorization") is None  # repeated
