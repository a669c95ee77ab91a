from django.conf import settings
from django.http import HttpRequest

from webui.demo import is_demo_user


def handoff(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    return {"demo_mode": settings.HANDOFF_DEMO, "is_demo_user": bool(user and is_demo_user(user))}
