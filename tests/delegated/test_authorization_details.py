"""RFC 9396 authorization details over HTTP: every rule of the Delegated profile's support.

A real Provider on uvicorn with two Brands: `acme` accepts no type (the metadata is silent
and the field is refused), `sky` accepts a flight-rebooking type bound to `flights:rebook`
(the reference Provider's example) and has a bot whose rebooking tool is bound to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from pactmw.provider import Brand, DelegationConfig, Provider, ToolRegistry, Turn
from pactmw.provider.authorization_details import AuthorizationDetailType, Requires
from pactmw.store import MemoryStore
from tests.delegated.support import (
    LOGIN_URL,
    Env,
    assert_oauth_error,
    delegated_brand,
    form_action,
    hidden,
    jws_claims,
    message_of,
    new_sub,
    serve,
)

REBOOK = "https://skyline.example/authorization/flight-rebook/v1"
SKY_SCOPES = {"flights:read": "See your trips", "flights:rebook": "Rebook your flights"}
K7 = {"type": REBOOK, "identifier": "K7PQ2M", "actions": ["rebook"], "target_flight": "SK 318"}
Q2 = {"type": REBOOK, "identifier": "Q2M7PK", "actions": ["rebook"], "target_flight": "SK 100"}


def no_weekend_flights(entry: Mapping[str, Any]) -> None:
    if entry["target_flight"].endswith("999"):
        raise ValueError("flight SK 999 cannot be rebooked onto")


FLIGHT_REBOOK = AuthorizationDetailType(
    type=REBOOK,
    scope="flights:rebook",
    schema={
        "type": "object",
        "properties": {
            "type": {"const": REBOOK},
            "identifier": {"type": "string", "minLength": 1},
            "actions": {"type": "array", "items": {"const": "rebook"}, "minItems": 1},
            "target_flight": {"type": "string", "pattern": "^[A-Z]{2} [0-9]{2,4}$"},
        },
        "required": ["type", "identifier", "actions", "target_flight"],
        "additionalProperties": False,
    },
    check=no_weekend_flights,
    render=lambda entry: (
        f"Only reservation {entry['identifier']}, to flight {entry['target_flight']}"
    ),
)


def sky_tools(calls: list[tuple[str, dict[str, Any]]]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(scope="flights:read")
    def list_trips(account: str) -> list[str]:
        return ["K7PQ2M", "Q2M7PK"]

    @tools.tool(
        scope="flights:rebook",
        write=True,
        authorization_details=Requires(
            REBOOK, {"identifier": "confirmation", "target_flight": "flight"}
        ),
    )
    def rebook(account: str, confirmation: str, flight: str) -> str:
        calls.append(("rebook", {"confirmation": confirmation, "flight": flight}))
        return f"{confirmation} is now on {flight}"

    return tools


def sky_bot(turn: Turn) -> str:
    """`rebook X onto Y` runs the tool as a model would; `python rebook X onto Y` from Python;
    `details` shows what the bot sees."""
    if turn.text == "details":
        assert turn.delegation is not None
        return json.dumps([dict(entry) for entry in turn.delegation.authorization_details])
    match = re.fullmatch(r"(python )?rebook (\w+) onto (.+)", turn.text)
    assert match is not None
    if match.group(1):
        return str(turn.tools.rebook(confirmation=match.group(2), flight=match.group(3)))
    outcome = turn.tools.run("rebook", {"confirmation": match.group(2), "flight": match.group(3)})
    return outcome.content


@pytest.fixture(scope="module")
def calls() -> list[tuple[str, dict[str, Any]]]:
    return []


def sky_brand(calls: list[tuple[str, dict[str, Any]]], *, skip: bool = False) -> Brand:
    """Skyline: flights:read and flights:rebook, the rebooking type, `rebook` bound to it."""
    return Brand(
        id="sky",
        name="Skyline",
        handler=sky_bot,
        delegation=DelegationConfig(
            scopes=SKY_SCOPES,
            login_url=LOGIN_URL,
            tools=sky_tools(calls),
            interval=1,
            authorization_details=(FLIGHT_REBOOK,),
            skip_consent_if_granted=skip,
        ),
    )


@pytest.fixture(scope="module")
def env(calls: list[tuple[str, dict[str, Any]]]) -> Iterator[Env]:
    sky = sky_brand(calls)
    with serve("memory://", [delegated_brand("acme", "Acme", []), sky]) as running:
        yield running


def ask(env: Env, brand: str, scope: str, details: Any, *, sub: str = "u1") -> httpx.Response:
    form = {"client_id": "https://pa.example", "scope": scope}
    if details is not None:
        form["authorization_details"] = details if isinstance(details, str) else json.dumps(details)
    return env.http.post(env.oauth(brand, "device_authorization"), data=form, headers=env.pa(sub))


def approve(
    env: Env, scope: str, details: Any, granted: list[str], *, sub: str, user: str = "alice"
) -> dict[str, Any]:
    """Request with details, tick `granted` on the consent page, poll: the token response."""
    started = ask(env, "sky", scope, details, sub=sub)
    assert started.status_code == 200, started.text
    document = started.json()
    page = env.consent_page(document["verification_uri_complete"], user)
    assert page.status_code == 200, page.text
    decided = env.decide(form_action(page.text), hidden(page.text, "session"), granted, user=user)
    assert decided.status_code == 303, decided.text
    polled = env.poll("sky", document["device_code"], sub=sub)
    assert polled.status_code == 200, polled.text
    tokens: dict[str, Any] = polled.json()
    return tokens


def test_the_metadata_advertises_the_types_only_where_configured(env: Env) -> None:
    sky = env.get(env.oauth("sky", ".well-known/oauth-authorization-server")).json()
    assert sky["authorization_details_types_supported"] == [REBOOK]
    acme = env.get(env.oauth("acme", ".well-known/oauth-authorization-server")).json()
    assert "authorization_details_types_supported" not in acme


def test_a_brand_that_accepts_no_type_refuses_the_field(env: Env) -> None:
    refused = ask(env, "acme", "orders:cancel", [K7])
    assert_oauth_error(refused, "invalid_authorization_details")
    assert "accepts no authorization_details" in refused.json()["error_description"]
    assert ask(env, "acme", "orders:cancel", None).status_code == 200


@pytest.mark.parametrize(
    ("scope", "details", "description"),
    [
        ("flights:rebook", [{**K7, "type": "https://other.example/v1"}], "unknown type"),
        ("flights:rebook", "[{", "is not JSON"),
        ("flights:rebook", "", "is not JSON"),
        ("flights:rebook", [], "non-empty JSON array"),
        ("flights:rebook", K7, "non-empty JSON array"),
        ("flights:rebook", ["rebook"], "must be an object with a string type"),
        ("flights:rebook", [{"identifier": "K7PQ2M"}], "must be an object with a string type"),
        ("flights:rebook", [{**K7, "target_flight": "SK318"}], "target_flight must match"),
        ("flights:rebook", [{**K7, "seat": "1A"}], "seat is not expected"),
        ("flights:rebook", [K7, {**K7, "target_flight": "SK 999"}], "[1]: flight SK 999 cannot"),
        ("flights:read", [K7], "needs the scope flights:rebook"),
        ("flights:rebook", [K7] * 21, "at most 20"),
        # An override in the free identifier turned "to flight SK 318" on the page into "813".
        (
            "flights:rebook",
            [{**K7, "identifier": "K7\u202ePQ2M"}],
            "[0] must not hold bidirectional controls (U+202E)",
        ),
        ("flights:rebook", [K7, {**Q2, "identifier": "Q2\u2069"}], "[1] must not hold"),
    ],
)
def test_unknown_malformed_or_unscoped_details_are_refused(
    env: Env, scope: str, details: Any, description: str
) -> None:
    refused = ask(env, "sky", scope, details)
    assert_oauth_error(refused, "invalid_authorization_details")
    assert description in refused.json()["error_description"]


def test_the_field_twice_is_refused_and_scopes_are_checked_first(env: Env) -> None:
    form = [
        ("client_id", "https://pa.example"),
        ("scope", "flights:rebook"),
        ("authorization_details", json.dumps([K7])),
        ("authorization_details", json.dumps([Q2])),
    ]
    refused = env.http.post(
        env.oauth("sky", "device_authorization"),
        content=urlencode(form).encode(),
        headers={**env.pa(), "content-type": "application/x-www-form-urlencoded"},
    )
    assert_oauth_error(refused, "invalid_authorization_details")
    assert_oauth_error(ask(env, "sky", "admin", [{"type": "nonsense"}]), "invalid_scope")


def test_approved_details_are_echoed_in_the_token_and_kept_across_refresh(env: Env) -> None:
    sub = new_sub()
    tokens = approve(
        env, "flights:read flights:rebook", [K7], ["flights:read", "flights:rebook"], sub=sub
    )
    assert tokens["authorization_details"] == [K7]
    assert jws_claims(tokens["access_token"])["authorization_details"] == [K7]
    refreshed = env.refresh("sky", tokens["refresh_token"], sub=sub)
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["authorization_details"] == [K7]
    assert jws_claims(refreshed.json()["access_token"])["authorization_details"] == [K7]
    # The bot reads them from the verified delegation.
    seen = message_of(env.send("sky", "details", token=refreshed.json()["access_token"], sub=sub))
    assert json.loads(seen["parts"][0]["text"]) == [K7]


def test_unticking_the_scope_drops_its_details(env: Env) -> None:
    sub = new_sub()
    tokens = approve(env, "flights:read flights:rebook", [K7], ["flights:read"], sub=sub)
    assert tokens["scope"] == "flights:read"
    assert "authorization_details" not in tokens
    assert "authorization_details" not in jws_claims(tokens["access_token"])


def test_a_widened_grant_holds_the_union_of_its_approvals(env: Env) -> None:
    sub = new_sub()
    approve(env, "flights:rebook", [K7], ["flights:rebook"], sub=sub)
    tokens = approve(env, "flights:rebook", [Q2, K7], ["flights:rebook"], sub=sub)
    assert tokens["authorization_details"] == [K7, Q2]


def test_a_tool_refuses_an_action_outside_the_details_and_runs_inside_them(
    env: Env, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    sub = new_sub()
    access = approve(env, "flights:rebook", [K7], ["flights:rebook"], sub=sub)["access_token"]
    inside = message_of(env.send("sky", "rebook K7PQ2M onto SK 318", token=access, sub=sub))
    assert inside["parts"][0] == {"text": "K7PQ2M is now on SK 318"}
    assert inside["metadata"]["pact.receipt"]["claims"]["actions"][0]["tool"] == "rebook"
    before = len(calls)
    # The model's call: a tool error it can read, and a rejected action for the agent.
    outside = message_of(env.send("sky", "rebook K7PQ2M onto SK 100", token=access, sub=sub))
    text = "The permission you were given does not cover this rebook call."
    assert outside["parts"] == [
        {"text": f"Error (authorization_details_mismatch): {text}"},
        {
            "data": {
                "action": {
                    "tool": "rebook",
                    "status": "rejected",
                    "summary": {"title": "Rebook", "detail": text},
                    "result": None,
                }
            }
        },
    ]
    assert outside["metadata"]["pact.receipt"]["claims"]["actions"] == []
    # From Python, unhandled by the bot: the refusal is the answer, never a 500.
    python = env.send("sky", "python rebook Q2M7PK onto SK 318", token=access, sub=sub)
    assert python.status_code == 200
    assert message_of(python)["parts"][0] == {"text": text}
    assert len(calls) == before  # nothing ran outside the approved entries


def test_without_entries_of_the_type_the_scope_alone_decides_as_in_the_reference(
    env: Env,
) -> None:
    sub = new_sub()
    access = approve(env, "flights:rebook", None, ["flights:rebook"], sub=sub)["access_token"]
    reply = message_of(env.send("sky", "rebook Q2M7PK onto SK 100", token=access, sub=sub))
    assert reply["parts"][0] == {"text": "Q2M7PK is now on SK 100"}


def test_new_details_are_never_approved_without_showing_the_page() -> None:
    with serve("memory://", [sky_brand([], skip=True)]) as env:
        sub = new_sub()
        approve(env, "flights:rebook", [K7], ["flights:rebook"], sub=sub)
        # Same scope, same entry: the live grant covers it, so the page is skipped.
        same = ask(env, "sky", "flights:rebook", [K7], sub=sub).json()
        skipped = env.consent_page(same["verification_uri_complete"], "alice")
        assert skipped.status_code == 303
        # A new entry is a new condition: the person sees the page.
        new = ask(env, "sky", "flights:rebook", [Q2], sub=sub).json()
        shown = env.consent_page(new["verification_uri_complete"], "alice")
        assert shown.status_code == 200
        assert hidden(shown.text, "session")


class _NoDetailsStore:
    """A store without the authorization-details operations (an older custom backend)."""

    def __init__(self) -> None:
        self._inner = MemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name in ("add_authorization_details", "authorization_details"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_brand_with_types_on_a_store_without_details_is_refused_at_startup() -> None:
    from pactmw.core.jwk import generate_private_jwk
    from pactmw.protocols.delegation import SigningKeys
    from pactmw.protocols.identity import AgentRegistry, IdentityVerifier

    sky = sky_brand([])
    with pytest.raises(ValueError, match=r"brands\.sky\.delegation\.authorization_details needs"):
        Provider(
            base_url="https://p.example",
            verifier=IdentityVerifier(audience="aud", registry=AgentRegistry([])),
            store=_NoDetailsStore(),
            brands=[sky],
            signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
        )


def test_types_are_checked_when_the_brand_is_configured() -> None:
    with pytest.raises(ValueError, match="names scope 'flights:cancel'"):
        DelegationConfig(
            scopes=SKY_SCOPES,
            login_url=LOGIN_URL,
            authorization_details=(
                AuthorizationDetailType(type=REBOOK, scope="flights:cancel", check=print),
            ),
        )
    with pytest.raises(ValueError, match="lists a type twice"):
        DelegationConfig(
            scopes=SKY_SCOPES,
            login_url=LOGIN_URL,
            authorization_details=(FLIGHT_REBOOK, FLIGHT_REBOOK),
        )
    with pytest.raises(ValueError, match="needs a schema or check"):
        AuthorizationDetailType(type=REBOOK, scope="flights:rebook")
    with pytest.raises(ValueError, match="uses 'oneOf'"):
        AuthorizationDetailType(type=REBOOK, scope="flights:rebook", schema={"oneOf": []})
    with pytest.raises(ValueError, match="must be printable ASCII"):
        AuthorizationDetailType(type="a type", scope="flights:rebook", check=print)
    with pytest.raises(ValueError, match="does not accept"):
        Brand(
            id="sky",
            name="Skyline",
            handler=sky_bot,
            delegation=DelegationConfig(
                scopes=SKY_SCOPES, login_url=LOGIN_URL, tools=sky_tools([])
            ),
        )


def test_the_consent_page_shows_each_entry_under_its_scope_escaped(env: Env) -> None:
    odd = {**Q2, "identifier": "<b>Q2</b>"}
    started = ask(env, "sky", "flights:read flights:rebook", [K7, odd], sub=new_sub())
    page = env.consent_page(started.json()["verification_uri_complete"], "alice").text
    rebook = (
        '<label class="scope"><input type="checkbox" name="scope" value="flights:rebook" checked'
        ' aria-describedby="conditions-2"> Rebook your flights</label>'
        '<ul class="conditions" id="conditions-2" data-scope="flights:rebook">'
        "<li>Only reservation K7PQ2M, to flight SK 318</li>"
        "<li>Only reservation &lt;b&gt;Q2&lt;/b&gt;, to flight SK 100</li></ul>"
    )
    assert rebook in page
    assert page.count('class="conditions"') == 1  # flights:read has none
    assert "<b>Q2</b>" not in page


def test_the_client_requests_details_and_reads_them_back(env: Env) -> None:
    from pactmw.client import (
        DeviceCodeClient,
        OAuthErrorResponse,
        delegation_scheme,
        fetch_authorization_server_metadata,
        fetch_card,
    )

    sub = new_sub()
    scheme = delegation_scheme(fetch_card(f"{env.interface('sky')}/.well-known/agent-card.json"))
    assert scheme is not None
    assert scheme.metadata_url is not None
    metadata = fetch_authorization_server_metadata(scheme.metadata_url)
    assert metadata.authorization_details_types == (REBOOK,)
    device = DeviceCodeClient(
        scheme,
        lambda: env.pa(sub)["authorization"].removeprefix("Bearer "),
        client_id="https://pa.example",
    )
    with pytest.raises(OAuthErrorResponse) as refused:
        device.start(["flights:read"], authorization_details=[K7])
    assert refused.value.error == "invalid_authorization_details"
    started = device.start(["flights:rebook"], authorization_details=[K7])
    page = env.consent_page(started.verification_uri_complete, "alice")
    decided = env.decide(
        form_action(page.text), hidden(page.text, "session"), ["flights:rebook"], user="alice"
    )
    assert decided.status_code == 303
    tokens = device.wait_for_token(started, timeout=30)
    assert [dict(entry) for entry in tokens.authorization_details] == [K7]
    assert tokens.refresh_token is not None
    refreshed = device.refresh(tokens.refresh_token)
    assert [dict(entry) for entry in refreshed.authorization_details] == [K7]
