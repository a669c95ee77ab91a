"""Routes of the detail area (see webui/urls.py): pod, fleet, nodes and replay pages and
their JSON API. Views live in webui/detail/views.py."""

from django.urls import path

from webui.detail import views

app_name = "detail"

# A Kubernetes namespace or name never holds '/', so <str:...> segments are exact.
urlpatterns = [
    path("clusters/<str:cluster>/pods/<str:namespace>/<str:name>/", views.pod_page, name="pod"),
    path("clusters/<str:cluster>/fleet/", views.fleet_page, name="fleet"),
    path("clusters/<str:cluster>/nodes/", views.nodes_page, name="nodes"),
    path(
        "api/clusters/<str:cluster>/pods/<str:namespace>/<str:name>",
        views.api_pod,
        name="api-pod",
    ),
    path("api/clusters/<str:cluster>/nodes", views.api_nodes, name="api-nodes"),
    path("api/clusters/<str:cluster>/fleet", views.api_fleet, name="api-fleet"),
    path("replay/", views.replay_index, name="replay-index"),
    path("replay/<str:trace_id>/", views.replay_board, name="replay"),
    path(
        "replay/<str:trace_id>/pods/<str:namespace>/<str:name>/",
        views.replay_pod,
        name="replay-pod",
    ),
    path("replay/<str:trace_id>/fleet/", views.replay_fleet, name="replay-fleet"),
    path("replay/<str:trace_id>/nodes/", views.replay_nodes, name="replay-nodes"),
    path("api/replay/<str:trace_id>", views.api_replay, name="api-replay"),
    path("api/replay/<str:trace_id>/summary", views.api_replay_summary, name="api-replay-summary"),
    path("api/replay/<str:trace_id>/pods", views.api_replay_pods, name="api-replay-pods"),
    path(
        "api/replay/<str:trace_id>/pods/<str:namespace>/<str:name>",
        views.api_replay_pod,
        name="api-replay-pod",
    ),
    # board.js appends its own query to data-api, so the replay board's time is in the path.
    path(
        "api/replay/<str:trace_id>/at/<str:at>/summary",
        views.api_replay_summary,
        name="api-replay-summary-at",
    ),
    path(
        "api/replay/<str:trace_id>/at/<str:at>/pods",
        views.api_replay_pods,
        name="api-replay-pods-at",
    ),
    path("api/replay/<str:trace_id>/nodes", views.api_replay_nodes, name="api-replay-nodes"),
    path("api/replay/<str:trace_id>/fleet", views.api_replay_fleet, name="api-replay-fleet"),
]
