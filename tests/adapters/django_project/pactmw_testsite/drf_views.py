"""DRF views of the test project (tests/adapters/test_django_rest_framework.py)."""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework.permissions import BasePermission, DjangoModelPermissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import ViewSet

from pactmw.adapters.django.models import Grant
from pactmw.adapters.django.rest_framework import HasDelegatedScope, IsPersonalAgent
from pactmw.protocols.identity import PersonalAgent


class IsApiClient(BasePermission):  # type: ignore[misc]
    def has_permission(self, request: Request, view: Any) -> bool:
        return request.auth == "key-123" or isinstance(request.auth, PersonalAgent)


def _describe(request: Request) -> dict[str, Any]:
    caller = request.auth
    delegation = caller.delegation
    return {
        "user": str(request.user),
        "actor_id": caller.actor_id,
        "account": delegation.account if delegation is not None else None,
    }


class Me(APIView):  # type: ignore[misc]
    permission_classes: ClassVar[list[Any]] = [IsPersonalAgent]

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class Orders(APIView):  # type: ignore[misc]
    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]
    required_scopes: ClassVar[list[str]] = ["orders:read"]

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class UnofferedOrders(APIView):  # type: ignore[misc]
    """A scope the Brand `acme` does not offer (it offers orders:read)."""

    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]
    required_scopes: ClassVar[list[str]] = ["order:read"]

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class Tickets(ViewSet):  # type: ignore[misc]
    """A ViewSet (routed by a router, its view has no `view_class`) needing a scope."""

    permission_classes: ClassVar[list[Any]] = [IsPersonalAgent, HasDelegatedScope]
    required_scopes: ClassVar[list[str]] = ["orders:cancel"]

    def list(self, request: Request) -> Response:
        return Response(_describe(request))


class StringScopes(APIView):  # type: ignore[misc]
    """`required_scopes` written as a string, not a list: a mistake the check reports."""

    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]
    required_scopes = "orders:read"

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class IntScopes(APIView):  # type: ignore[misc]
    """`required_scopes` that is no list at all: a mistake the check reports."""

    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]
    required_scopes = 3

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class BlankScope(APIView):  # type: ignore[misc]
    """A list of scopes holding an empty one, which no delegation can hold."""

    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]
    required_scopes: ClassVar[list[str]] = ["orders:read", ""]

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class NumberScope(APIView):  # type: ignore[misc]
    """A list of scopes holding a number, no scope's name."""

    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]
    required_scopes: ClassVar[list[object]] = ["orders:read", 7]

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class GeneratorScopes(APIView):  # type: ignore[misc]
    """Scopes in a generator, which the first request would use up."""

    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]
    required_scopes = (scope for scope in ["orders:read"])

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class SetScopes(APIView):  # type: ignore[misc]
    """Scopes in a set: django-oauth-toolkit's `TokenHasScope` takes any iterable of names."""

    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]
    required_scopes: ClassVar[set[str]] = {"orders:read"}

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class NoScopes(APIView):  # type: ignore[misc]
    """`HasDelegatedScope` without `required_scopes`: a mistake the check reports."""

    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class AnyDelegation(APIView):  # type: ignore[misc]
    """`required_scopes = []`, written out: any delegation will do."""

    permission_classes: ClassVar[list[Any]] = [HasDelegatedScope]
    required_scopes: ClassVar[list[str]] = []

    def get(self, request: Request) -> Response:
        return Response(_describe(request))


class Either(APIView):  # type: ignore[misc]
    permission_classes: ClassVar[list[Any]] = [IsApiClient]

    def get(self, request: Request) -> Response:
        return Response({"auth": "personal agent" if request.auth != "key-123" else "api key"})


class ModelPermissions(APIView):  # type: ignore[misc]
    """Under DRF's `DjangoModelPermissions`, as a site's `DEFAULT_PERMISSION_CLASSES` may put
    every view: reading needs no permission, writing needs Django's "Can add"."""

    permission_classes: ClassVar[list[Any]] = [DjangoModelPermissions]
    queryset = Grant.objects.none()

    def get(self, request: Request) -> Response:
        return Response({"user": str(request.user)})

    def post(self, request: Request) -> Response:
        return Response({"user": str(request.user)})
