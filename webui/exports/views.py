"""Exports: ``/metrics`` (Prometheus), the triage table as CSV and JSON, a pod's timeline
chart as standalone HTML. docs/interop.md documents them.

``/metrics`` follows the site's sign-in rules, unless ``HANDOFF_METRICS_TOKEN`` is set: then
it takes exactly ``Authorization: Bearer <token>`` (what Prometheus' ``authorization``
setting sends) and nothing else, signed-in session or not. A scraper that is refused gets a
401 saying what to send; only a browser is sent to the sign-in page (a scraper following
that redirect would read the sign-in form and report a parse error instead).
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Iterator
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    StreamingHttpResponse,
)
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from handoff import conf
from handoff.interop.exporters import chart, tables
from handoff.live import metrics, paging, queries
from handoff.live.paging import Cursor, PodFilter, QueryError
from webui import api, clusterdata

PAGE = 500
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def metrics_token() -> str:
    return getattr(settings, "HANDOFF_METRICS_TOKEN", "") or ""


@login_not_required
@never_cache
@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = metrics_token()
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return _refused("bearer token missing or wrong: send Authorization: Bearer <token>")
    elif not request.user.is_authenticated:
        if "text/html" in request.headers.get("Accept", ""):
            return redirect_to_login(request.get_full_path())
        return _refused("sign-in required: set HANDOFF_METRICS_TOKEN and send it as a bearer token")
    try:
        body = metrics.metrics_text(clusterdata.client(), conf.stream_limits(), time.time())
    except redis.RedisError as exc:
        return HttpResponse(
            f"# store unavailable ({type(exc).__name__})\n", status=503, content_type="text/plain"
        )
    return HttpResponse(body, content_type=PROMETHEUS_TEXT)


def _refused(why: str) -> HttpResponse:
    """401 with the reason in one line (Prometheus shows the status, curl the reason)."""
    response = HttpResponse(f"{why}\n", status=401, content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = 'Bearer realm="handoff-metrics"'
    return response


def _filename(cluster: str, extension: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", cluster)[:80] + f"-pods.{extension}"


def _matching(client: redis.Redis, cluster: str, flt: PodFilter) -> Iterator[dict[str, Any]]:
    """Every pod the board would list for these filters, in its order, page by page."""
    after: Cursor | None = None
    while True:
        page = paging.pods_page(client, cluster, flt, after, PAGE)
        yield from page.pods
        if page.next is None:
            return
        after = page.next


def _table_source(request: HttpRequest, cluster: str) -> tuple[redis.Redis, PodFilter]:
    client = clusterdata.client()
    if queries.config(client, cluster) is None:
        raise Http404(f"no cluster named {cluster[:100]!r}")
    return client, api.pod_filter(request.GET)


@never_cache
@require_safe
def pods_csv(request: HttpRequest, cluster: str) -> HttpResponse:
    try:
        client, flt = _table_source(request, cluster)
    except QueryError as exc:
        return HttpResponseBadRequest(str(exc))
    lines = tables.csv_lines(_matching(client, cluster, flt))
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_filename(cluster, "csv")}"'
    return response


@never_cache
@require_safe
def pods_json(request: HttpRequest, cluster: str) -> HttpResponse:
    try:
        client, flt = _table_source(request, cluster)
    except QueryError as exc:
        return HttpResponseBadRequest(str(exc))
    head = {
        "cluster": cluster,
        **queries.head(client, cluster),
        "filters": {
            "verdict": list(flt.verdicts),
            "namespace": flt.namespace,
            "node": flt.node,
            "binding": flt.binding,
            "q": flt.q,
        },
    }
    chunks = tables.json_chunks(head, _matching(client, cluster, flt))
    response = StreamingHttpResponse(chunks, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{_filename(cluster, "json")}"'
    return response


CHART_POLICY = (
    "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'unsafe-inline'; img-src data: blob:"
)


@never_cache
@require_safe
def pod_chart(request: HttpRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    client = clusterdata.client()
    if not queries.exists(client, cluster):
        raise Http404(f"no cluster named {cluster[:100]!r}")
    view = queries.pod(client, cluster, namespace, name, request.GET.get("uid") or None)
    if view is None:
        raise Http404(f"no pod {namespace[:100]}/{name[:100]} in {cluster[:100]!r}")
    response = HttpResponse(chart.standalone_html(view, cluster), content_type="text/html")
    filename = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{cluster}-{namespace}-{name}")[:150]
    response["Content-Disposition"] = f'attachment; filename="{filename}-timeline.html"'
    # Its scripts are inline; should a browser show it rather than save it, it runs in a
    # sandbox: an opaque origin with no access to this site's cookies or pages.
    response["Content-Security-Policy"] = CHART_POLICY
    return response
