"""Pages and JSON endpoints of the detail area. Views only coordinate: the data comes
from ``sources``, the aggregates from ``fleet`` and ``nodes``, traces from ``traces``."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import quote, urlencode

import redis
from django.conf import settings
from django.core.exceptions import BadRequest as DjangoBadRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import NoReverseMatch, reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods, require_safe

from handoff.core.trace import format_time, parse_time
from handoff.core.verdicts import BINDINGS, VERDICTS
from handoff.live import answers
from handoff.live.pages import stored
from handoff.live.pages.fleet import SWIMLANE_LIMIT
from webui.api import api
from webui.demo import is_demo_user
from webui.detail import traces
from webui.detail.replayed import fleet_json, nodes_at
from webui.detail.sources import LiveSource, PodFilters, ReplaySource
from webui.detail.traces import TraceFile, TraceRejected
from webui.jsonbody import Encoded
from webui.rendering import render

PAGE_LIMIT_MAX = 500
ATTENTION = frozenset(name for name, verdict in VERDICTS.items() if verdict.attention)


class BadRequest(DjangoBadRequest):
    """A query parameter the API cannot use; the message goes back to the caller (JSON
    from the API, Django's 400 page from a page)."""


def _at(request: HttpRequest, path_at: str | None = None) -> float | None:
    raw = (path_at if path_at is not None else request.GET.get("at", "")).strip()
    if not raw:
        return None
    try:
        return parse_time(raw.replace(" ", "+"))  # an unescaped '+' in a URL reads as a space
    except ValueError as exc:
        raise BadRequest(f"'at' is not an RFC 3339 time: {raw[:40]!r}") from exc


def _live(cluster: str) -> LiveSource:
    source = LiveSource(cluster)
    if not source.exists():
        raise Http404(f"unknown cluster {cluster!r}")
    return source


def _trace(trace_id: str) -> TraceFile:
    trace = traces.find(trace_id)
    if trace is None:
        raise Http404(f"unknown trace {trace_id!r}")
    return trace


def _replay(trace_id: str, request: HttpRequest, at: str | None = None) -> ReplaySource:
    """The trace at ``at`` (a path segment, for board.js's fixed API URLs) or ``?at=``."""
    when = _at(request, at)
    state = traces.load(_trace(trace_id))
    return ReplaySource(state, when, _stuck_after())


def _stuck_after() -> float:
    return float(settings.HANDOFF_STUCK_AFTER)


def _limit(request: HttpRequest, default: int, most: int) -> int:
    raw = request.GET.get("limit", "")
    try:
        value = int(raw) if raw else default
    except ValueError as exc:
        raise BadRequest("'limit' must be a whole number") from exc
    return max(0, min(value, most))


# ------------------------------------------------------------------ live API


@api
def api_pod(request: HttpRequest, cluster: str, namespace: str, name: str) -> dict[str, Any]:
    view = _live(cluster).pod(namespace, name, request.GET.get("uid") or None)
    if view is None:
        raise Http404(f"no pod {namespace}/{name} in cluster {cluster!r}")
    return view


def _shared(source: LiveSource, kind: str) -> Encoded:
    """From what the fold keeps (no pass over the cluster's pods), shared by every viewer:
    built by the answer builder, or here when none runs (``live/answers.py``)."""
    client, cluster = source.client, source.cluster
    packed = answers.shared(client, cluster, kind, lambda: stored.packed(client, cluster, kind))
    return Encoded(packed, gzipped=True)


@api
def api_nodes(request: HttpRequest, cluster: str) -> Encoded:
    return _shared(_live(cluster), stored.NODES)


@api
def api_fleet(request: HttpRequest, cluster: str) -> Encoded:
    limit = _limit(request, SWIMLANE_LIMIT, 2 * SWIMLANE_LIMIT)
    return _shared(_live(cluster), stored.fleet_kind(limit))


# ---------------------------------------------------------------- replay API


def _trace_meta(trace: TraceFile) -> dict[str, Any]:
    state = traces.load(trace)
    return {
        "id": trace.id,
        "name": trace.name if not trace.uploaded else "uploaded trace",
        "cluster": state.cluster,
        "start": format_time(state.start),
        "end": format_time(state.end),
        "events": len(state.events),
        "errors": [{"line": e.line, "message": e.message} for e in state.errors[:20]],
        "error_count": len(state.errors),
    }


@api
def api_replay(request: HttpRequest, trace_id: str) -> dict[str, Any]:
    return _trace_meta(_trace(trace_id))


@api
def api_replay_summary(request: HttpRequest, trace_id: str, at: str | None = None) -> dict:
    with _replay(trace_id, request, at) as source:
        return source.summary()


@api
def api_replay_pods(request: HttpRequest, trace_id: str, at: str | None = None) -> dict:
    """The board's pod list (same parameters and shape as /api/clusters/C/pods)."""
    filters = _pod_filters(request)
    raw = request.GET.get("cursor", "") or "0"
    if not raw.isdigit():
        raise BadRequest("cursor is not one this API returned")
    limit = _limit(request, 100, PAGE_LIMIT_MAX)
    with _replay(trace_id, request, at) as source:
        body = source.pods(filters, int(raw), limit)
    return {"cluster": source.state.cluster, "stream_cursor": None, **body}


def _pod_filters(request: HttpRequest) -> PodFilters:
    raw = request.GET.get("verdict", "").strip()
    verdicts = {x for x in raw.split(",") if x} if raw and raw != "all" else set()
    unknown = sorted(verdicts - set(VERDICTS))
    if unknown:
        raise BadRequest(f"unknown verdict {unknown[0]!r}")
    if request.GET.get("attention") in ("1", "true"):
        verdicts = (verdicts or ATTENTION) & ATTENTION
        if not verdicts:
            raise BadRequest("none of those verdicts needs attention")
    binding = request.GET.get("binding", "").strip()
    if binding and binding not in BINDINGS:
        raise BadRequest(f"binding must be one of {', '.join(BINDINGS)}")
    node = request.GET.get("node")
    return PodFilters(
        verdicts=frozenset(verdicts),
        namespace=request.GET.get("namespace", "").strip(),
        node=None if node is None else node.strip(),
        binding=binding,
        q=request.GET.get("q", "").strip()[:200],
    )


@api
def api_replay_pod(request: HttpRequest, trace_id: str, namespace: str, name: str) -> dict:
    with _replay(trace_id, request) as source:
        view = source.pod(namespace, name, request.GET.get("uid") or None)
    if view is None:
        raise Http404(f"no pod {namespace}/{name} in the trace at that time")
    return view


@api
def api_replay_nodes(request: HttpRequest, trace_id: str) -> dict[str, Any]:
    with _replay(trace_id, request) as source:
        return nodes_at(source)


@api
def api_replay_fleet(request: HttpRequest, trace_id: str) -> Encoded:
    limit = _limit(request, SWIMLANE_LIMIT, 2 * SWIMLANE_LIMIT)
    with _replay(trace_id, request) as source:
        return Encoded(fleet_json(source, limit))


# --------------------------------------------------------------------- pages


def _pod_prefix(name: str, *args: str) -> str:
    """A pod page URL without its namespace/name: what board.js's data-pod-base holds."""
    return reverse(name, args=[*args, "NS", "NAME"]).removesuffix("NS/NAME/")


def _live_context(cluster: str, api_url: str) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "nav_cluster": {"name": cluster},
        "api_url": api_url,
        "pod_base": _pod_prefix("detail:pod", cluster),
        "board_url": _board_url(cluster),
        "fleet_url": reverse("detail:fleet", args=[cluster]),
        "nodes_url": reverse("detail:nodes", args=[cluster]),
    }


def _query(request: HttpRequest, *keys: str) -> str:
    kept = {k: request.GET[k] for k in keys if request.GET.get(k)}
    return ("?" + urlencode(kept)) if kept else ""


@require_safe
def pod_page(request: HttpRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    api_url = reverse("detail:api-pod", args=[cluster, namespace, name]) + _query(request, "uid")
    context = {**_live_context(cluster, api_url), "namespace": namespace, "name": name}
    # The cluster's websocket (the board's): the page refetches the pod when it changes.
    context["ws_url"] = f"/ws/clusters/{quote(cluster, safe='')}/"
    return render(request, "webui/pod.html", context)


def _board_url(cluster: str) -> str:
    # The board engineer's route when it exists; the cluster list otherwise.
    try:
        return reverse("board", args=[cluster])
    except NoReverseMatch:
        return reverse("home")


@require_safe
def fleet_page(request: HttpRequest, cluster: str) -> HttpResponse:
    api_url = reverse("detail:api-fleet", args=[cluster])
    return render(request, "webui/fleet.html", {**_live_context(cluster, api_url), "nav": "fleet"})


@require_safe
def nodes_page(request: HttpRequest, cluster: str) -> HttpResponse:
    api_url = reverse("detail:api-nodes", args=[cluster])
    return render(request, "webui/nodes.html", {**_live_context(cluster, api_url), "nav": "nodes"})


@csrf_exempt  # checked below, once the size is known to be acceptable
@require_http_methods(["GET", "HEAD", "POST"])
def replay_index(request: HttpRequest) -> HttpResponse:
    """Choose a trace: the configured folder's files, earlier uploads, or a new upload."""
    if request.method == "POST":
        return _upload(request)
    return _replay_index(request)


def _replay_index(request: HttpRequest, error: str = "", status: int = 200) -> HttpResponse:
    context = {
        "server_traces": traces.server_traces(),
        "uploaded_traces": traces.uploaded_traces(),
        "max_upload_mb": settings.HANDOFF_REPLAY_MAX_UPLOAD_BYTES // (1024 * 1024),
        "max_upload_bytes": settings.HANDOFF_REPLAY_MAX_UPLOAD_BYTES,
        "can_upload": not is_demo_user(request.user),
        "error": error,
    }
    return render(request, "webui/replay_index.html", context, status=status)


def _upload(request: HttpRequest) -> HttpResponse:
    limit = settings.HANDOFF_REPLAY_MAX_UPLOAD_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    # Refuse before Django parses (and spools) the body; a form's own fields add little.
    if length > limit + 64 * 1024:
        message = f"The trace is larger than the {traces.limit_text(limit)} limit."
        return _replay_index(request, message, 413)
    return csrf_protect(_store_upload)(request)


def _store_upload(request: HttpRequest) -> HttpResponse:
    # Counted once CSRF has passed, so a forged request cannot use up someone's uploads.
    try:
        allowed = traces.upload_allowed(request.user.pk)
    except redis.RedisError:
        return _replay_index(request, "Uploads are paused: the store is unreachable.", 503)
    if not allowed:
        per_hour = settings.HANDOFF_REPLAY_UPLOADS_PER_HOUR
        return _replay_index(request, f"At most {per_hour} uploads an hour; try later.", 429)
    upload = request.FILES.get("trace")
    if upload is None:
        return _replay_index(request, "Choose a trace file to upload.", 400)
    try:
        trace = traces.save_upload(upload)
    except TraceRejected as exc:
        return _replay_index(request, str(exc), exc.status)
    return redirect("detail:replay", trace.id)


def _replay_context(request: HttpRequest, trace_id: str) -> dict[str, Any]:
    trace = _trace(trace_id)
    meta = _trace_meta(trace)
    chosen = _at(request)
    at = format_time(chosen if chosen is not None else parse_time(meta["end"]))
    return {
        "trace": meta,
        "trace_id": trace_id,
        "at": at,
        "nav": "replay",
        "pods_at_url": reverse("detail:api-replay-pods-at", args=[trace_id, at]),
        "summary_at_url": reverse("detail:api-replay-summary-at", args=[trace_id, at]),
        "pod_base": _pod_prefix("detail:replay-pod", trace_id),
        "fleet_url": reverse("detail:replay-fleet", args=[trace_id]),
        "nodes_url": reverse("detail:replay-nodes", args=[trace_id]),
        "board_url": reverse("detail:replay", args=[trace_id]),
        "cards": [
            {"name": x.name, "attention": x.attention, "summary": x.summary}
            for x in sorted(VERDICTS.values(), key=lambda x: -x.severity)
        ],
    }


def _replay_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A replay page of a trace that turns out unusable (an empty or non-trace file in
    HANDOFF_REPLAY_DIR) answers as a refused upload does: the replay index with the
    one-line reason and its status, never a 500."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except TraceRejected as exc:
            return _replay_index(request, str(exc), exc.status)

    return wrapper


@require_safe
@_replay_page
def replay_board(request: HttpRequest, trace_id: str) -> HttpResponse:
    return render(request, "webui/replay_board.html", _replay_context(request, trace_id))


@require_safe
@_replay_page
def replay_pod(request: HttpRequest, trace_id: str, namespace: str, name: str) -> HttpResponse:
    context = _replay_context(request, trace_id)
    api_url = reverse("detail:api-replay-pod", args=[trace_id, namespace, name])
    context.update(
        namespace=namespace,
        name=name,
        cluster=context["trace"]["cluster"] or "replay",
        api_url=api_url + _query(request, "uid"),
    )
    return render(request, "webui/pod.html", context)


@require_safe
@_replay_page
def replay_fleet(request: HttpRequest, trace_id: str) -> HttpResponse:
    context = _replay_context(request, trace_id)
    context.update(
        cluster=context["trace"]["cluster"] or "replay",
        api_url=reverse("detail:api-replay-fleet", args=[trace_id]),
    )
    return render(request, "webui/fleet.html", context)


@require_safe
@_replay_page
def replay_nodes(request: HttpRequest, trace_id: str) -> HttpResponse:
    context = _replay_context(request, trace_id)
    context.update(
        cluster=context["trace"]["cluster"] or "replay",
        api_url=reverse("detail:api-replay-nodes", args=[trace_id]),
    )
    return render(request, "webui/nodes.html", context)
