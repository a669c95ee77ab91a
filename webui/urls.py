"""The web UI's URLs, split by area so each area's routes live beside its views.

- board_urls: the cluster list, the triage board, the websocket-backed board API
  (`/api/clusters`, `/api/clusters/C/summary`, `/api/clusters/C/pods`).
- detail_urls: the pod, fleet, nodes and replay pages and their API endpoints.
- export_urls: `/metrics`, downloads (CSV/JSON of the triage table, chart HTML).

``/healthz`` and ``/runbooks/`` (the alert rules' runbook pages) are here.
"""

from django.urls import include, path

from webui import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("runbooks/", views.runbook, name="runbooks"),
    path("runbooks/<slug:name>/", views.runbook, name="runbook"),
    path("", include("webui.board.urls")),
    path("", include("webui.detail.urls")),
    path("", include("webui.exports.urls")),
]
