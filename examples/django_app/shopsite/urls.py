"""The shop's URLs, plus the Provider's `/a2a/...` routes from pactmw."""

from django.contrib import admin
from django.urls import path

from pactmw.adapters.django import a2a_urlpatterns
from shop import views

urlpatterns = [
    path("", views.home, name="home"),
    path("orders/<str:number>", views.order, name="order"),
    path("api/agent/whoami", views.whoami, name="agent-whoami"),
    path("admin/", admin.site.urls),
]

# pactmw: /a2a/<brand>/.well-known/agent-card.json, /a2a/<brand>/message:send, ...
urlpatterns += a2a_urlpatterns()
