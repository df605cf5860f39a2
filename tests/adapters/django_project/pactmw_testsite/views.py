"""Views of the adapter-test project; see tests/adapters/apps.py for the shared contract."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from pactmw.adapters.django import personal_agent_required


def _echo(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        try:
            json.loads(request.body)
        except ValueError:
            return HttpResponse("body is not JSON", status=400, content_type="text/plain")
    found = request.personal_agent  # type: ignore[attr-defined]
    body: dict[str, Any] = {"issuer": None, "sub": None, "actor_id": None}
    if found is not None:
        body = {"issuer": found.issuer, "sub": found.sub, "actor_id": found.actor_id}
    body.update(via="request.personal_agent", request_class=type(request).__name__)
    return JsonResponse(body)


@csrf_exempt
def echo(request: HttpRequest) -> HttpResponse:
    """Under `/a2a/`: the middleware alone guards it."""
    return _echo(request)


def public(request: HttpRequest) -> HttpResponse:
    found = request.personal_agent  # type: ignore[attr-defined]
    return JsonResponse({"public": True, "actor_id": found and found.actor_id})


@csrf_exempt
@personal_agent_required
def decorated_sync(request: HttpRequest) -> HttpResponse:
    return _echo(request)


@csrf_exempt
@personal_agent_required
async def decorated_async(request: HttpRequest) -> HttpResponse:
    # Reading the body of an async view is fine here: it is small and already buffered.
    return _echo(request)
