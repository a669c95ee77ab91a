"""The cluster list (/) and a cluster's triage board (/clusters/<c>/).

The board's first page of pods is read here and embedded in the page as JSON, so the
first paint needs one request; board.js renders it and then pages, filters and follows the
websocket through the URLs on the board's root element.
"""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import redis
from django.http import Http404, HttpRequest, HttpResponse

from handoff.core import verdicts as v
from handoff.core.trace import parse_time
from handoff.live import queries
from handoff.live.paging import QueryError
from handoff.live.push import board_row
from webui import api, clusterdata
from webui.rendering import render


def home(request: HttpRequest) -> HttpResponse:
    try:
        rows = clusterdata.cluster_rows(clusterdata.client())
        error = None
    except redis.RedisError as exc:
        rows, error = [], f"The store is unreachable ({type(exc).__name__})."
    return render(request, "webui/home.html", {"clusters": rows, "error": error})


def board(request: HttpRequest, cluster: str) -> HttpResponse:
    c = clusterdata.client()
    try:
        config = api.known_cluster(c, cluster)
    except api.NotFound as exc:
        raise Http404(str(exc)) from exc
    params = request.GET.copy()
    if not params.get("verdict"):
        params["attention"] = "1"
    status, error = 200, None
    # The fold's progress once, before the page (its cursor: changes after the page are
    # newer), for the page, the summary, the owners and the last incident.
    fold = queries.progress(c, cluster, *clusterdata.SUMMARY_FIELDS, "last_incident")
    try:
        initial = api.pods_body(c, cluster, params, head=queries.clock(fold))
    except QueryError as exc:
        status, error = 400, str(exc)
        initial = {"pods": [], "next": None, "total": 0}
    summary = clusterdata.summary(c, config, durations=False, fold=fold)
    initial["pods"] = [board_row(pod) for pod in initial["pods"]]
    initial["owners"] = queries.owners(c, cluster, fold=fold)
    counts = summary["summary"]["verdicts"]
    context = {
        "cluster": config,
        "described": clusterdata.describe(config),
        "cards": [
            {
                "name": x.name,
                "count": counts.get(x.name, 0),
                "attention": x.attention,
                "summary": x.summary,
            }
            for x in sorted(v.VERDICTS.values(), key=lambda x: -x.severity)
        ],
        "initial": {**initial, "summary": summary["summary"], "error": error},
        "summary": summary,
        "filters": {
            key: request.GET.get(key, "")
            for key in ("verdict", "namespace", "node", "binding", "q", "group")
        },
        "verdict_choices": [v.VERDICTS[name] for name in queries.ATTENTION]
        + [x for x in v.VERDICTS.values() if not x.attention],
        "bindings": v.BINDINGS,
        "attention": queries.ATTENTION,
        "error": error,
        "default_view": params.get("attention") == "1"
        and not any(request.GET.get(key) for key in ("namespace", "node", "binding", "q")),
        "last_incident": last_incident(fold),
    }
    return render(request, "webui/board.html", context, status=status)


def last_incident(fold: dict[str, str]) -> dict | None:
    """The newest pod that came to need attention, as the fold noted it (``fold``: its
    progress), with its age."""
    raw = fold.get("last_incident")
    if not raw:
        return None
    try:
        incident = orjson.loads(raw)
        at = parse_time(incident["at"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    incident["ago"] = datetime.fromtimestamp(at, UTC)
    return incident
