import time

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from handoff import conf
from handoff.live import health


@login_not_required
@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    client = conf.redis_client(timeout=1)
    try:
        body = health.report(
            client, time.time(), settings.HANDOFF_HEARTBEAT_STALE_AFTER, conf.stream_limits()
        )
    finally:
        client.close()
    return JsonResponse(body, status=200 if body["status"] == "ok" else 503)
