from __future__ import annotations

from django.urls import path

from pactmw.adapters.django import a2a_urlpatterns

from . import views

# The site's own guarded views too: under the protected prefix (the middleware) and decorated.
urlpatterns = [
    path("public", views.public),
    path("a2a/echo", views.echo),
    path("decorated-sync", views.decorated_sync),
    path("decorated-async", views.decorated_async),
    *a2a_urlpatterns(),
]
