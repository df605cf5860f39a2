from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("a2a/echo", views.echo),
    path("public", views.public),
    path("decorated-sync", views.decorated_sync),
    path("decorated-async", views.decorated_async),
]
