"""Agent Cards: validation, interface choice by binding, the delegation scheme, and fetching
from the Provider, from a Brand domain that redirects, and from a hand-written card."""

from __future__ import annotations

import asyncio
import copy
from typing import Any
from urllib.parse import quote

import pytest

from pactmw.client import (
    A2AClient,
    AgentCredentials,
    AsyncA2AClient,
    AsyncDeviceCodeClient,
    CardInvalid,
    DeviceCodeClient,
    HTTPError,
    MessageReply,
    ResponseInvalid,
    SyncTransport,
    URLRefused,
    afetch_card,
    card_interface_url,
    delegation_scheme,
    fetch_card,
    parse_card,
)
from pactmw.client.transport import AsyncioTransport
from tests.client.support import SCOPES, Provided, Route, StaticServer, base_card, delegated_card
from tests.support.jwks_server import JwksServer, Mode
from tests.support.tls import TestCA


def without(document: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != key}


@pytest.mark.parametrize(
    "document",
    [
        [],
        without(base_card(), "name"),
        {**base_card(), "name": ""},
        without(base_card(), "description"),
        without(base_card(), "version"),
        {**base_card(), "supportedInterfaces": []},
        {**base_card(), "supportedInterfaces": [{"url": "x", "protocolBinding": "HTTP+JSON"}]},
        without(base_card(), "capabilities"),
        {**base_card(), "defaultInputModes": "text/plain"},
        {**base_card(), "skills": [{"id": "s", "name": "S", "description": "d"}]},
        {**base_card(), "provider": {"organization": "P", "url": "not a url"}},
        {**base_card(), "securitySchemes": {"x": "Bearer"}},
        {**base_card(), "securityRequirements": {}},
    ],
)
def test_invalid_cards(document: Any) -> None:
    with pytest.raises(CardInvalid):
        parse_card(document)


def test_interface_is_chosen_by_binding_and_version_not_position() -> None:
    document = base_card()
    document["supportedInterfaces"] = [
        {"url": "https://p.example/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "https://p.example/old", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
        {"url": "https://p.example/a2a/", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ]
    card = parse_card(document)
    assert card_interface_url(card) == "https://p.example/a2a"
    assert card_interface_url(card, binding="JSONRPC") == "https://p.example/rpc"
    with pytest.raises(CardInvalid, match="GRPC"):
        card_interface_url(card, binding="GRPC")
    insecure = parse_card(base_card("http://p.example/a2a"))
    with pytest.raises(URLRefused):
        card_interface_url(insecure)


def test_delegation_scheme_is_found_by_shape() -> None:
    scheme = delegation_scheme(parse_card(delegated_card()))
    assert scheme is not None
    assert (scheme.name, scheme.identity_scheme) == ("userDelegation", "platformJwt")
    assert scheme.scope_ids == ("b:write", "a:read")  # card order
    assert scheme.refresh_url == scheme.token_url
    assert scheme.metadata_url is not None
    assert scheme.metadata_url.endswith("/oauth/.well-known/oauth-authorization-server")


def broken(path: list[str], value: Any) -> dict[str, Any]:
    card = copy.deepcopy(delegated_card())
    target = card
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return card


FLOW = ["securitySchemes", "userDelegation", "oauth2SecurityScheme", "flows", "deviceCode"]


@pytest.mark.parametrize(
    "document",
    [
        base_card(),
        broken(["securityRequirements"], [{"schemes": {"platformJwt": {"list": []}}}]),
        broken(["securitySchemes", "platformJwt", "httpAuthSecurityScheme", "scheme"], "Basic"),
        broken([*FLOW, "tokenUrl"], "/relative"),
        broken([*FLOW, "scopes"], {"has space": "x"}),
        broken([*FLOW[:-1], "deviceCode"], None),
        broken(["securitySchemes", "userDelegation", "extra"], {}),
    ],
)
def test_no_delegation_scheme(document: dict[str, Any]) -> None:
    assert delegation_scheme(parse_card(document)) is None


# -- over HTTP ----------------------------------------------------------------------------------


def test_fetch_from_the_provider(provided: Provided) -> None:
    card = fetch_card(provided.card_url("acme"))
    assert card.name == "Acme Shop"
    assert card_interface_url(card) == provided.interface("acme")
    scheme = delegation_scheme(card)
    assert scheme is not None
    assert scheme.scope_ids == tuple(SCOPES)
    assert delegation_scheme(fetch_card(provided.card_url("plain"))) is None
    with pytest.raises(HTTPError) as caught:
        fetch_card(provided.card_url("nobody"))
    assert caught.value.status == 404


def test_a_url_that_wants_a_token_is_no_card_not_a_refused_token(provided: Provided) -> None:
    # The card is fetched anonymously: a 401 there (a route that wants a JWT, given for the
    # card's URL) is a plain HTTPError, not IdentityRejected, whose text blames the agent's
    # keys, issuer and audience.
    with pytest.raises(HTTPError) as caught:
        fetch_card(provided.interface("acme") + "/tasks")
    assert type(caught.value) is HTTPError
    assert caught.value.status == 401
    assert str(caught.value).endswith(": HTTP 401")


def test_brand_domain_redirects_to_the_card(
    provided: Provided, static: StaticServer, me: AgentCredentials
) -> None:
    """`https://{brandDomain}/.well-known/agent-card.json` answering 302 (PACT §2.1)."""
    brand_card = static.redirect("/.well-known/agent-card.json", "/go")
    static.redirect("/go", provided.card_url("plain"), status=308)
    card = fetch_card(brand_card)
    assert card.url == provided.card_url("plain")
    assert static.hits == ["/.well-known/agent-card.json", "/go"]
    reply = A2AClient.connect(brand_card, me).send("hello")
    assert isinstance(reply, MessageReply)
    assert reply.text == "turn 1: hello"
    card = asyncio.run(afetch_card(brand_card))
    assert card.name == "Plain Shop"


def test_hand_written_card_with_the_interface_not_first(
    provided: Provided, static: StaticServer, me: AgentCredentials
) -> None:
    document = base_card(provided.interface("plain"))
    document["supportedInterfaces"].insert(
        0,
        {"url": static.url("/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    )
    document["supportedInterfaces"].insert(
        1,
        {"url": static.url("/v03"), "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
    )
    url = static.json("/card.json", document)
    client = A2AClient.connect(url, me)
    assert client.url == provided.interface("plain")
    reply = client.send("which interface?")
    assert isinstance(reply, MessageReply)

    async def run() -> MessageReply:
        aclient = await AsyncA2AClient.connect(url, me)
        result = await aclient.send("and async?")
        assert isinstance(result, MessageReply)
        return result

    assert asyncio.run(run()).text == "turn 1: and async?"
    assert "/rpc" not in static.hits
    assert "/v03" not in static.hits


def test_a_card_that_is_not_json(static: StaticServer) -> None:
    url = static.route("/card.json", Route(200, b"<html>"))
    with pytest.raises(ResponseInvalid):
        fetch_card(url)


def test_a_web_page_where_the_card_should_be_is_an_invalid_card_that_says_so(
    static: StaticServer,
) -> None:
    """A Brand's home page or a login page at the card URL: the error says what came instead
    of a card, not only that it is not JSON; an answer that claims JSON says nothing more."""
    page = static.route(
        "/page", Route(200, b"<html>", {"Content-Type": "text/html; charset=utf-8"})
    )
    for fetch in (fetch_card, lambda url: asyncio.run(afetch_card(url))):
        with pytest.raises(CardInvalid) as caught:
            fetch(page)
        assert str(caught.value) == (
            f"{page}: the answer is not JSON (invalid JSON): a text/html page, not an Agent"
            " Card (is this the card's URL?)"
        )
    cut = static.route("/cut", Route(200, b"{", {"Content-Type": "application/json"}))
    with pytest.raises(CardInvalid) as plain:
        fetch_card(cut)
    assert str(plain.value) == f"{cut}: the answer is not JSON (invalid JSON)"


def test_a_redirect_to_a_malformed_url_is_refused(static: StaticServer) -> None:
    """A `Location` that is not a URL at all (an unclosed IPv6 bracket) is a refused URL, like
    any other bad redirect target; it escaped as a bare ValueError from `urljoin`."""
    url = static.redirect("/.well-known/agent-card.json", "http://[::1/card.json")
    with pytest.raises(URLRefused):
        fetch_card(url)
    with pytest.raises(URLRefused):
        asyncio.run(afetch_card(url))


def test_a_host_name_no_resolver_takes_is_refused(static: StaticServer) -> None:
    """A label longer than 63 characters cannot be encoded for a DNS lookup: the URL is
    refused (the lookup raised a bare UnicodeError in both transports)."""
    url = static.redirect("/card.json", "https://" + "a" * 64 + ".example/card.json")
    with pytest.raises(URLRefused):
        fetch_card(url)
    with pytest.raises(URLRefused):
        asyncio.run(afetch_card(url))
    long_label = base_card("https://" + "a" * 64 + ".example/a2a")
    with pytest.raises(URLRefused):
        card_interface_url(parse_card(long_label))


def test_an_interface_url_with_non_ascii_characters_is_sent_percent_encoded(
    static: StaticServer, me: AgentCredentials
) -> None:
    """A card's interface URL is the Provider's text: `/a2a/café` is requested as
    `/a2a/caf%C3%A9` (UTF-8, RFC 3986 §2.5). Encoding the request line raised a bare
    UnicodeEncodeError for any character past Latin-1 (and sent Latin-1 bytes raw)."""
    reply = {
        "message": {
            "messageId": "r-1",
            "contextId": "ctx-1",
            "role": "ROLE_AGENT",
            "parts": [{"text": "bonjour"}],
        }
    }
    for path in ("/a2a/café", "/a2a/€uro shop"):
        quoted = quote(path)
        static.json(quoted + "/message:send", reply)
        url = static.json(quoted + "/card.json", base_card(static.url(path)))
        client = A2AClient.connect(url, me)
        assert message_text(client.send("hi", context_id="ctx-1")) == "bonjour"

        async def run(url: str = url) -> str:
            aclient = await AsyncA2AClient.connect(url, me)
            return message_text(await aclient.send("hi", context_id="ctx-1"))

        assert asyncio.run(run()) == "bonjour"
        assert static.hits[-1] == quoted + "/message:send"


def message_text(result: object) -> str:
    assert isinstance(result, MessageReply), result
    return result.text


@pytest.mark.parametrize("host", ["shop\x00.example", "shop .example", "shop\x7f.example"])
def test_a_host_name_with_control_characters_is_refused(static: StaticServer, host: str) -> None:
    """A NUL made the asyncio lookup raise a bare ValueError (`embedded null character`) and
    the blocking one a misleading 'cannot connect'; no host name holds controls or spaces."""
    url = static.redirect("/card.json", f"https://{host}/card.json")
    with pytest.raises(URLRefused, match="host name"):
        fetch_card(url)
    with pytest.raises(URLRefused, match="host name"):
        asyncio.run(afetch_card(url))


def test_an_interface_url_with_a_lone_surrogate_is_refused(
    static: StaticServer, me: AgentCredentials
) -> None:
    """JSON's `\\ud800` escape gives a string with no UTF-8 bytes: such a URL cannot be sent,
    so the card is refused (each send raised a bare UnicodeEncodeError). Any JSON answer
    holding a lone surrogate is; `check_url` refuses such a URL given any other way."""
    url = static.json("/card.json", base_card(static.url("/a2a/\ud800")))
    with pytest.raises(ResponseInvalid, match="surrogate"):
        A2AClient.connect(url, me)

    async def run() -> None:
        await AsyncA2AClient.connect(url, me)

    with pytest.raises(ResponseInvalid, match="surrogate"):
        asyncio.run(run())


def test_a_redirect_from_https_to_plain_http_is_refused(static: StaticServer) -> None:
    """A card fetched over https that redirects to http (even to loopback, where plain http is
    allowed) would move the agent onto a channel anyone on the path can read: refused, the
    error naming both URLs. https to https is followed as before."""
    plain = static.json("/card.json", base_card(static.url("/a2a/acme")))
    ca = TestCA()
    with (
        JwksServer(server_context=ca.server_context("127.0.0.1")) as brand,
        JwksServer(server_context=ca.server_context("127.0.0.1")) as provider,
    ):
        provider.set_json("/card.json", base_card(provider.url_for("/a2a/acme")))
        brand.mode = Mode.REDIRECT
        trusted = ca.client_context()
        sync, aio = SyncTransport(ssl_context=trusted), AsyncioTransport(ssl_context=trusted)
        url = brand.url_for("/.well-known/agent-card.json")

        brand.redirect_location = provider.url_for("/card.json")
        assert fetch_card(url, transport=sync).url == provider.url_for("/card.json")
        assert asyncio.run(afetch_card(url, transport=aio)).name == "Acme"

        brand.redirect_location = plain
        with pytest.raises(URLRefused) as caught:
            fetch_card(url, transport=sync)
        assert str(caught.value) == f"{url} redirected to plain http {plain}: refused"
        with pytest.raises(URLRefused):
            asyncio.run(afetch_card(url, transport=aio))
    assert static.hits == []


def test_an_https_card_naming_a_plain_http_interface_is_refused(
    static: StaticServer, me: AgentCredentials
) -> None:
    """A card fetched over https that names a plain http interface (loopback, where plain http
    is otherwise allowed) would send the agent's token where anyone on the path reads it: the
    same downgrade as an https to http redirect. Refused before any request, the error naming
    the card and the interface; an https card naming https, and an http card naming http (local
    development), are taken as before."""
    plain = static.url("/a2a/acme")
    ca = TestCA()
    with JwksServer(server_context=ca.server_context("127.0.0.1")) as server:
        url = server.url_for("/card.json")
        server.set_json("/card.json", base_card(plain))
        trusted = ca.client_context()
        sync, aio = SyncTransport(ssl_context=trusted), AsyncioTransport(ssl_context=trusted)
        said = (
            f"agent card at {url}: plain http interface {plain} refused (the card came over https)"
        )

        card = fetch_card(url, transport=sync)
        with pytest.raises(URLRefused) as caught:
            card_interface_url(card)
        assert str(caught.value) == said
        with pytest.raises(URLRefused, match="plain http interface"):
            A2AClient.from_card(card, me)
        with pytest.raises(URLRefused, match="plain http interface"):
            AsyncA2AClient.from_card(card, me)
        with pytest.raises(URLRefused, match="plain http interface"):
            A2AClient.connect(url, me, transport=sync)

        async def run() -> None:
            await AsyncA2AClient.connect(url, me, transport=aio)

        with pytest.raises(URLRefused, match="plain http interface"):
            asyncio.run(run())

        server.set_json("/card.json", base_card(server.url_for("/a2a/acme")))
        assert A2AClient.connect(url, me, transport=sync).url == server.url_for("/a2a/acme")
    assert static.hits == []
    local = static.json("/card.json", base_card(plain))
    assert A2AClient.connect(local, me).url == plain


@pytest.mark.parametrize(
    ("field", "what"),
    [
        ("deviceAuthorizationUrl", "device authorization endpoint"),
        ("tokenUrl", "token endpoint"),
        ("refreshUrl", "refresh endpoint"),
    ],
)
def test_an_https_card_naming_a_plain_http_token_endpoint_is_refused(
    static: StaticServer, me: AgentCredentials, field: str, what: str
) -> None:
    """The delegated endpoints take the agent's token, a device code or a refresh token: from
    an https card, plain http there is refused by the device-code clients as for the
    interface. The metadata URL carries no token and is taken as the card names it."""
    plain = static.url(f"/oauth/{field}")
    document = delegated_card()
    document["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]["oauth2MetadataUrl"] = (
        static.url("/oauth/metadata")
    )
    ca = TestCA()
    with JwksServer(server_context=ca.server_context("127.0.0.1")) as server:
        url = server.url_for("/card.json")
        server.set_json("/card.json", document)
        transport = SyncTransport(ssl_context=ca.client_context())
        scheme = delegation_scheme(fetch_card(url, transport=transport))
        assert scheme is not None
        assert scheme.card_url == url
        DeviceCodeClient(scheme, me)  # the https endpoints and the http metadata URL: taken

        document["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]["flows"][
            "deviceCode"
        ][field] = plain
        server.set_json("/card.json", document)
        scheme = delegation_scheme(fetch_card(url, transport=transport))
        assert scheme is not None
        said = f"agent card at {url}: plain http {what} {plain} refused (the card came over https)"
        with pytest.raises(URLRefused) as caught:
            DeviceCodeClient(scheme, me)
        assert str(caught.value) == said
        with pytest.raises(URLRefused, match=what):
            AsyncDeviceCodeClient(scheme, me)
    assert static.hits == []
