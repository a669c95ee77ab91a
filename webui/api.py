"""The board's JSON API: /api/clusters, /api/clusters/C/summary, /api/clusters/C/pods,
/api/clusters/C/owners.

Documented in docs/api.md (section "board"). Anonymous callers get 401 JSON rather than
the sign-in redirect pages get; an unknown cluster is 404 JSON; bad parameters 400 JSON.
Scripts (``kubectl handoff``) authenticate with ``Authorization: Bearer <HANDOFF_API_TOKEN>``
instead of a session: every endpoint here only reads (GET/HEAD), so the token reads too.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from functools import wraps
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from handoff.live import paging, queries
from handoff.live.paging import Cursor, PodFilter, QueryError
from handoff.live.queries import ClusterConfig
from webui import clusterdata
from webui.jsonbody import Encoded, accepts_gzip, response

DEFAULT_LIMIT = 100


class NotFound(LookupError):
    pass


class Refused(ValueError):
    """Input the endpoint cannot use (e.g. a trace that is not one): ``status`` and the
    one-line message go back to the caller."""

    status = 422


def api(view: Callable[..., dict[str, Any] | Encoded]) -> Callable[..., HttpResponse]:
    """A JSON endpoint (board and detail alike): 401 JSON for anonymous callers (not the
    sign-in redirect pages get), 400 for bad parameters, 404 for unknown things, 503 when
    the store is unreachable. The view may return its answer already encoded."""

    @login_not_required
    @never_cache
    @require_safe
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = _refusal(request)
        if refused:
            return response({"error": refused}, status=401)
        try:
            gzip_ok = accepts_gzip(request.headers.get("Accept-Encoding", ""))
            return response(view(request, *args, **kwargs), gzip_ok=gzip_ok)
        except (QueryError, BadRequest) as exc:
            return response({"error": str(exc)}, status=400)
        except (NotFound, Http404) as exc:
            return response({"error": str(exc) or "not found"}, status=404)
        except Refused as exc:
            return response({"error": str(exc)}, status=exc.status)
        except redis.RedisError as exc:
            return response({"error": f"store unavailable ({type(exc).__name__})"}, status=503)

    return wrapper


def _refusal(request: HttpRequest) -> str | None:
    """Why the caller may not read, or None: a bearer token must be HANDOFF_API_TOKEN (a
    wrong one is refused even with a session), else a signed-in session is needed."""
    sent = request.headers.get("Authorization", "")
    if sent:
        token = settings.HANDOFF_API_TOKEN
        if not token:
            return "bearer tokens are not enabled here (HANDOFF_API_TOKEN is not set)"
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return "wrong bearer token"
        return None
    if not request.user.is_authenticated:
        return "authentication required"
    return None


def known_cluster(c: redis.Redis, name: str) -> ClusterConfig:
    config = queries.config(c, name)
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
    if not raw.isdigit() or not 1 <= int(raw) <= paging.MAX_LIMIT:
        raise QueryError(f"limit must be a number from 1 to {paging.MAX_LIMIT}")
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


@api
def owners(request: HttpRequest, cluster: str) -> dict[str, Any]:
    """Owners needing attention: controllers creating no pods, and loops."""
    c = clusterdata.client()
    known_cluster(c, cluster)
    return {"cluster": cluster, **queries.head(c, cluster), **queries.owners(c, cluster)}


def pods_body(
    c: redis.Redis, cluster: str, params: QueryDict, head: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One page, with the cursor read before it: changes after the page are >= cursor.
    ``head``: ``queries.head``, when the caller read it before calling."""
    flt = pod_filter(params)
    after = Cursor.decode(params["cursor"]) if params.get("cursor") else None
    head = queries.head(c, cluster) if head is None else head
    page = paging.pods_page(c, cluster, flt, after, limit(params))
    return {
        "cluster": cluster,
        **head,
        "total": page.total,
        "pods": page.pods,
        "next": page.next.encode() if page.next else None,
    }
