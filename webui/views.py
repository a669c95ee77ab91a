"""Pages outside the cluster areas: ``/healthz`` and the alert runbooks."""

import time

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
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


RUNBOOKS = settings.BASE_DIR / "docs" / "runbooks"


@login_not_required
@require_safe
def runbook(request: HttpRequest, name: str = "README") -> HttpResponse:
    """A page of docs/runbooks as plain text: the ``runbook_url`` of each alert rule
    (deploy/prometheus). Public: the pages are documentation, no cluster data. Only names
    of files in that folder are served."""
    pages = {page.stem: page for page in RUNBOOKS.glob("*.md")}
    if name not in pages:
        raise Http404(f"no runbook named {name[:100]!r}")
    return HttpResponse(pages[name].read_text(), content_type="text/plain; charset=utf-8")
