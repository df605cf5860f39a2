from __future__ import annotations

from django.urls import path

from pactmw.adapters.django import a2a_urlpatterns

from . import views

urlpatterns = [path("public", views.public), *a2a_urlpatterns()]
