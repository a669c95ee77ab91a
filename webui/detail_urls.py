"""Routes of the detail area (see webui/urls.py)."""

urlpatterns: list = []
