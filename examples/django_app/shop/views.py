"""The shop's own pages, and one view only personal agents may call."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pactmw.adapters.django import get_provider, personal_agent_required, to_django
from pactmw.adapters.django.rest_framework import HasDelegatedScope, PersonalAgentAuthentication
from pactmw.provider import brand_domain_card as build_brand_domain_card
from pactmw.provider import card_url
from shop.models import Order
from shop.tools import list_orders


def home(request: HttpRequest) -> HttpResponse:
    """How to get support, and an order-status lookup form."""
    number = request.GET.get("order", "").strip().upper()
    order = Order.objects.filter(number=number).first() if number else None
    brand = next(iter(settings.PACTMW.get("brands", {})), "shop")
    return render(
        request,
        "shop/home.html",
        {
            "number": number,
            "order": order,
            "card_url": f"/a2a/{brand}/.well-known/agent-card.json",
        },
    )


def order(request: HttpRequest, number: str) -> JsonResponse:
    """One order as JSON."""
    found = Order.objects.filter(number=number.upper()).first()
    if found is None:
        raise Http404("no such order")
    return JsonResponse(found.as_dict())


@personal_agent_required  # 401 with a Bearer challenge unless a personal agent's JWT verifies
def whoami(request: HttpRequest) -> JsonResponse:
    """Who is calling: the verified personal agent and the user it acts for."""
    agent = request.personal_agent  # type: ignore[attr-defined]
    return JsonResponse({"issuer": agent.issuer, "sub": agent.sub, "actor_id": agent.actor_id})


def brand_domain_card(request: HttpRequest) -> HttpResponse:
    """The shop's own domain points personal agents at its card (PACT §2.1)."""
    provider = get_provider()
    brand_id = next(iter(provider.brands))
    return to_django(build_brand_domain_card(card_url(provider.base_url, brand_id)))


class AgentOrders(APIView):  # type: ignore[misc]
    """The signed-in customer's orders, for a personal agent they delegated `orders:read` to
    (Django REST framework: pactmw's authentication and permission classes)."""

    authentication_classes = (PersonalAgentAuthentication,)
    permission_classes = (HasDelegatedScope,)
    required_scopes = ("orders:read",)
    renderer_classes = (JSONRenderer,)

    def get(self, request: Request) -> Response:
        # request.auth is the verified PersonalAgent; its delegation names the Brand account
        # (a django.contrib.auth user id) the customer signed in with on the consent page.
        account = request.auth.delegation.account
        return Response({"orders": list_orders(account)})
