"""`@parafe_action` on an app's own endpoint: Starlette, plain WSGI and Django (the Flask one
runs in the Flask example, `test_flask_example.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import flask
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from werkzeug.test import Client
from werkzeug.wrappers import Request as WerkzeugRequest
from werkzeug.wrappers import Response as WerkzeugResponse

from pactmw.adapters import asgi, wsgi
from pactmw.adapters import flask as flask_adapter
from pactmw.core.fetch import FetchPolicy
from pactmw.protocols.parafe import EXTENSION_URI, BrokerKeys, ReceiptVerifier
from pactmw.provider.parafe import ParafeAgent, ParafeConfig
from tests.parafe_integration.support import PERMISSIONS, SCOPE, SHOP_AGENT, World, a2a_message
from tests.support.net import loopback_client, unread_body_post
from tests.support.servers import REPO, uvicorn_server, werkzeug_server


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    world = World(tmp_path_factory.mktemp("parafe-adapters"), shop_alg="ES256")
    yield world
    world.close()


@pytest.fixture
def agent(world: World) -> ParafeAgent:
    return ParafeAgent(
        ParafeConfig(
            agent_id=SHOP_AGENT,
            broker_url=world.url,
            allow_http_broker_on_loopback=True,
            signing_key=world.shop_key,
            scope_requirements={
                SCOPE: {"permissions": PERMISSIONS, "minimum_authorization_modality": "autonomous"}
            },
        )
    )


def verify(world: World, receipt: str) -> Any:
    keys = BrokerKeys(world.url, fetch_policy=FetchPolicy(allow_http_on_loopback=True))
    return ReceiptVerifier(keys).verify_action_receipt(receipt)


def data_of(body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = body["message"]["metadata"][EXTENSION_URI]
    return result


def test_starlette_endpoint(world: World, agent: ParafeAgent) -> None:
    @asgi.parafe_action("create_order", agent)
    async def orders(request: Request) -> JSONResponse:
        turn = asgi.current_parafe(request)
        assert turn is not None
        assert turn.consent is not None
        sent = await request.json()  # the body is still readable
        turn.complete("create_order", business_ref="S-1")
        reply = {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}
        return JSONResponse({"message": reply, "echo": sent["message"]["parts"][0]["text"]})

    @asgi.parafe_action("issue_refund")  # the agent comes from app.state.pactmw_parafe
    async def refund(request: Request) -> PlainTextResponse:
        return PlainTextResponse("refunded")

    app = Starlette(routes=[Route("/orders", orders, methods=["POST"])])
    app.router.routes.append(Route("/refund", refund, methods=["POST"]))
    app.state.pactmw_parafe = agent
    presenter = world.presenter()
    message = presenter.attach(a2a_message("lamp"))
    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        ok = client.post("/orders", json={"message": message})
        assert ok.status_code == 200, ok.text
        assert ok.json()["echo"] == "lamp"
        (receipt,) = data_of(ok.json())["action_receipts"]
        checked = verify(world, receipt)
        assert (checked.action, checked.business_ref, checked.result) == (
            "create_order",
            "S-1",
            "success",
        )
        assert int(ok.headers["content-length"]) == len(ok.content)
        # A reply carrying Parafé data names the extension, as the refusal below does.
        assert ok.headers["a2a-extensions"] == EXTENSION_URI

        again = client.post("/orders", json={"message": message})
        assert again.status_code == 403
        assert data_of(again.json())["error"]["code"] == "INVALID_PROOF"
        assert again.headers["a2a-extensions"] == EXTENSION_URI

        excluded = client.post("/refund", json={"message": presenter.attach(a2a_message("refund"))})
        assert excluded.status_code == 403
        data = data_of(excluded.json())
        assert data["error"]["code"] == "SCOPE_VIOLATION"
        assert verify(world, data["action_receipts"][0]).error == "excluded"
        assert client.post("/orders", content=b"not json").status_code == 403
        # Bodies over 1 MiB are refused unread, declared or chunked (so each goes on a
        # connection of its own).
        declared = unread_body_post(client, "/orders", content=b"x" * (1024 * 1024 + 1))
        assert declared.status_code == 413
        chunked = iter([b"x" * 600_000, b"y" * 600_000])
        assert unread_body_post(client, "/orders", content=chunked).status_code == 413


def test_wsgi_application(world: World, agent: ParafeAgent) -> None:
    @wsgi.parafe_action("create_order", agent, refusal_status=200)
    def application(environ: Any, start_response: Any) -> Any:
        request = WerkzeugRequest(environ)
        turn = wsgi.current_parafe(environ)
        assert turn is not None
        assert turn.consent is not None
        assert request.get_json()["message"]["parts"][0]["text"] == "mug"
        reply = {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}
        return WerkzeugResponse(json.dumps(reply), content_type="application/json")(
            environ, start_response
        )

    client = Client(application)
    message = world.presenter().attach(a2a_message("mug"))
    ok = client.post("/", json={"message": message})
    assert ok.status_code == 200
    reply = ok.get_json()
    (receipt,) = reply["metadata"][EXTENSION_URI]["action_receipts"]  # a bare message
    assert verify(world, receipt).action == "create_order"
    assert int(ok.headers["Content-Length"]) == len(ok.get_data())
    assert ok.headers["A2A-Extensions"] == EXTENSION_URI
    refused = client.post("/", json={"message": message})
    assert refused.status_code == 200  # refusal_status
    assert data_of(refused.get_json())["error"]["code"] == "INVALID_PROOF"
    assert client.post("/", data=b"x" * (1024 * 1024 + 1)).status_code == 413


def test_an_endpoints_own_extensions_keep_their_place_beside_parafe(
    world: World, agent: ParafeAgent
) -> None:
    other = "https://example.com/extensions/loyalty/v1"

    @wsgi.parafe_action("create_order", agent)
    def application(environ: Any, start_response: Any) -> Any:
        reply = {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}
        headers = {"A2A-Extensions": other}
        return WerkzeugResponse(
            json.dumps(reply), content_type="application/json", headers=headers
        )(environ, start_response)

    client = Client(application)
    ok = client.post("/", json={"message": world.presenter().attach(a2a_message("mug"))})
    assert ok.status_code == 200
    assert ok.headers.getlist("A2A-Extensions") == [f"{other},{EXTENSION_URI}"]


def out_of_stock() -> dict[str, Any]:
    return {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "Out of stock."}]}


def assert_failed_receipt(world: World, status: int, body: dict[str, Any]) -> None:
    """A view that answered 409 without `complete(..., failed=...)`: its receipt says the
    permitted action failed, with the status, never `success`."""
    assert status == 409
    (receipt,) = data_of(body)["action_receipts"]
    checked = verify(world, receipt)
    assert (checked.action, checked.result, checked.error) == ("create_order", "error", "failed")
    assert checked.claims["error_description"] == "the endpoint answered 409"


def test_an_error_answer_is_not_a_success_receipt(world: World, agent: ParafeAgent) -> None:
    @asgi.parafe_action("create_order", agent)
    async def starlette_view(request: Request) -> JSONResponse:
        return JSONResponse({"message": out_of_stock()}, status_code=409)

    @wsgi.parafe_action("create_order", agent)
    def wsgi_view(environ: Any, start_response: Any) -> Any:
        body = json.dumps({"message": out_of_stock()})
        return WerkzeugResponse(body, status=409, content_type="application/json")(
            environ, start_response
        )

    starlette_app = Starlette(routes=[Route("/orders", starlette_view, methods=["POST"])])
    with uvicorn_server(starlette_app) as base, loopback_client(base_url=base) as client:
        answered = client.post("/orders", json=world.presenter().attach(a2a_message("lamp")))
        assert_failed_receipt(world, answered.status_code, answered.json())
    with werkzeug_server(wsgi_view) as base, loopback_client(base_url=base) as client:
        answered = client.post("/", json=world.presenter().attach(a2a_message("lamp")))
        assert_failed_receipt(world, answered.status_code, answered.json())


def test_flask_error_answer_is_not_a_success_receipt(world: World) -> None:
    parafe = world.parafe_table()
    del parafe["file_receipts"], parafe["credential_file"]
    app = flask.Flask(__name__)
    app.config["PACTMW"] = {
        "base_url": "https://shop.example",
        "audience": "https://shop.example/a2a",
        "store": "memory://",
        "brands": {"shop": {"handler": "examples.bots:order_bot", "parafe": parafe}},
    }
    flask_adapter.Pactmw(app)

    @app.post("/orders")
    @flask_adapter.parafe_action("create_order")
    def orders() -> Any:
        return {"message": out_of_stock()}, 409

    with werkzeug_server(app) as base, loopback_client(base_url=base) as client:
        answered = client.post("/orders", json=world.presenter().attach(a2a_message("lamp")))
        assert_failed_receipt(world, answered.status_code, answered.json())


DJANGO_SCRIPT = r"""
import json, os, sys
import django
from django.conf import settings

world = json.loads(os.environ["PARAFE_WORLD"])
settings.configure(
    DEBUG=False,
    SECRET_KEY="test-only",
    ALLOWED_HOSTS=["testserver"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=[],
    PACTMW={
        "base_url": "https://shop.example",
        "audience": "https://shop.example/a2a",
        "agents": [],
        "store": "memory://",
        "brands": {"shop": {"handler": "examples.bots:order_bot", "parafe": world["parafe"]}},
    },
)
django.setup()

from django.http import JsonResponse
from django.test import Client
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from pactmw.adapters.django import parafe_action

def reply(request):
    request.parafe.complete("create_order", business_ref="D-1")
    message = {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}
    return JsonResponse({"message": message})

@csrf_exempt
@parafe_action("create_order")
def sync_view(request):
    return reply(request)

@csrf_exempt
@parafe_action("create_order", brand="shop")
async def async_view(request):
    return reply(request)

@csrf_exempt
@parafe_action("create_order")
def failing_view(request):
    message = {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "Out of stock."}]}
    return JsonResponse({"message": message}, status=409)

urlpatterns = [path("sync", sync_view), path("async", async_view), path("failing", failing_view)]

client = Client()
out = {}
for name, message in (("sync", world["sync"]), ("async", world["async"])):
    for attempt in ("first", "again"):
        response = client.post(
            "/" + name, data=json.dumps({"message": message}), content_type="application/json"
        )
        out[f"{name}-{attempt}"] = [
            response.status_code, json.loads(response.content), response.get("A2A-Extensions")
        ]
response = client.post(
    "/failing", data=json.dumps({"message": world["failing"]}), content_type="application/json"
)
out["failing"] = [response.status_code, json.loads(response.content)]
print(json.dumps(out))
"""


def test_django_views(world: World) -> None:
    parafe = world.parafe_table()
    del parafe["file_receipts"], parafe["credential_file"]
    payload = {
        "parafe": parafe,
        "sync": world.presenter().attach(a2a_message("lamp")),
        "async": world.presenter().attach(a2a_message("lamp")),
        "failing": world.presenter().attach(a2a_message("lamp")),
    }
    env = {
        **os.environ,
        "PARAFE_WORLD": json.dumps(payload),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", DJANGO_SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("sync", "async"):
        status, body, extensions = out[f"{name}-first"]
        assert status == 200, body
        assert extensions == EXTENSION_URI
        (receipt,) = data_of(body)["action_receipts"]
        checked = verify(world, receipt)
        assert (checked.action, checked.business_ref) == ("create_order", "D-1")
        status, body, extensions = out[f"{name}-again"]
        assert status == 403
        assert extensions == EXTENSION_URI
        assert data_of(body)["error"]["code"] == "INVALID_PROOF"
    assert_failed_receipt(world, *out["failing"])
