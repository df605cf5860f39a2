from __future__ import annotations

from django.urls import path

from pactmw.adapters.django import a2a_urlpatterns

from . import drf_views, views

urlpatterns = [
    path("public", views.public),
    path("drf/me", drf_views.Me.as_view()),
    path("drf/orders", drf_views.Orders.as_view()),
    *a2a_urlpatterns(),
]
