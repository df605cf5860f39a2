"""The shop's URLs, its login (django.contrib.auth), and the Provider's `/a2a/...` routes."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from pactmw.adapters.django import a2a_urlpatterns
from shop import views

urlpatterns = [
    path("", views.home, name="home"),
    path(".well-known/agent-card.json", views.brand_domain_card, name="brand-card"),
    path("orders/<str:number>", views.order, name="order"),
    path("api/agent/whoami", views.whoami, name="agent-whoami"),
    # Django REST framework: the customer's orders, for an agent holding orders:read.
    path("api/agent/orders", views.AgentOrders.as_view(), name="agent-orders"),
    # The shop's own login: pactmw's consent page sends signed-out customers here (?next=).
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]

# pactmw: /a2a/<brand>/.well-known/agent-card.json, /a2a/<brand>/message:send, the OAuth
# endpoints and consent pages of delegation (/a2a/<brand>/oauth/...), ...
urlpatterns += a2a_urlpatterns()
