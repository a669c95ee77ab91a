"""WSGI entry point (plain HTTP only; Daphne serves handoff.asgi with websockets)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handoff.settings")

application = get_wsgi_application()
