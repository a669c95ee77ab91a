import time

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from handoff.live import health


@login_not_required
@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        body = health.report(client, time.time(), settings.HANDOFF_HEARTBEAT_STALE_AFTER)
    finally:
        client.close()
    return JsonResponse(body, status=200 if body["status"] == "ok" else 503)
