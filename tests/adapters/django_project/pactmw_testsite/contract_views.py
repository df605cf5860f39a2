"""The contract suite's routes in Django (tests/adapters/contract_apps.py says what each does)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from pactmw.adapters.django import (
    delegation_required,
    parafe_action,
    personal_agent_required,
    poppy_session_required,
)


def _describe(request: HttpRequest, via: str) -> dict[str, Any]:
    caller = request.personal_agent  # type: ignore[attr-defined]
    delegation = caller.delegation if caller is not None else None
    return {
        "actor_id": caller.actor_id if caller is not None else None,
        "account": delegation.account if delegation is not None else None,
        "scopes": sorted(delegation.scopes) if delegation is not None else [],
        "via": via,
    }


def _parafe_reply(request: HttpRequest) -> HttpResponse:
    turn = request.parafe  # type: ignore[attr-defined]
    assert turn.consent is not None
    turn.complete("create_order", business_ref="C-1")
    text = json.loads(request.body)["message"]["parts"][0]["text"]  # readable again
    message = {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    return JsonResponse({"message": message})


@csrf_exempt
def echo(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        try:
            json.loads(request.body)
        except ValueError:
            return HttpResponse("body is not JSON", status=400, content_type="text/plain")
    return JsonResponse(_describe(request, "request.personal_agent"))


def public(request: HttpRequest) -> HttpResponse:
    return JsonResponse(_describe(request, "sync"))


@personal_agent_required
def decorated_sync(request: HttpRequest) -> HttpResponse:
    return JsonResponse(_describe(request, "sync"))


@personal_agent_required
async def decorated_async(request: HttpRequest) -> HttpResponse:
    return JsonResponse(_describe(request, "async"))


@personal_agent_required(optional=True)
def optional(request: HttpRequest) -> HttpResponse:
    return JsonResponse(_describe(request, "sync"))


@delegation_required("orders:read")
def scoped_sync(request: HttpRequest) -> HttpResponse:
    return JsonResponse(_describe(request, "sync"))


@delegation_required("orders:read")
async def scoped_async(request: HttpRequest) -> HttpResponse:
    return JsonResponse(_describe(request, "async"))


class ScopedMethod(View):
    """A class-based view whose method is decorated, as Django's docs decorate one."""

    @method_decorator(delegation_required("orders:read"))
    def get(self, request: HttpRequest) -> HttpResponse:
        return JsonResponse(_describe(request, "sync"))


@method_decorator(delegation_required("orders:cancel"), name="dispatch")
class ScopedDispatch(View):
    """A class-based view decorated as a whole (`name="dispatch"`)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        return JsonResponse(_describe(request, "sync"))


# A scope the Brand `acme` does not offer (it offers orders:read): every caller is refused
# (tests/adapters/test_unoffered_scopes.py).
@delegation_required("order:read")
def unoffered_sync(request: HttpRequest) -> HttpResponse:
    return JsonResponse(_describe(request, "sync"))


class UnofferedMethod(View):
    """A class-based view whose method asks for a scope `acme` does not offer."""

    @method_decorator(delegation_required("order:read"))
    def get(self, request: HttpRequest) -> HttpResponse:
        return JsonResponse(_describe(request, "sync"))


@csrf_exempt
@parafe_action("create_order")
def parafe_sync(request: HttpRequest) -> HttpResponse:
    return _parafe_reply(request)


@csrf_exempt
@parafe_action("create_order")
async def parafe_async(request: HttpRequest) -> HttpResponse:
    return _parafe_reply(request)


@csrf_exempt
@parafe_action("create_order", brand="shop")
def parafe_shop(request: HttpRequest) -> HttpResponse:
    """Parafé for a Brand the contract's settings do not have (tests of pactmw.E007)."""
    return _parafe_reply(request)


@method_decorator(csrf_exempt, name="dispatch")
class ParafeMethod(View):
    """A class-based view whose method is behind `parafe_action`, as Django's docs decorate
    one (for a Brand the contract's settings do not have)."""

    @method_decorator(parafe_action("create_order", brand="shop"))
    def post(self, request: HttpRequest) -> HttpResponse:
        return _parafe_reply(request)


@poppy_session_required("shop", "orders:read")
def poppy_orders(request: HttpRequest) -> JsonResponse:
    """A Brand's API behind a Poppy Session Token (tests/poppy/test_session_required.py)."""
    return JsonResponse({"account": request.poppy_caller.account})  # type: ignore[attr-defined]


@poppy_session_required("shop", "orders:read")
async def poppy_orders_async(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"account": request.poppy_caller.account})  # type: ignore[attr-defined]
