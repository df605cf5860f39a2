"""`pactmw check`: the PACT 1.0 conformance checks, run against any Provider over HTTP.

The checker plays a personal agent registered with the Provider (its issuer, its private key,
the audience the Provider assigned) and covers the ground of the public Identity suite
(`e2e/pact.test.ts`, run with `E2E_PROVIDER=any`): the Agent Card, replies and `contextId`,
idempotent retries, foreign contexts, ListTasks, the task and unsupported routes, header
tolerance, unmatched routes before authentication, every authentication refusal and the
malformed bodies. With `delegated=True` it then runs the Delegated profile (PACT §5) with a
person in the loop: it prints the Brand's login link, waits while the person approves, and
checks the token, a delegated reply's signed receipt and the refresh.

Everything goes through `pactmw.client`: its card, device-code and receipt functions for what
a well-behaved personal agent does, and its low-level transport (`SyncTransport`,
`HttpRequest`) for the deliberately malformed requests (bad JSON, wrong methods, raw parts,
HS256 and expired tokens...) that no well-behaved client would send.

Each check has a stable name, passes or fails on its own and says on failure what was
expected and what came back, so `Checker.run` always runs every check it can.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from pactmw.check._forge import hs256, now, public_secrets, tampered, unsigned
from pactmw.check._names import (
    AGENT_MESSAGE_ID,
    ALG_NONE,
    AUD_INTERFACE,
    BAD_JSON,
    BAD_PAGE_SIZES,
    CARD,
    CARD_HEADERS,
    CARD_INTERFACE,
    CARD_SCHEME,
    CARD_UNKNOWN,
    CONTENT_TYPE,
    CONTENT_TYPE_TOLERANCE,
    DELEGATED_DETAILS,
    DELEGATED_DEVICE,
    DELEGATED_METADATA,
    DELEGATED_RECEIPT,
    DELEGATED_REFRESH,
    DELEGATED_REFUSALS,
    DELEGATED_SCHEME,
    DELEGATED_SINGLE_USE,
    DELEGATED_SPENT_REFRESH,
    DELEGATED_STEP_UP,
    DELEGATED_TAMPERED,
    DELEGATED_TOKEN,
    DISABLED_ISSUER,
    ENCODED_COLON,
    EXPIRED,
    EXTENDED_CARD,
    FOREIGN_BRAND,
    FOREIGN_SUB,
    FUTURE_IAT,
    HS256,
    LIST_TASKS,
    LONG_LIFETIME,
    MISSING_TOKEN,
    MISSING_TOKEN_BODY,
    OTHER_KEY,
    PAGE_SIZES,
    PUSH_CONFIGS,
    RAW_PART,
    REPLY,
    RETRY,
    STREAMING,
    TASK_ID,
    TASK_ROUTES,
    TOKEN_REUSE,
    TOKEN_REUSE_ONE_BRAND,
    UNKNOWN_BRAND,
    UNKNOWN_CONTEXT_ID,
    UNMATCHED_ROUTES,
    VERSION_TOLERANCE,
)
from pactmw.check._progress import Progress
from pactmw.check._result import CheckResult, Mismatch, results_json, summary_line
from pactmw.check._target import card_url_from, identity_scheme_name
from pactmw.check._wire import (
    A2A_CONTENT_TYPE,
    BODY_SHOWN,
    CARD_PATH,
    CHALLENGE,
    ERROR_DOMAIN,
    ERROR_INFO,
    REASONS,
    SCHEME_KINDS,
    UNKNOWN_CONTEXT,
    describe,
    header_values,
    loads,
    reply_id,
)
from pactmw.client import (
    AgentCard,
    AgentSigner,
    AuthorizationServerMetadata,
    DelegationScheme,
    DeviceAuthorization,
    DeviceCodeClient,
    HttpRequest,
    HttpResponse,
    MessageReply,
    OAuthError,
    RetryPolicy,
    StepUp,
    SyncTransport,
    TokenResponse,
    check_receipt,
    delegation_scheme,
    fetch_authorization_server_metadata,
    fetch_card,
    fetch_receipt_keys,
    interface_url,
)
from pactmw.client.a2a import parse_send_response, user_message
from pactmw.client.flow import retry_after
from pactmw.client.transport import Transport
from pactmw.core.encoding import json_dumps, json_loads
from pactmw.core.errors import MalformedInput
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import KeySet, generate_private_jwk

__all__ = [
    "CARD_PATH",
    "CheckResult",
    "Checker",
    "Progress",
    "card_url_from",
    "identity_scheme_name",
    "results_json",
    "summary_line",
]

DEFAULT_ASK = "Can you show my orders and my account?"
#: A 429 is waited out this many times, when its Retry-After is at most `MAX_RATE_WAIT` s.
RATE_LIMIT_RETRIES = 3
MAX_RATE_WAIT = 60.0


class _Recorder:
    """A transport that remembers the last answer from each URL (for headers the client's
    typed results do not carry, such as a token response's Cache-Control)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.last: dict[str, HttpResponse] = {}

    def send(self, request: HttpRequest) -> HttpResponse:
        response = self.transport.send(request)
        self.last[request.url] = response
        return response


# -- the checker ---------------------------------------------------------------------------------


class Checker:
    """Runs the checks against the Brand whose card is at `card_url`.

    `signer` signs as a personal agent the Provider registered; `audience` is the `aud` it
    assigned. `other_card_url` names a second Brand of the same Provider (cross-Brand
    isolation, one token for both). `delegated` adds the Delegated profile, which needs a
    person to approve at the Brand's login: `ask` is the message that should need delegated
    scopes (a step-up when sent without a token), `scopes` the scope ids to request (default:
    every scope on the card), `approval_timeout` how long to wait for the person (default:
    until the device code expires). `report` is called with each result as it is known;
    `progress` shows long steps (and the login link) on stderr. `transport` defaults to a
    `SyncTransport` with `timeout` seconds per exchange.
    """

    def __init__(
        self,
        card_url: str,
        signer: AgentSigner,
        audience: str,
        *,
        other_card_url: str | None = None,
        delegated: bool = False,
        ask: str = DEFAULT_ASK,
        scopes: Sequence[str] = (),
        approval_timeout: float | None = None,
        timeout: float = 10.0,
        transport: Transport | None = None,
        report: Callable[[CheckResult], None] | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.card_url = card_url
        self.signer = signer
        self.audience = audience
        self.other_card_url = other_card_url
        self.delegated = delegated
        self.ask = ask
        self.scopes = tuple(scopes)
        self.approval_timeout = approval_timeout
        self.transport = _Recorder(transport or SyncTransport(timeout=timeout))
        self.retry = RetryPolicy(network_retries=1)
        self.report = report or (lambda result: None)
        self.progress = progress or Progress(None)
        self.results: list[CheckResult] = []
        #: Fresh per run, so runs against the same Provider never share users or contexts.
        self.run_id = uuid.uuid4().hex[:8]
        self.sub = f"pactmw-check-{self.run_id}-a"
        self.other_sub = f"pactmw-check-{self.run_id}-b"
        self.delegated_sub = f"pactmw-check-{self.run_id}-d"
        # Filled as the checks go.
        self.card: AgentCard | None = None
        self.card_response: HttpResponse | None = None
        self.interface = ""
        self.other_interface = ""
        self.context_id: str | None = None
        self.challenge: str | None = CHALLENGE
        self.identity_scheme: str | None = None
        #: Every answer that must be `application/a2a+json`: (what, its Content-Type).
        self.a2a_answers: list[tuple[str, str | None]] = []
        #: (contextId, an agent reply's messageId) from the retry check.
        self._retry_context: tuple[str, str] | None = None
        self._hinted = False

    # -- running ---------------------------------------------------------------------------------

    def run(self) -> list[CheckResult]:
        """Run every check that applies; return the results in order."""
        self.progress.note(f"checking {self.card_url}")
        if self._card_checks():
            self._message_checks()
            self._context_checks()
            self._task_checks()
            self._header_checks()
            self._route_checks()
            self._auth_checks()
            self._malformed_checks()
            if self.delegated:
                self._delegated_checks()
            self._check(
                CONTENT_TYPE,
                "Content-Type exactly application/a2a+json (no parameters) on the card and on "
                "every A2A answer",
                self._content_type,
            )
        return self.results

    def _check(self, name: str, expected: str, check: Callable[[], str | None]) -> bool:
        try:
            actual = check() or "as expected"
            result = CheckResult(name, True, expected, actual)
        except Mismatch as exc:
            result = CheckResult(name, False, exc.expected, exc.actual)
        except Exception as exc:  # ClientError, or a surprise: it must not hide other checks
            result = CheckResult(name, False, expected, f"{type(exc).__name__}: {exc}")
        self.results.append(result)
        self.report(result)
        return result.passed

    # -- HTTP --------------------------------------------------------------------------------------

    def http(
        self,
        method: str,
        url: str,
        *,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes = b"",
    ) -> HttpResponse:
        """One request as given (no retries but after a 429 with a short Retry-After)."""
        request = HttpRequest(method, url, headers=tuple(headers), body=body)
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            response = self.transport.send(request)
            if response.status != 429 or attempt == RATE_LIMIT_RETRIES:
                return response
            wait = retry_after(response)
            wait = 1.0 if wait is None else wait
            if wait > MAX_RATE_WAIT:
                return response
            self.progress.note(f"rate limited (429): waiting {wait:.0f} s as Retry-After asks")
            time.sleep(wait)
        return response  # pragma: no cover - the loop always returns

    def token(self, sub: str | None = None) -> str:
        return self.signer.sign(sub or self.sub, self.audience)

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.signer.issuer,
            "sub": self.sub,
            "aud": self.audience,
            "iat": now,
            "exp": now + 120,
        }
        claims.update(overrides)
        return claims

    def signed(self, **overrides: Any) -> str:
        """A JWT with the checker's key and any claims (`typ: JWT`, the key's `kid`)."""
        return sign_compact(self.claims(**overrides), self.signer.key, typ="JWT")

    def send(
        self,
        text: str = "Hello, this is pactmw check.",
        *,
        interface: str | None = None,
        sub: str | None = None,
        token: str | None = None,
        auth: bool = True,
        context_id: str | None = None,
        message_id: str | None = None,
        body: bytes | None = None,
        path: str = "message:send",
        headers: Mapping[str, str | None] | None = None,
    ) -> HttpResponse:
        """POST a message (or `body`) with the usual headers; `headers` overrides them (None
        drops one)."""
        if body is None:
            message = user_message(
                text, message_id=message_id or str(uuid.uuid4()), context_id=context_id
            )
            body = json_dumps({"message": message})
        sent: dict[str, str | None] = {
            "Authorization": f"Bearer {token or self.token(sub)}" if auth else None,
            "A2A-Version": "1.0",
            "Content-Type": "application/json",
        }
        sent.update(headers or {})
        return self.http(
            "POST",
            f"{interface or self.interface}/{path}",
            headers=[(k, v) for k, v in sent.items() if v is not None],
            body=body,
        )

    def call(
        self,
        method: str,
        rest: str,
        *,
        auth: bool = True,
        token: str | None = None,
        interface: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> HttpResponse:
        """Any request below the interface URL, with a valid token unless `auth=False`."""
        sent = dict(headers or {})
        if auth:
            sent.setdefault("Authorization", f"Bearer {token or self.token()}")
        if body:
            sent.setdefault("Content-Type", "application/json")
        url = f"{interface or self.interface}/{rest}"
        return self.http(method, url, headers=list(sent.items()), body=body)

    # -- what came back ----------------------------------------------------------------------------

    def _a2a_json(self, response: HttpResponse, what: str) -> Any:
        """Record the answer's Content-Type for the content-type check; parse its JSON."""
        self.a2a_answers.append((what, response.header("content-type")))
        try:
            return json_loads(response.body)
        except MalformedInput as exc:
            raise Mismatch(f"a JSON body ({what})", f"{exc}: {describe(response)}") from exc

    def _hint(self, response: HttpResponse) -> str:
        """For a valid token refused: a short remark here, the likely causes once on stderr."""
        if response.status != 401:
            return ""
        if not self._hinted:
            self._hinted = True
            self.progress.note(
                "note: the Provider refused a valid personal-agent JWT: is --issuer registered "
                "and enabled, its JWKS served at the registered jwks_uri (with this key's kid), "
                "and --audience the audience the Provider assigned?"
            )
        return " (a valid token was refused)"

    def expect_reply(
        self, response: HttpResponse, what: str, *, context_id: str | None = None
    ) -> dict[str, Any]:
        """A PACT reply: exactly `{"message"}`, ROLE_AGENT, parts exactly `[{"text"}]`, a
        messageId and a contextId (the given one), no taskId (pact-provider.md §2.5)."""
        expected = f'HTTP 200 with exactly {{"message": ...}} ({what})'
        if response.status != 200:
            raise Mismatch(expected, describe(response) + self._hint(response))
        body = self._a2a_json(response, what)
        if not isinstance(body, dict) or set(body) != {"message"}:
            raise Mismatch(expected, describe(response))
        message = body["message"]
        shape = (
            "a message with messageId, contextId, role ROLE_AGENT and parts exactly "
            f'[{{"text": ...}}], no taskId ({what})'
        )
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("messageId"), str)
            or not message["messageId"]
            or not isinstance(message.get("contextId"), str)
            or not message["contextId"]
            or message.get("role") != "ROLE_AGENT"
            or "taskId" in message
            or not set(message) <= {"messageId", "contextId", "role", "parts", "metadata"}
        ):
            raise Mismatch(shape, describe(response))
        parts = message.get("parts")
        if (
            not isinstance(parts, list)
            or len(parts) != 1
            or not isinstance(parts[0], dict)
            or set(parts[0]) != {"text"}
            or not isinstance(parts[0]["text"], str)
        ):
            raise Mismatch(shape, f"parts {json.dumps(parts)[:BODY_SHOWN]}")
        if context_id is not None and message["contextId"] != context_id:
            raise Mismatch(
                f"the same contextId {context_id} ({what})", f"contextId {message['contextId']}"
            )
        return message

    def expect_error(
        self, response: HttpResponse, reason: str, what: str, message: str | None = None
    ) -> None:
        """The A2A / AIP-193 envelope with exactly one ErrorInfo detail (PACT §6)."""
        status, rpc_status = REASONS[reason]
        said = f' "{message}"' if message is not None else ""
        expected = f"HTTP {status} {reason}{said} ({what})"
        if response.status != status:
            raise Mismatch(expected, describe(response) + self._hint(response))
        body = self._a2a_json(response, what)
        error = body.get("error") if isinstance(body, dict) else None
        if (
            not isinstance(body, dict)
            or set(body) != {"error"}
            or not isinstance(error, dict)
            or set(error) != {"code", "status", "message", "details"}
            or error["code"] != status
            or type(error["code"]) is not int
            or error["status"] != rpc_status
            or not isinstance(error["message"], str)
            or error["details"] != [{"@type": ERROR_INFO, "reason": reason, "domain": ERROR_DOMAIN}]
        ):
            raise Mismatch(
                f"{expected}: {{error: {{code: {status}, status: {rpc_status}, message, "
                f"details: [exactly one ErrorInfo, reason {reason}, domain {ERROR_DOMAIN}]}}}}",
                describe(response),
            )
        if message is not None and error["message"] != message:
            raise Mismatch(expected, f"message {error['message']!r}")

    def expect_bare(self, response: HttpResponse, statuses: tuple[int, ...], what: str) -> None:
        """A bare status (404/405...) with no A2A body (PACT §2.2)."""
        shown = "/".join(str(s) for s in statuses)
        expected = f"HTTP {shown} with no A2A body ({what})"
        if (
            response.status not in statuses
            or A2A_CONTENT_TYPE in (response.header("content-type") or "").lower()
        ):
            raise Mismatch(expected, describe(response))

    def expect_refused(self, response: HttpResponse, what: str) -> None:
        """The PACT 401 (§3.4): no A2A body, and the same challenge as for a missing token."""
        shown = self.challenge if self.challenge is not None else "no WWW-Authenticate"
        expected = f"HTTP 401, {shown} (as for a missing token), no A2A body ({what})"
        challenges = header_values(response, "www-authenticate")
        wanted = [] if self.challenge is None else [self.challenge]
        if (
            response.status != 401
            or challenges != wanted
            or A2A_CONTENT_TYPE in (response.header("content-type") or "").lower()
        ):
            raise Mismatch(expected, describe(response))

    # -- 1. the card -----------------------------------------------------------------------------

    def _card_checks(self) -> bool:
        if not self._check(
            CARD,
            "the Agent Card, fetched without credentials (redirects followed), valid: name, "
            "description, version, supportedInterfaces (an HTTP+JSON 1.0 one), capabilities, "
            "default modes, skills, each security scheme exactly one known kind",
            self._card,
        ):
            return False
        self._check(
            CARD_HEADERS,
            "Access-Control-Allow-Origin: * and a public Cache-Control with a max-age on the card",
            self._card_headers,
        )
        self._check(
            CARD_INTERFACE,
            "supportedInterfaces[0] is the HTTP+JSON 1.0 interface, and the card is served at "
            "{interface URL}/.well-known/agent-card.json",
            self._card_interface,
        )
        self._check(
            CARD_SCHEME,
            'an httpAuthSecurityScheme with scheme "Bearer" and bearerFormat "JWT", listed '
            "alone in one securityRequirements entry (PACT §2.1)",
            self._card_scheme,
        )
        self._check(
            CARD_UNKNOWN,
            "the card of an unknown brandId is 404 with no A2A body",
            self._card_unknown,
        )
        return True

    def _card(self) -> str:
        card = fetch_card(self.card_url, transport=self.transport, retry=self.retry)
        for name, value in card.security_schemes.items():
            if len(value) != 1 or next(iter(value)) not in SCHEME_KINDS:
                raise Mismatch(
                    f"securitySchemes.{name} to be exactly one of {sorted(SCHEME_KINDS)}",
                    f"keys {sorted(value)}",
                )
        self.interface = interface_url(card)
        self.card = card
        response = self.http("GET", card.url)
        self._a2a_json(response, f"GET {card.url}")
        self.card_response = response
        return f"{card.name!r}, interface {self.interface}"

    def _card_headers(self) -> str:
        assert self.card_response is not None
        response = self.card_response
        cors = header_values(response, "access-control-allow-origin")
        cache = ", ".join(header_values(response, "cache-control"))
        directives = {d.strip().split("=", 1)[0].lower() for d in cache.split(",")}
        if cors != ["*"] or "public" not in directives or "max-age" not in directives:
            raise Mismatch(
                "Access-Control-Allow-Origin: * and Cache-Control: public, max-age=N "
                "(the reference sends public, max-age=300)",
                f"Access-Control-Allow-Origin {cors or 'absent'}, Cache-Control "
                f"{cache or 'absent'}",
            )
        return f"Cache-Control {cache}"

    def _card_interface(self) -> str:
        assert self.card is not None
        card = self.card
        first = card.interfaces[0]
        if (first.protocol_binding, first.protocol_version) != ("HTTP+JSON", "1.0"):
            raise Mismatch(
                "supportedInterfaces[0] with protocolBinding HTTP+JSON and protocolVersion 1.0 "
                "(the reference suite reads the first entry)",
                f"{first.protocol_binding} {first.protocol_version} at {first.url}",
            )
        served = self.interface + CARD_PATH
        if card.url != served:
            response = self.http("GET", served)
            if response.status != 200 or loads(response.body) != dict(card.raw):
                raise Mismatch(
                    f"the same card at {served}", f"{describe(response)} (card from {card.url})"
                )
        return self.interface

    def _card_scheme(self) -> str:
        assert self.card is not None
        name = identity_scheme_name(self.card, strict=True)
        if name is None:
            raise Mismatch(
                'a requirement naming one httpAuthSecurityScheme {scheme: "Bearer", '
                'bearerFormat: "JWT"}',
                "securitySchemes "
                + json.dumps(dict(self.card.security_schemes))[:BODY_SHOWN]
                + ", securityRequirements "
                + json.dumps([dict(r) for r in self.card.security_requirements])[:BODY_SHOWN],
            )
        self.identity_scheme = name
        note = "" if name == "platformJwt" else " (the reference suite looks for platformJwt)"
        return f"{name}{note}"

    def _unknown_interface(self) -> str:
        return self.interface.rsplit("/", 1)[0] + f"/pactmw-check-no-such-brand-{self.run_id}"

    def _card_unknown(self) -> None:
        response = self.http("GET", self._unknown_interface() + CARD_PATH)
        self.expect_bare(response, (404,), "unknown Brand's card")

    # -- 2-3. replies, continuation, retries ---------------------------------------------------

    def _message_checks(self) -> None:
        self._check(
            REPLY,
            "a reply {message: {messageId, contextId, role: ROLE_AGENT, parts: [{text}]}} and "
            "the same contextId when the conversation continues (PACT §4.2)",
            self._reply,
        )
        self._check(
            ENCODED_COLON,
            "POST message%3Asend is message:send (a percent-encoded colon)",
            self._encoded_colon,
        )
        self._check(
            RETRY,
            "a repeated messageId in the same contextId returns the stored reply byte for byte, "
            "without running the agent again (PACT §4.3)",
            self._retry,
        )
        self._check(
            AGENT_MESSAGE_ID,
            "INVALID_PARAMS for a user message reusing the messageId of an agent reply in the "
            "context (messageId unique within the context, PACT §4.1)",
            self._agent_message_id,
        )

    def _reply(self) -> str:
        sent = str(uuid.uuid4())
        first = self.expect_reply(self.send(message_id=sent), "first message")
        if first["messageId"] == sent:
            raise Mismatch("a new messageId on the reply", f"the sent one, {sent}")
        context_id = first["contextId"]
        self.expect_reply(
            self.send("A second message in the same conversation.", context_id=context_id),
            "continuation",
            context_id=context_id,
        )
        self.context_id = context_id
        return f"contextId {context_id}"

    def _encoded_colon(self) -> None:
        self.expect_reply(self.send("Percent-encoded.", path="message%3Asend"), "message%3Asend")

    def _retry(self) -> str:
        first_id, second_id = str(uuid.uuid4()), str(uuid.uuid4())
        first = self.send("Retry check, first message.", message_id=first_id)
        context_id = self.expect_reply(first, "first message")["contextId"]
        second = self.send(
            "Retry check, second message.", message_id=second_id, context_id=context_id
        )
        second_reply = self.expect_reply(second, "second message", context_id=context_id)
        self._retry_context = (context_id, second_reply["messageId"])
        for label, message_id, original, text in (
            ("the second message again", second_id, second, "Retry check, second message."),
            ("the second message once more", second_id, second, "Retry check, second message."),
            (
                "the first message, with its contextId",
                first_id,
                first,
                "Retry check, first message.",
            ),
        ):
            again = self.send(text, message_id=message_id, context_id=context_id)
            if again.status != 200 or again.body != original.body:
                stored, other = reply_id(original), reply_id(again)
                if again.status == 200 and stored and other and stored != other:
                    raise Mismatch(
                        f"the stored reply, byte for byte ({label}): messageId {stored}",
                        f"another reply, messageId {other}: the agent ran again",
                    )
                raise Mismatch(
                    f"the stored reply, byte for byte ({label}): {describe(original)}",
                    describe(again),
                )
            self._a2a_json(again, label)
        return "3 retries answered with the stored replies"

    def _agent_message_id(self) -> None:
        context = self._retry_context
        if context is None:
            first = self.expect_reply(self.send("Open a conversation."), "first message")
            context = (first["contextId"], first["messageId"])
        context_id, agent_id = context
        response = self.send("Colliding id.", message_id=agent_id, context_id=context_id)
        self.expect_error(response, "INVALID_PARAMS", "messageId of the agent's reply")

    # -- 4. contexts -------------------------------------------------------------------------------

    def _context_checks(self) -> None:
        self._check(
            FOREIGN_SUB,
            f'INVALID_PARAMS "{UNKNOWN_CONTEXT}" when another sub of the same personal agent '
            "sends in a user's contextId, and the owner can still continue it (PACT §4.2)",
            self._foreign_sub,
        )
        self._check(
            UNKNOWN_CONTEXT_ID,
            f'INVALID_PARAMS "{UNKNOWN_CONTEXT}" for a contextId the Provider never minted',
            self._unknown_context,
        )
        if self.other_card_url is not None:
            self._check(
                FOREIGN_BRAND,
                f'INVALID_PARAMS "{UNKNOWN_CONTEXT}" for a contextId of one Brand sent to the '
                "other, both ways (PACT §4.2)",
                self._foreign_brand,
            )
            self._check(
                TOKEN_REUSE,
                "one personal-agent JWT accepted at both Brands (the audience is Provider-wide, "
                "no replay tracking), then 404 with no A2A body at an unknown Brand",
                self._token_reuse,
            )
        else:
            self._check(
                TOKEN_REUSE_ONE_BRAND,
                "one personal-agent JWT accepted twice (no replay tracking), then 404 with no "
                "A2A body at an unknown Brand",
                self._token_reuse,
            )

    def _own_context(self) -> str:
        if self.context_id is None:
            self.context_id = self.expect_reply(self.send(), "first message")["contextId"]
        return self.context_id

    def _foreign_sub(self) -> None:
        context_id = self._own_context()
        response = self.send("Whose conversation?", sub=self.other_sub, context_id=context_id)
        self.expect_error(response, "INVALID_PARAMS", "another user's contextId", UNKNOWN_CONTEXT)
        self.expect_reply(
            self.send("Still mine.", context_id=context_id),
            "the owner continuing",
            context_id=context_id,
        )

    def _unknown_context(self) -> None:
        response = self.send("Anyone there?", context_id=str(uuid.uuid4()))
        self.expect_error(response, "INVALID_PARAMS", "a random UUID contextId", UNKNOWN_CONTEXT)

    def _other_interface(self) -> str:
        if not self.other_interface:
            assert self.other_card_url is not None
            card = fetch_card(self.other_card_url, transport=self.transport, retry=self.retry)
            self.other_interface = interface_url(card)
            if self.other_interface == self.interface:
                raise Mismatch("--other-brand to name another Brand", f"the same {card.url}")
        return self.other_interface

    def _foreign_brand(self) -> None:
        other = self._other_interface()
        context_id = self._own_context()
        response = self.send("Wrong Brand.", interface=other, context_id=context_id)
        self.expect_error(
            response, "INVALID_PARAMS", "this Brand's contextId at the other", UNKNOWN_CONTEXT
        )
        theirs = self.expect_reply(self.send("At the other Brand.", interface=other), "other Brand")
        response = self.send("Back again.", context_id=theirs["contextId"])
        self.expect_error(
            response, "INVALID_PARAMS", "the other Brand's contextId here", UNKNOWN_CONTEXT
        )

    def _token_reuse(self) -> None:
        token = self.token()
        self.expect_reply(self.send("One token.", token=token), "first use")
        other = self._other_interface() if self.other_card_url is not None else self.interface
        self.expect_reply(self.send("Same token.", token=token, interface=other), "second use")
        response = self.send("Nobody here.", token=token, interface=self._unknown_interface())
        self.expect_bare(response, (404,), "a valid token at an unknown Brand")

    # -- 5-6. tasks and unsupported operations -------------------------------------------------

    def _task_checks(self) -> None:
        self._check(
            LIST_TASKS,
            'GET tasks: HTTP 200 exactly {"tasks":[],"nextPageToken":"","pageSize":50,'
            '"totalSize":0}',
            self._list_tasks,
        )
        self._check(
            PAGE_SIZES, "GET tasks?pageSize=1 and =100 echo pageSize 1 and 100", self._page_sizes
        )
        self._check(
            BAD_PAGE_SIZES,
            "INVALID_PARAMS for pageSize 0, 101, 1.5 and pageSize given twice",
            self._bad_page_sizes,
        )
        self._check(
            TASK_ROUTES,
            "TASK_NOT_FOUND for GET tasks/{id} and POST tasks/{id}:cancel (PACT §2.2)",
            self._task_routes,
        )
        assert self.card is not None
        capabilities = self.card.capabilities
        skipped: list[str] = []
        if capabilities.get("streaming") is not True:
            self._check(
                STREAMING,
                "UNSUPPORTED_OPERATION for POST message:stream and POST tasks/{id}:subscribe "
                "(the card does not claim streaming)",
                self._streaming,
            )
        else:
            skipped.append(STREAMING + " (the card claims streaming)")
        if capabilities.get("extendedAgentCard") is not True:
            self._check(
                EXTENDED_CARD,
                "UNSUPPORTED_OPERATION for GET extendedAgentCard (the card does not claim it)",
                self._extended_card,
            )
        else:
            skipped.append(EXTENDED_CARD + " (the card claims extendedAgentCard)")
        if capabilities.get("pushNotifications") is not True:
            self._check(
                PUSH_CONFIGS,
                "PUSH_NOTIFICATION_NOT_SUPPORTED for GET/POST tasks/{id}/pushNotificationConfigs "
                "and GET/DELETE .../{configId} (the card does not claim push notifications)",
                self._push_configs,
            )
        else:
            skipped.append(PUSH_CONFIGS + " (the card claims pushNotifications)")
        for line in skipped:
            self.progress.note(f"skipped: {line}")

    def _list_tasks(self) -> None:
        response = self.call("GET", "tasks")
        wanted: dict[str, Any] = {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}
        if response.status != 200:
            raise Mismatch("HTTP 200 for GET tasks", describe(response) + self._hint(response))
        body = self._a2a_json(response, "GET tasks")
        if (
            body != wanted
            or type(body.get("pageSize")) is not int
            or type(body.get("totalSize")) is not int
        ):
            raise Mismatch(json.dumps(wanted, separators=(",", ":")), describe(response))

    def _page_sizes(self) -> None:
        for size in (1, 100):
            response = self.call("GET", f"tasks?pageSize={size}")
            wanted: dict[str, Any] = {
                "tasks": [],
                "nextPageToken": "",
                "pageSize": size,
                "totalSize": 0,
            }
            if response.status != 200:
                raise Mismatch(f"HTTP 200 for pageSize={size}", describe(response))
            body = self._a2a_json(response, f"GET tasks?pageSize={size}")
            if body != wanted or type(body.get("pageSize")) is not int:
                raise Mismatch(json.dumps(wanted, separators=(",", ":")), describe(response))

    def _bad_page_sizes(self) -> None:
        for query in ("pageSize=0", "pageSize=101", "pageSize=1.5", "pageSize=5&pageSize=5"):
            response = self.call("GET", f"tasks?{query}")
            self.expect_error(response, "INVALID_PARAMS", f"GET tasks?{query}")

    def _task_routes(self) -> None:
        task = "pactmw-check-task"
        self.expect_error(self.call("GET", f"tasks/{task}"), "TASK_NOT_FOUND", "GetTask")
        response = self.call("POST", f"tasks/{task}:cancel", body=b"{}")
        self.expect_error(response, "TASK_NOT_FOUND", "CancelTask")

    def _streaming(self) -> None:
        body = json_dumps({"message": user_message("Stream?", message_id=str(uuid.uuid4()))})
        for rest in ("message:stream", "tasks/pactmw-check-task:subscribe"):
            response = self.call("POST", rest, body=body)
            self.expect_error(response, "UNSUPPORTED_OPERATION", f"POST {rest}")

    def _extended_card(self) -> None:
        response = self.call("GET", "extendedAgentCard")
        self.expect_error(response, "UNSUPPORTED_OPERATION", "GET extendedAgentCard")

    def _push_configs(self) -> None:
        base = "tasks/pactmw-check-task/pushNotificationConfigs"
        for method, rest in (("GET", base), ("POST", base), ("GET", base + "/c1"),
                             ("DELETE", base + "/c1")):  # fmt: skip
            response = self.call(method, rest, body=b"{}" if method == "POST" else b"")
            self.expect_error(response, "PUSH_NOTIFICATION_NOT_SUPPORTED", f"{method} {rest}")

    # -- 7. header tolerance -----------------------------------------------------------------------

    def _header_checks(self) -> None:
        self._check(
            VERSION_TOLERANCE,
            "a reply with no A2A-Version header and with A2A-Version: 2.0 (the header is "
            "ignored; never VERSION_NOT_SUPPORTED)",
            self._versions,
        )
        self._check(
            CONTENT_TYPE_TOLERANCE,
            "a reply with request Content-Type application/json, application/a2a+json and "
            "text/plain (the body is read as JSON regardless)",
            self._content_types,
        )

    def _versions(self) -> None:
        for label, value in (("no A2A-Version", None), ("A2A-Version: 2.0", "2.0")):
            response = self.send("Which version?", headers={"A2A-Version": value})
            self.expect_reply(response, label)
        response = self.call("GET", "tasks", headers={"A2A-Version": "2.0"})
        if response.status != 200:
            raise Mismatch("HTTP 200 for GET tasks with A2A-Version: 2.0", describe(response))
        self._a2a_json(response, "GET tasks with A2A-Version: 2.0")

    def _content_types(self) -> None:
        for value in ("application/json", "application/a2a+json", "text/plain"):
            response = self.send("Any content type.", headers={"Content-Type": value})
            self.expect_reply(response, f"Content-Type {value}")

    # -- 8. unmatched routes -----------------------------------------------------------------------

    def _route_checks(self) -> None:
        self._check(
            UNMATCHED_ROUTES,
            "without a token: exactly 404 for GET {interface}/unknown, 404 or 405 for wrong "
            "methods and non-A2A paths, none with an A2A body (routing before authentication)",
            self._unmatched,
        )

    def _unmatched(self) -> None:
        response = self.call("GET", "unknown", auth=False)
        self.expect_bare(response, (404,), "GET unknown")
        for method, rest in (
            ("GET", "message:send"),
            ("DELETE", "message:send"),
            ("PUT", "message:send"),
            ("POST", "tasks"),
            ("GET", "tasks/x:cancel"),
            ("GET", "tasks/x:subscribe"),
            ("DELETE", "tasks/x/pushNotificationConfigs"),
            ("POST", "tasks/x/pushNotificationConfigs/c1"),
        ):
            response = self.call(method, rest, auth=False)
            self.expect_bare(response, (404, 405), f"{method} {rest}")

    # -- 9. authentication -------------------------------------------------------------------------

    def _auth_checks(self) -> None:
        self._check(
            MISSING_TOKEN,
            f"HTTP 401 with exactly WWW-Authenticate: {CHALLENGE} and no A2A body for a message "
            "without Authorization (PACT §3.4)",
            self._missing_token,
        )
        self._check(
            MISSING_TOKEN_BODY,
            "HTTP 401 (not 400) for a body '{' without a token: authenticate before reading",
            self._missing_token_body,
        )
        negatives: list[tuple[str, str, Callable[[], list[str]]]] = [
            (HS256, "an HS256 token whose HMAC key is the agent's public key", self._hs256),
            (EXPIRED, "iat now-200, exp now-100", lambda: [self.signed(iat=now() - 200,
                                                                       exp=now() - 100)]),
            (FUTURE_IAT, "iat now+31, exp now+151", self._future_iat),
            (LONG_LIFETIME, "exp - iat = 301 s", lambda: [self.signed(exp=now() + 301,
                                                                      iat=now())]),
            (AUD_INTERFACE, "aud = the interface URL", lambda: [self.signed(aud=self.interface)]),
            (DISABLED_ISSUER, "iss = {issuer}/disabled-pa, signed with the agent's key",
             lambda: [self.signed(iss=f"{self.signer.issuer}/disabled-pa")]),
            (OTHER_KEY, "a signature by another key with the agent's kid", self._other_key),
            (ALG_NONE, "an unsigned token (alg none)", lambda: [unsigned(self.claims())]),
        ]  # fmt: skip
        for name, what, tokens in negatives:
            self._check(
                name,
                f"HTTP 401 as for a missing token, no A2A body, for {what} (PACT §3.2, §3.4)",
                self._refuses(what, tokens),
            )
        self._check(
            UNKNOWN_BRAND,
            "at an unknown Brand: 401 without a token, 404 with a valid one, neither with an "
            "A2A body (authenticate, then look up the Brand)",
            self._unknown_brand,
        )

    def _missing_token(self) -> None:
        response = self.send("No token.", auth=False)
        challenges = header_values(response, "www-authenticate")
        self.challenge = challenges[0] if response.status == 401 and challenges else None
        if response.status != 401:
            self.challenge = CHALLENGE
        if (
            response.status != 401
            or challenges != [CHALLENGE]
            or A2A_CONTENT_TYPE in (response.header("content-type") or "").lower()
        ):
            raise Mismatch(
                f"HTTP 401, WWW-Authenticate: {CHALLENGE}, no A2A body", describe(response)
            )

    def _missing_token_body(self) -> None:
        self.expect_refused(self.send(body=b"{", auth=False), "body '{' without a token")

    def _refuses(self, what: str, tokens: Callable[[], list[str]]) -> Callable[[], None]:
        def check() -> None:
            for token in tokens():
                self.expect_refused(self.send("Refuse me.", token=token), f"message:send, {what}")
                self.expect_refused(self.call("GET", "tasks", token=token), f"GET tasks, {what}")

        return check

    def _hs256(self) -> list[str]:
        kid = self.signer.kid
        return [hs256(self.claims(), secret, kid) for secret in public_secrets(self.signer.key)]

    def _future_iat(self) -> list[str]:
        # Rounded up, so the token is 31 s ahead of the Provider's clock however late it lands.
        iat = math.ceil(time.time()) + 31
        return [self.signed(iat=iat, exp=iat + 120)]

    def _other_key(self) -> list[str]:
        other = generate_private_jwk(self.signer.key.alg, kid=self.signer.kid)
        return [sign_compact(self.claims(), other, typ="JWT")]

    def _unknown_brand(self) -> None:
        unknown = self._unknown_interface()
        self.expect_refused(self.send("Who?", interface=unknown, auth=False), "no token")
        response = self.send("Who?", interface=unknown)
        self.expect_bare(response, (404,), "a valid token")

    # -- 10. malformed bodies ----------------------------------------------------------------------

    def _malformed_checks(self) -> None:
        self._check(
            BAD_JSON,
            "INVALID_PARAMS for a message:send body '{' (with a valid token)",
            lambda: self.expect_error(self.send(body=b"{"), "INVALID_PARAMS", "body '{'"),
        )
        self._check(
            TASK_ID,
            'TASK_NOT_FOUND "Task not found" for a message with a taskId (PACT §4.1)',
            self._task_id,
        )
        self._check(
            RAW_PART,
            'CONTENT_TYPE_NOT_SUPPORTED for a message whose only part is {"raw": "aGVsbG8="}',
            self._raw_part,
        )

    def _task_id(self) -> None:
        message = user_message("With a task.", message_id=str(uuid.uuid4()))
        message["taskId"] = "pactmw-check-task"
        response = self.send(body=json_dumps({"message": message}))
        self.expect_error(response, "TASK_NOT_FOUND", "taskId", "Task not found")

    def _raw_part(self) -> None:
        message = user_message("ignored", message_id=str(uuid.uuid4()))
        message["parts"] = [{"raw": "aGVsbG8="}]
        response = self.send(body=json_dumps({"message": message}))
        self.expect_error(response, "CONTENT_TYPE_NOT_SUPPORTED", "raw part")

    # -- the content type of every A2A answer ----------------------------------------------------

    def _content_type(self) -> str:
        wrong: dict[str, list[str]] = {}
        for what, value in self.a2a_answers:
            if value != A2A_CONTENT_TYPE:
                wrong.setdefault(repr(value) if value else "no Content-Type", []).append(what)
        if wrong:
            shown = "; ".join(
                f"{len(whats)} with {value} (first: {whats[0]})" for value, whats in wrong.items()
            )
            raise Mismatch(
                f"Content-Type: {A2A_CONTENT_TYPE} on all {len(self.a2a_answers)} A2A answers",
                shown,
            )
        return f"{len(self.a2a_answers)} A2A answers"

    # -- the Delegated profile (PACT §5) ---------------------------------------------------------

    def _delegated_checks(self) -> None:
        flow = _DelegatedFlow(self)
        flow.run()


class _DelegatedFlow:
    """The Delegated checks, in order; each needs what the ones before it found."""

    def __init__(self, checker: Checker) -> None:
        self.c = checker
        self.scheme: DelegationScheme | None = None
        self.metadata: AuthorizationServerMetadata | None = None
        self.keys: KeySet | None = None
        self.step_up: StepUp | None = None
        self.device: DeviceCodeClient | None = None
        self.authorization: DeviceAuthorization | None = None
        self.tokens: TokenResponse | None = None
        self.spent = ""
        self.deadline = 0.0

    def run(self) -> None:
        c = self.c
        if not c._check(
            DELEGATED_SCHEME,
            "a securityRequirements entry naming the identity scheme and an "
            "oauth2SecurityScheme with a deviceCode flow (absolute URLs, scopes) and an "
            "oauth2MetadataUrl (PACT §5.1)",
            self._scheme,
        ):
            return
        if not c._check(
            DELEGATED_METADATA,
            "RFC 8414 metadata at oauth2MetadataUrl whose device_authorization_endpoint and "
            "token_endpoint are the card's, with a jwks_uri serving the signing keys",
            self._metadata,
        ):
            return
        assert self.metadata is not None
        if "authorization_details_types_supported" in self.metadata.raw:
            c._check(
                DELEGATED_DETAILS,
                "HTTP 400 invalid_authorization_details for an unsupported authorization_details "
                "type (the metadata lists authorization_details_types_supported)",
                self._authorization_details,
            )
        self._step_up()
        c._check(
            DELEGATED_REFUSALS,
            "device authorization: HTTP 400 invalid_scope for a scope not on the card, "
            "HTTP 401 without a personal-agent JWT (PACT §5.3), HTTP 401 invalid_client for a "
            "client_id other than the JWT's iss (RFC 6749 §5.2)",
            self._refusals,
        )
        if not c._check(
            DELEGATED_DEVICE,
            "a device authorization: device_code, user_code, absolute verification_uri and "
            "verification_uri_complete, positive expires_in and interval (RFC 8628 §3.2)",
            self._device_authorization,
        ):
            return
        if not c._check(
            DELEGATED_TOKEN,
            "after the person approves: a Bearer token whose scope lists only requested "
            "scopes, at least one (PACT §5.3), sent with Cache-Control: no-store",
            self._token,
        ):
            return
        c._check(
            DELEGATED_SINGLE_USE,
            "an OAuth error (invalid_grant) when the spent device code is polled again",
            self._single_use,
        )
        c._check(
            DELEGATED_RECEIPT,
            "with the delegation token: a reply whose metadata carries a pact.receipt that "
            "verifies with the jwks_uri keys, for this agent (pa) and this interface (brand), "
            "using only granted scopes (PACT §5.6)",
            self._receipt,
        )
        c._check(
            DELEGATED_TAMPERED,
            'HTTP 401 with WWW-Authenticate: Bearer realm="a2a", error="invalid_token" and no '
            "A2A body for a delegation token with a tampered signature (PACT §5.5)",
            self._tampered,
        )
        if c._check(
            DELEGATED_REFRESH,
            "refresh_token grant: a new access token with the same scopes (no-store), which works",
            self._refresh,
        ):
            c._check(
                DELEGATED_SPENT_REFRESH,
                "an OAuth error (invalid_grant) for the refresh token already used "
                "(the reference rotates refresh tokens)",
                self._spent_refresh,
            )

    def _credentials(self) -> Callable[[], str]:
        return self.c.signer.for_user(self.c.delegated_sub, self.c.audience)

    def _scheme(self) -> str:
        c = self.c
        assert c.card is not None
        scheme = delegation_scheme(c.card)
        if scheme is None:
            raise Mismatch(
                "a two-scheme requirement: the identity Bearer scheme and an "
                "oauth2SecurityScheme deviceCode flow",
                "none on the card (does this Brand offer delegation?)",
            )
        if scheme.metadata_url is None:
            raise Mismatch("oauth2MetadataUrl on the oauth2SecurityScheme", "absent")
        if not scheme.scopes:
            raise Mismatch("at least one scope on the deviceCode flow", "none")
        if c.identity_scheme is not None and scheme.identity_scheme != c.identity_scheme:
            raise Mismatch(
                f"the delegated requirement to name the identity scheme {c.identity_scheme}",
                f"it names {scheme.identity_scheme}",
            )
        unknown = [s for s in c.scopes if s not in scheme.scope_ids]
        if unknown:
            raise Mismatch(f"--scope ids on the card {list(scheme.scope_ids)}", f"{unknown}")
        self.scheme = scheme
        return f"{scheme.name}: scopes {' '.join(scheme.scope_ids)}"

    def _metadata(self) -> str:
        c, scheme = self.c, self.scheme
        assert scheme is not None
        assert scheme.metadata_url is not None
        metadata = fetch_authorization_server_metadata(
            scheme.metadata_url, transport=c.transport, retry=c.retry
        )
        for field, card_value, value in (
            ("device_authorization_endpoint", scheme.device_authorization_url,
             metadata.device_authorization_endpoint),
            ("token_endpoint", scheme.token_url, metadata.token_endpoint),
        ):  # fmt: skip
            if value != card_value:
                raise Mismatch(f"{field} {card_value} (the card's)", value)
        keys = fetch_receipt_keys(jwks_uri=metadata.jwks_uri, transport=c.transport, retry=c.retry)
        if not keys.keys:
            raise Mismatch(f"signing keys at {metadata.jwks_uri}", "an empty key set")
        self.metadata, self.keys = metadata, keys
        return f"issuer {metadata.issuer}, {len(keys.keys)} key(s) at {metadata.jwks_uri}"

    def _oauth_post(self, url: str, form: Sequence[tuple[str, str]], *, auth: bool) -> HttpResponse:
        headers = [("Content-Type", "application/x-www-form-urlencoded"),
                   ("Accept", "application/json")]  # fmt: skip
        if auth:
            headers.append(("Authorization", f"Bearer {self._credentials()()}"))
        return self.c.http("POST", url, headers=headers, body=urlencode(form).encode("ascii"))

    def _oauth_error(self, response: HttpResponse, status: int, error: str, what: str) -> None:
        body = loads(response.body)
        got = body.get("error") if isinstance(body, dict) else None
        if response.status != status or got != error:
            raise Mismatch(f"HTTP {status} with JSON error {error} ({what})", describe(response))

    def _authorization_details(self) -> None:
        scheme = self.scheme
        assert scheme is not None
        details = [{"type": "https://pactmw.invalid/check/unsupported-type"}]
        form = [("client_id", self.c.signer.issuer), ("scope", scheme.scope_ids[0]),
                ("authorization_details", json.dumps(details))]  # fmt: skip
        response = self._oauth_post(scheme.device_authorization_url, form, auth=True)
        self._oauth_error(response, 400, "invalid_authorization_details", "unsupported type")

    def _step_up(self) -> None:
        c = self.c
        sent = str(uuid.uuid4())
        response = c.send(c.ask, sub=c.delegated_sub, message_id=sent)
        if response.status != 200:
            c._check(
                DELEGATED_STEP_UP,
                f"HTTP 200 for {c.ask!r} without a delegation token (a reply or a step-up)",
                lambda: _raise(Mismatch("HTTP 200", describe(response))),
            )
            return
        result = parse_send_response(response, sent_message_id=sent)
        c._a2a_json(response, "message:send without a delegation token")
        if isinstance(result, MessageReply):
            c.progress.note(
                f"note: {c.ask!r} got a reply without a delegation token, so the step-up task "
                "was not checked (--ask sets a message that needs delegated scopes)"
            )
            return
        self.step_up = result

        def check() -> str:
            scheme = self.scheme
            assert scheme is not None
            unknown = [s for s in result.missing_scopes if s not in scheme.scope_ids]
            if unknown:
                raise Mismatch(
                    f"pact.missingScopes among the card's scopes {list(scheme.scope_ids)}",
                    f"{list(result.missing_scopes)}",
                )
            return (
                f"TASK_STATE_AUTH_REQUIRED, missing {' '.join(result.missing_scopes)}, "
                f"contextId {result.context_id}"
            )

        c._check(
            DELEGATED_STEP_UP,
            "a task in TASK_STATE_AUTH_REQUIRED with id, contextId, pact.missingScopes (card "
            "scopes) and an absolute pact.verificationUriComplete (PACT §5.5)",
            check,
        )

    def _refusals(self) -> None:
        scheme = self.scheme
        assert scheme is not None
        url = scheme.device_authorization_url
        form = [("client_id", self.c.signer.issuer), ("scope", "pactmw-check:no-such-scope")]
        self._oauth_error(self._oauth_post(url, form, auth=True), 400, "invalid_scope",
                          "a scope not on the card")  # fmt: skip
        form = [("client_id", self.c.signer.issuer), ("scope", scheme.scope_ids[0])]
        self.c.expect_refused(self._oauth_post(url, form, auth=False), "no personal-agent JWT")
        form = [("client_id", self.c.signer.issuer + "/other"), ("scope", scheme.scope_ids[0])]
        self._oauth_error(self._oauth_post(url, form, auth=True), 401, "invalid_client",
                          "client_id other than the JWT's iss")  # fmt: skip

    def _wait(self, seconds: float) -> None:
        """The device client's sleep between polls, showing how long the person has left."""
        end = time.monotonic() + seconds
        while True:
            left = max(0, math.ceil(self.deadline - time.monotonic()))
            self.c.progress.status(f"waiting for approval… ({left}s left)")
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(1.0, remaining))

    def _device_authorization(self) -> str:
        c, scheme = self.c, self.scheme
        assert scheme is not None
        self.device = DeviceCodeClient(
            scheme,
            self._credentials(),
            client_id=c.signer.issuer,
            transport=c.transport,
            retry=c.retry,
            sleep=self._wait,
        )
        scopes = c.scopes or scheme.scope_ids
        authorization = self.device.start(scopes)
        self.authorization = authorization
        self.deadline = authorization.expires_at
        if c.approval_timeout is not None:
            self.deadline = min(self.deadline, time.monotonic() + c.approval_timeout)
        left = max(0, math.ceil(self.deadline - time.monotonic()))
        c.progress.note(
            "A person must approve: open this link, sign in at the Brand and allow "
            f"({' '.join(scopes)}):"
        )
        c.progress.note(f"  {authorization.verification_uri_complete}")
        c.progress.note(f"(user code {authorization.user_code}; waiting up to {left} s)")
        return f"user code {authorization.user_code}, interval {authorization.interval} s"

    def _token(self) -> str:
        c = self.c
        assert self.device is not None
        assert self.authorization is not None
        try:
            tokens = self.device.wait_for_token(
                self.authorization, timeout=max(0.0, self.deadline - time.monotonic())
            )
        finally:
            c.progress.end_status()
        self._no_store(self.device.scheme.token_url, "the token response")
        requested = set(self.authorization.scopes)
        if not tokens.scopes or not set(tokens.scopes) <= requested:
            raise Mismatch(
                f"scope within the requested {' '.join(self.authorization.scopes)}",
                repr(tokens.scope),
            )
        self.tokens = tokens
        c.progress.note(f"approved: scope {tokens.scope!r}")
        return f"scope {tokens.scope!r}, expires_in {tokens.expires_in}"

    def _no_store(self, url: str, what: str) -> None:
        """RFC 6749 §5.1: a response carrying tokens has `Cache-Control: no-store`."""
        response = self.c.transport.last.get(url)
        cache = ", ".join(header_values(response, "cache-control")) if response else ""
        if "no-store" not in {d.strip().lower() for d in cache.split(",")}:
            raise Mismatch(
                f"Cache-Control: no-store on {what} (RFC 6749 §5.1)", cache or "no Cache-Control"
            )

    def _single_use(self) -> str:
        assert self.device is not None
        assert self.authorization is not None
        try:
            result = self.device.poll(self.authorization)
        except OAuthError as exc:
            return f"HTTP {exc.status} {exc.error}"
        raise Mismatch("an OAuth error", f"{result!r}")

    def _delegated_send(self, token: str, what: str) -> MessageReply:
        c = self.c
        sent = str(uuid.uuid4())
        context_id = self.step_up.context_id if self.step_up is not None else None
        headers = {"X-A2A-User-Delegation": f"Bearer {token}"}
        response = c.send(
            c.ask, sub=c.delegated_sub, message_id=sent, context_id=context_id, headers=headers
        )
        if response.status != 200:
            raise Mismatch(f"HTTP 200 ({what})", describe(response))
        result = parse_send_response(response, sent_message_id=sent, context_id=context_id)
        c._a2a_json(response, what)
        if isinstance(result, StepUp):
            raise Mismatch(
                f"a reply ({what})",
                f"a step-up for {' '.join(result.missing_scopes)} (did the person untick them?)",
            )
        return result

    def _receipt(self) -> str:
        c = self.c
        assert self.tokens is not None
        assert self.keys is not None
        reply = self._delegated_send(self.tokens.access_token, "delegated message:send")
        if reply.receipt is None:
            raise Mismatch("metadata pact.receipt on the reply", "no receipt")
        verified = check_receipt(
            reply.receipt, self.keys, expected_pa=c.signer.issuer, expected_brand=c.interface
        )
        extra = [s for s in verified.scopes_used if s not in self.tokens.scopes]
        if extra:
            raise Mismatch(f"scopesUsed within {self.tokens.scope!r}", f"{list(extra)}")
        return f"grant {verified.grant_id}, scopesUsed {list(verified.scopes_used)}"

    def _tampered(self) -> None:
        c = self.c
        assert self.tokens is not None
        headers = {"X-A2A-User-Delegation": f"Bearer {tampered(self.tokens.access_token)}"}
        response = c.send(c.ask, sub=c.delegated_sub, headers=headers)
        challenge = response.header("www-authenticate") or ""
        if (
            response.status != 401
            or 'error="invalid_token"' not in challenge
            or A2A_CONTENT_TYPE in (response.header("content-type") or "").lower()
        ):
            raise Mismatch(
                'HTTP 401, WWW-Authenticate: Bearer realm="a2a", error="invalid_token", no A2A '
                "body",
                describe(response),
            )

    def _refresh(self) -> str:
        assert self.device is not None
        assert self.tokens is not None
        old = self.tokens
        if old.refresh_token is None:
            raise Mismatch("a refresh_token in the token response", "none")
        new = self.device.refresh(old.refresh_token)
        self._no_store(self.device.scheme.refresh_url, "the refresh response")
        if set(new.scopes) != set(old.scopes):
            raise Mismatch(f"the same scopes {old.scope!r}", repr(new.scope))
        self._delegated_send(new.access_token, "message:send with the refreshed token")
        self.spent = old.refresh_token
        return f"scope {new.scope!r}"

    def _spent_refresh(self) -> str:
        assert self.device is not None
        try:
            result = self.device.refresh(self.spent)
        except OAuthError as exc:
            return f"HTTP {exc.status} {exc.error}"
        raise Mismatch("an OAuth error", f"a new token (scope {result.scope!r})")


def _raise(exc: Exception) -> None:
    raise exc
