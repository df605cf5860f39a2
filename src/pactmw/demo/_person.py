"""Jane, in her browser: she signs in at Acme's own login and decides on the Provider's
consent page. The personal agent never sees any of it; it only showed her the link."""

from __future__ import annotations

import re
from urllib.parse import urlencode

from pactmw.brand_login import DevelopmentBrandLogin
from pactmw.demo._browser import Browser, checkboxes, first_form, input_value, text_of
from pactmw.demo._common import DEMO_USER, SCOPES, expect, peek
from pactmw.demo._transcript import Transcript


class Person:
    def __init__(self, t: Transcript, login: DevelopmentBrandLogin) -> None:
        self.t = t
        self.login = login
        self.browser = Browser()

    def sign_in(self, link: str) -> tuple[str, str]:
        """Acme's sign-in form, then the page that hands her to the consent page; returns
        its form's action and the assertion."""
        t, browser, login = self.t, self.browser, self.login
        answer = browser.get(link)
        expect(answer.status == 200, f"Acme's login: expected 200, got {answer.status}")
        page = answer.text()
        method, action = first_form(page, "Acme's login")
        return_to = input_value(page, "return_to")
        expect(method == "post" and bool(return_to), "Acme's login: no sign-in form")
        assert return_to is not None
        t.note(f"GET {login.login_url}?return_to=… → 200, {text_of(page, 'h1')!r}")
        t.note(f"  <form method=post action={action}>, hidden return_to")
        t.note(f"  {return_to}")
        elsewhere = "https://evil.example/consent?user_code=BCDF-GHJK"
        refused = browser.get(f"{login.login_url}?{urlencode({'return_to': elsewhere})}")
        expect(refused.status == 400, f"open redirect: expected 400, got {refused.status}")
        t.note(f"(return_to={elsewhere} → {refused.status}:")
        t.note("  only the Provider's consent URL is accepted, never an open redirect)")
        fields = [("return_to", return_to), ("username", DEMO_USER.username)]
        wrong = browser.post(action, [*fields, ("password", "guess")])
        expect(wrong.status == 401, f"wrong password: expected 401, got {wrong.status}")
        t.note(f"POST {action} with a wrong password → {wrong.status}, the form again")
        answer = browser.post(action, [*fields, ("password", DEMO_USER.password)])
        expect(answer.status == 200, f"sign-in: expected 200, got {answer.status}")
        page = answer.text()
        method, consent_url = first_form(page, "Acme's hand-off page")
        assertion = input_value(page, "assertion")
        expect(
            method == "post" and consent_url == login.consent_url and bool(assertion),
            f"hand-off page: expected a POST of an assertion to {login.consent_url}",
        )
        expect("<script>" in page and "<button" in page, "hand-off page: no auto-submit")
        assert assertion is not None
        _, claims = peek(assertion)
        t.note(f"POST {action} as {DEMO_USER.username} → 200, Acme's hand-off page:")
        t.note(f"  <form method=post action={consent_url}>")
        t.note("  with a hidden assertion: a single-use JWT Acme signs (keys at its JWKS)")
        t.note(
            f"  assertion: iss {claims['iss']}, sub {claims['sub']}, "
            f"user_code {claims['user_code']}, exp iat + {claims['exp'] - claims['iat']} s"
        )
        t.note("  a tiny inline script submits it (a Continue button does without script)")
        return consent_url, assertion

    def consent(self, consent_url: str, assertion: str) -> None:
        """The consent page: every requested scope ticked; she unticks one and allows."""
        t, browser = self.t, self.browser
        answer = browser.post(consent_url, [("assertion", assertion)])
        page = answer.text()
        expect(
            answer.status == 200,
            f"consent page: expected 200, got {answer.status} {text_of(page, 'p')!r}",
        )
        boxes = checkboxes(page, "scope")
        method, decision_url = first_form(page, "consent page")
        session = input_value(page, "session")
        expect(method == "post" and bool(session), "consent page: no decision form")
        assert session is not None
        expect(
            [box[0] for box in boxes] == list(SCOPES) and all(box[2] for box in boxes),
            f"consent page: expected every requested scope, ticked; got {boxes}",
        )
        t.note(f"POST {consent_url} (the assertion) → {answer.status}, the consent page:")
        t.note(f"  {text_of(page, 'h1')!r}")
        t.note(f"  signed in as {text_of(page, 'strong')}; the scopes shown:")
        for scope, label, checked in boxes:
            t.note(f"    [{'x' if checked else ' '}] {label}  ({scope})")
        again = browser.post(consent_url, [("assertion", assertion)])
        expect(again.status == 400, f"assertion reuse: expected 400, got {again.status}")
        t.note(f"(the same assertion posted again → {again.status}: it is single-use)")
        keep = [box[0] for box in boxes if box[0] != "orders:cancel"]
        t.note(f"Jane unticks [ ] {SCOPES['orders:cancel']} and clicks Allow")
        fields = [("session", session), *(("scope", s) for s in keep), ("decision", "allow")]
        answer = browser.post(decision_url, fields)
        location = answer.headers.get("Location") or ""
        expect(answer.status == 303 and bool(location), f"decision: got {answer.status}")
        t.note(f"POST {decision_url} → {answer.status}")
        t.note(f"  Location: {location}")
        answer = browser.get(location)
        expect(answer.status == 200, f"result page: expected 200, got {answer.status}")
        result = answer.text()
        # What the result page states: the decision, then what the agent can do now.
        t.note(f"  {text_of(result, 'h1')}: {text_of(result, 'p')!r}")
        now = re.findall(r"<p>((?:(?!<p>).)*?)</p>\s*<ul>(.*?)</ul>", result, re.DOTALL)
        if now:
            sentence, items = now[0]
            t.note(f"  {text_of(f'<p>{sentence}</p>', 'p')!r}")
            for item in re.findall(r"<li>(.*?)</li>", items, re.DOTALL):
                t.note(f"    - {text_of(f'<li>{item}</li>', 'li')}")


__all__ = [
    "Person",
]
