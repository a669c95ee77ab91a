"""Routes of the export area (see webui/urls.py)."""

urlpatterns: list = []
