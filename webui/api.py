"""The board's JSON API: /api/clusters, /api/clusters/C/summary, /api/clusters/C/pods.

Documented in docs/api.md (section "board"). Anonymous callers get 401 JSON rather than
the sign-in redirect pages get; an unknown cluster is 404 JSON; bad parameters 400 JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

import redis
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, JsonResponse, QueryDict
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from handoff.live import queries, store
from handoff.live.queries import Cursor, PodFilter, QueryError
from webui import clusterdata

DEFAULT_LIMIT = 100


class NotFound(LookupError):
    pass


class Refused(ValueError):
    """Input the endpoint cannot use (e.g. a trace that is not one): ``status`` and the
    one-line message go back to the caller."""

    status = 422


def api(view: Callable[..., dict[str, Any]]) -> Callable[..., JsonResponse]:
    """A JSON endpoint (board and detail alike): 401 JSON for anonymous callers (not the
    sign-in redirect pages get), 400 for bad parameters, 404 for unknown things, 503 when
    the store is unreachable."""

    @login_not_required
    @never_cache
    @require_safe
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        if not request.user.is_authenticated:
            return JsonResponse({"error": "authentication required"}, status=401)
        try:
            return JsonResponse(view(request, *args, **kwargs))
        except (QueryError, BadRequest) as exc:
            return JsonResponse({"error": str(exc)}, status=400)
        except (NotFound, Http404) as exc:
            return JsonResponse({"error": str(exc) or "not found"}, status=404)
        except Refused as exc:
            return JsonResponse({"error": str(exc)}, status=exc.status)
        except redis.RedisError as exc:
            return JsonResponse({"error": f"store unavailable ({type(exc).__name__})"}, status=503)

    return wrapper


def known_cluster(c: redis.Redis, name: str) -> store.ClusterConfig:
    config = store.cluster(c, name)
    if config is None:
        raise NotFound(f"no cluster named {name[:100]!r}")
    return config


def pod_filter(params: QueryDict) -> PodFilter:
    """Filters from a query string. ``verdict`` is a comma list (or ``all``); no verdict
    with ``attention=1`` means the board's default set, the verdicts needing attention."""
    raw = params.get("verdict", "").strip()
    verdicts = tuple(x for x in raw.split(",") if x) if raw and raw != "all" else ()
    if params.get("attention") in ("1", "true"):
        verdicts = tuple(x for x in verdicts or queries.ATTENTION if x in queries.ATTENTION)
        if not verdicts:
            raise QueryError("none of those verdicts needs attention")
    node = params.get("node")
    return PodFilter(
        verdicts=verdicts,
        namespace=params.get("namespace", "").strip(),
        node=node.strip() if node else None,
        binding=params.get("binding", "").strip(),
        q=params.get("q", "").strip(),
    )


def limit(params: QueryDict) -> int:
    raw = params.get("limit", "")
    if not raw:
        return DEFAULT_LIMIT
    if not raw.isdigit() or not 1 <= int(raw) <= queries.MAX_LIMIT:
        raise QueryError(f"limit must be a number from 1 to {queries.MAX_LIMIT}")
    return int(raw)


@api
def clusters(request: HttpRequest) -> dict[str, Any]:
    return {"clusters": clusterdata.cluster_rows(clusterdata.client())}


@api
def summary(request: HttpRequest, cluster: str) -> dict[str, Any]:
    c = clusterdata.client()
    return clusterdata.summary(c, known_cluster(c, cluster))


@api
def pods(request: HttpRequest, cluster: str) -> dict[str, Any]:
    c = clusterdata.client()
    known_cluster(c, cluster)
    return pods_body(c, cluster, request.GET)


def pods_body(c: redis.Redis, cluster: str, params: QueryDict) -> dict[str, Any]:
    """One page, with the cursor read before it: changes after the page are >= cursor."""
    flt = pod_filter(params)
    after = Cursor.decode(params["cursor"]) if params.get("cursor") else None
    head = clusterdata.clock(store.fold_state(c, cluster))
    page = queries.pods_page(c, cluster, flt, after, limit(params))
    return {
        "cluster": cluster,
        **head,
        "total": page.total,
        "pods": page.pods,
        "next": page.next.encode() if page.next else None,
    }
