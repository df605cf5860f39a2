"""A development Brand login for the PACT Delegated profile's "brand" login mode (spec §5.3).

In brand mode the link a personal agent shows its user opens the *Brand's* login, not the
Provider's: `{login_url}?return_to={consent URL}?user_code=XXXX-XXXX`. The Brand signs the
person in, then sends them back to the Provider's consent page with a single-use assertion
(`pactmw.protocols.delegation.mint_login_assertion`) in a form POST. `DevelopmentBrandLogin`
is that Brand login in its smallest form, for demos, tests and trying pactmw out locally:
a standard-library HTTP server in a thread with a fixed list of users.

    login = DevelopmentBrandLogin(
        consent_url=consent_url_for("http://127.0.0.1:8000", "acme"),
        users=[BrandUser("jane", "correct horse", account="acct-jane")],
    ).start()
    # [brands.acme.delegation] gets: login = "brand" plus login.delegation_settings()
    ...
    login.close()

It serves:

- `GET /login?return_to=URL`: the sign-in form (username, password; and the code, when
  `return_to` does not carry one).
- `POST /login` (form: `return_to`, `username`, `password`, optional `user_code`): checks the
  password and answers a page whose form POSTs `assertion=<JWT>` to the consent URL; a tiny
  inline script submits it, a button does the same without script. A wrong password gets the
  form again (401).
- `GET /.well-known/jwks.json`: the public key the Provider verifies assertions with
  (`brand_jwks_uri`).

`return_to` must be exactly the configured consent URL, optionally with one `user_code`
query parameter, or the Provider's connected agents page next to it (`.../oauth/agents`,
where the assertion carries no code): anything else is refused with 400, so the login is
never an open redirect and never hands an assertion to another page. Development only:
passwords are kept in memory in clear, there is no session, no rate limit and no CSRF
protection of the sign-in form.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import threading
from collections.abc import Iterable, Mapping
from html import escape
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from attrs import frozen

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.protocols.delegation import mint_login_assertion
from pactmw.provider.consent_pages import isolated

__all__ = ["BrandUser", "DevelopmentBrandLogin", "consent_url_for"]

LOGIN_PATH = "/login"
JWKS_PATH = "/.well-known/jwks.json"
MAX_FORM_BYTES = 16 * 1024
#: The whole inline script of the hand-off page; the page's CSP allows exactly this text.
AUTO_SUBMIT_SCRIPT = "document.forms[0].submit();"
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(AUTO_SUBMIT_SCRIPT.encode()).digest()).decode()
_MAX_CODE_LENGTH = 32


def consent_url_for(base_url: str, brand_id: str) -> str:
    """The Provider's consent URL of a Brand: `{base_url}/a2a/{brand_id}/oauth/consent`."""
    from pactmw.provider.card import interface_url

    return interface_url(base_url.rstrip("/"), brand_id) + "/oauth/consent"


@frozen
class BrandUser:
    """A person who can sign in: `account` is the Brand's own id for them (the grant's)."""

    username: str
    password: str
    account: str
    email: str | None = None


class DevelopmentBrandLogin:
    """The Brand's login page for brand-mode delegation, served on `host:port` (0: any port).

    The socket is bound when the object is made, so `login_url`, `issuer` and `jwks_uri` are
    known before `start()`; `close()` (or leaving a `with` block) stops the server. The
    assertion signing key is generated unless `key` is given; `issuer` defaults to this
    server's own origin.
    """

    def __init__(
        self,
        *,
        consent_url: str,
        users: Iterable[BrandUser],
        brand_name: str = "the Brand",
        issuer: str | None = None,
        key: PrivateJWK | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        assertion_lifetime: float = 120.0,
    ) -> None:
        parts = urlsplit(consent_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise ValueError("consent_url must be an absolute http(s) URL without a query")
        if parts.fragment or "#" in consent_url:
            raise ValueError("consent_url must not have a fragment")
        self.consent_url = consent_url
        self.brand_name = brand_name
        self.users: Mapping[str, BrandUser] = {user.username: user for user in users}
        self.key = key or generate_private_jwk("ES256")
        self.assertion_lifetime = assertion_lifetime
        self._server = http.server.ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        bound_host, bound_port = self._server.server_address[:2]
        shown = bound_host if isinstance(bound_host, str) else bound_host.decode()
        if ":" in shown:
            shown = f"[{shown}]"
        self.base_url = f"http://{shown}:{bound_port}"
        self.issuer = issuer or self.base_url
        self._thread: threading.Thread | None = None

    # -- what the Provider's configuration needs ----------------------------------------------

    @property
    def login_url(self) -> str:
        return self.base_url + LOGIN_PATH

    @property
    def agents_url(self) -> str | None:
        """The Provider's connected agents page of this Brand (next to the consent URL)."""
        base, slash, last = self.consent_url.rpartition("/")
        return f"{base}/agents" if slash and last == "consent" else None

    @property
    def jwks_uri(self) -> str:
        return self.base_url + JWKS_PATH

    def jwks(self) -> dict[str, Any]:
        """The public JWKS document (what `jwks_uri` serves; usable as inline `brand_jwks`)."""
        return {"keys": [{**self.key.public.to_dict(), "use": "sig"}]}

    def delegation_settings(self) -> dict[str, str]:
        """The keys of `[brands.X.delegation]` that point the Provider at this login."""
        return {
            "login": "brand",
            "login_url": self.login_url,
            "brand_issuer": self.issuer,
            "brand_jwks_uri": self.jwks_uri,
        }

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> DevelopmentBrandLogin:
        """Serve in a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="brand-login", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> DevelopmentBrandLogin:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- the rules -----------------------------------------------------------------------------

    def user_code_in(self, return_to: str) -> str | None:
        """The `user_code` carried by `return_to` ("" when it has none), or None when
        `return_to` is not exactly the consent URL with at most a `user_code` parameter."""
        base, has_query, query = return_to.partition("?")
        if base != self.consent_url or "#" in return_to:
            return None
        if not has_query:
            return ""
        try:
            fields = parse_qs(query, keep_blank_values=True, strict_parsing=True)
        except ValueError:
            return None
        codes = fields.get("user_code", [])
        if set(fields) != {"user_code"} or len(codes) != 1 or not _plausible_code(codes[0]):
            return None
        return codes[0]

    def authenticate(self, username: str, password: str) -> BrandUser | None:
        """The user whose password this is, or None (constant-time comparison)."""
        user = self.users.get(username)
        expected = user.password if user is not None else "\x00 no such user"
        matches = hmac.compare_digest(password.encode("utf-8"), expected.encode("utf-8"))
        return user if matches and user is not None else None

    def assertion(self, user: BrandUser, user_code: str) -> str:
        """The single-use assertion for `user` and `user_code` (spec §5.3)."""
        return mint_login_assertion(
            key=self.key,
            brand_issuer=self.issuer,
            consent_url=self.consent_url,
            account=user.account,
            user_code=user_code,
            email=user.email,
            lifetime=self.assertion_lifetime,
            # Named as they signed in (the hand-off page's name), not by the Brand's own id.
            name=user.username,
        )

    # -- pages ---------------------------------------------------------------------------------

    def login_page(self, return_to: str, user_code: str, error: str = "") -> str:
        code_field = (
            ""
            if user_code or return_to == self.agents_url
            else '<p><label>Code from your personal agent <input name="user_code"'
            ' autocomplete="off" placeholder="XXXX-XXXX" required></label></p>'
        )
        problem = f'<p class="error" role="alert">{escape(error)}</p>' if error else ""
        return _page(
            f"Sign in to {isolated(self.brand_name)}",
            f'<form method="post" action="{escape(self.login_url)}">'
            f'<input type="hidden" name="return_to" value="{escape(return_to)}">'
            f"<h1>Sign in to {_name(self.brand_name)}</h1>{problem}"
            "<p>Your personal agent asked to act for you. Sign in first; you choose what to"
            " allow on the next page.</p>"
            '<p><label>Username <input name="username" autocomplete="username" required>'
            "</label></p>"
            '<p><label>Password <input type="password" name="password"'
            ' autocomplete="current-password" required></label></p>'
            f'{code_field}<p><button type="submit">Sign in</button></p></form>',
        )

    def handoff_page(self, user: BrandUser, assertion: str, to: str | None = None) -> str:
        """Back to the Provider: POST the assertion to the consent URL (or `to`)."""
        return _page(
            f"Signed in to {isolated(self.brand_name)}",
            f'<form method="post" action="{escape(to or self.consent_url)}">'
            f'<input type="hidden" name="assertion" value="{escape(assertion)}">'
            f"<p>Signed in as <strong>{_name(user.email or user.username)}</strong>."
            " Taking you to the permissions page&hellip;</p>"
            '<p><button type="submit">Continue</button></p></form>'
            f"<script>{AUTO_SUBMIT_SCRIPT}</script>",
        )

    def content_security_policy(self) -> str:
        consent = urlsplit(self.consent_url)
        return (
            f"default-src 'none'; script-src 'sha256-{_SCRIPT_HASH}'; style-src 'unsafe-inline'; "
            f"form-action 'self' {consent.scheme}://{consent.netloc}; frame-ancestors 'none'; "
            "base-uri 'none'"
        )


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:30rem;margin:3rem auto;padding:0 1rem;"
    "line-height:1.5}.error{color:#b00020}button{font-size:1rem;padding:.4rem 1rem}"
)


def _name(text: str) -> str:
    """A Brand's or a person's name in a sentence, isolated as the Provider's pages show
    names (`<bdi>`): a right-to-left name reads right and cannot reorder the words around it."""
    return f"<bdi>{escape(text)}</bdi>"


def _page(title: str, body: str) -> str:
    # The viewport: on a phone, where a person often follows their agent's link, the page is
    # laid out at the phone's width, not 980 px shrunk to a third. `<main>`: its landmark.
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )


def _plausible_code(code: str) -> bool:
    """A user code as a person may type it; the Provider normalizes and checks it."""
    return 0 < len(code) <= _MAX_CODE_LENGTH and all(c.isalnum() or c in "- " for c in code)


def _handler_for(login: DevelopmentBrandLogin) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "pactmw-brand-login"
        sys_version = ""

        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if path == JWKS_PATH:
                self._send(200, json.dumps(login.jwks()).encode(), "application/json")
            elif path == LOGIN_PATH:
                return_to = _field(parse_qs(query), "return_to")
                code = "" if return_to == login.agents_url else login.user_code_in(return_to)
                if code is None:
                    self._refused()
                else:
                    self._html(200, login.login_page(return_to, code))
            else:
                self._send(404, b"not found", "text/plain")

        def do_POST(self) -> None:
            if self.path.partition("?")[0] != LOGIN_PATH:
                self._send(404, b"not found", "text/plain")
                return
            form = self._form()
            if form is None:
                self._send(400, b"expected a form", "text/plain")
                return
            return_to = _field(form, "return_to")
            if return_to == login.agents_url:
                self._agents_sign_in(form, return_to)
                return
            code = login.user_code_in(return_to)
            if code is None:
                self._refused()
                return
            typed = _field(form, "user_code").strip()
            user_code = code or typed
            user = login.authenticate(_field(form, "username"), _field(form, "password"))
            if user is None:
                page = login.login_page(return_to, code, "Wrong username or password.")
                self._html(401, page)
            elif not _plausible_code(user_code):
                self._html(400, login.login_page(return_to, code, "Enter the code shown."))
            else:
                self._html(200, login.handoff_page(user, login.assertion(user, user_code)))

        def _agents_sign_in(self, form: Mapping[str, list[str]], agents_url: str) -> None:
            """Sign in for the connected agents page: an assertion for that page, no code."""
            user = login.authenticate(_field(form, "username"), _field(form, "password"))
            if user is None:
                self._html(401, login.login_page(agents_url, "", "Wrong username or password."))
                return
            assertion = mint_login_assertion(
                key=login.key,
                brand_issuer=login.issuer,
                consent_url=agents_url,
                account=user.account,
                user_code="",
                email=user.email,
                lifetime=login.assertion_lifetime,
                name=user.username,
            )
            self._html(200, login.handoff_page(user, assertion, to=agents_url))

        def _form(self) -> dict[str, list[str]] | None:
            content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                return None
            if content_type != "application/x-www-form-urlencoded" or not (
                0 <= length <= MAX_FORM_BYTES
            ):
                return None
            try:
                return parse_qs(self.rfile.read(length).decode("utf-8"), max_num_fields=20)
            except (UnicodeDecodeError, ValueError):
                return None

        def _refused(self) -> None:
            page = _page(
                "Cannot sign in here",
                "<h1>Cannot sign in here</h1><p>This sign-in link does not lead back to"
                f" {_name(login.brand_name)}'s permissions page. Start again from your"
                " personal agent.</p>",
            )
            self._html(400, page)

        def _html(self, status: int, html: str) -> None:
            self._send(status, html.encode("utf-8"), "text/html; charset=utf-8", page=True)

        def _send(self, status: int, body: bytes, content_type: str, *, page: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            if page:
                self.send_header("Content-Security-Policy", login.content_security_policy())
                self.send_header("X-Frame-Options", "DENY")
                self.send_header("Referrer-Policy", "no-referrer")
                self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _field(form: Mapping[str, list[str]], name: str) -> str:
    values = form.get(name, [])
    return values[0] if len(values) == 1 else ""
