"""Top-level URLs: the web UI (pages, API, /healthz), sign-in, and the admin."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("webui.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
]
