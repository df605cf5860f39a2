from __future__ import annotations

from pactmw.adapters.django import a2a_urlpatterns

urlpatterns = [*a2a_urlpatterns()]
