"""ASGI entry point: `daphne handoff.asgi:application` serves pages and websockets."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handoff.settings")

# Set up Django (apps, settings) before anything imports models through the consumers.
from webui.handler import get_asgi_application

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from webui.routing import websocket_urlpatterns  # noqa: E402
from webui.runtime import settle, switch_often  # noqa: E402
from webui.timing import ServerTiming  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": ServerTiming(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

# Last: what is loaded by now lives as long as the process (webui/runtime.py).
settle(settings.HANDOFF_WEB_GC_THRESHOLD)
switch_often(settings.HANDOFF_WEB_SWITCH_INTERVAL_US)
