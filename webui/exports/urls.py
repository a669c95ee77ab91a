"""Routes of the export area (see webui/urls.py and docs/interop.md)."""

from django.urls import path

from webui.exports import views as exports

urlpatterns = [
    path("metrics", exports.metrics_view, name="metrics"),
    path("clusters/<str:cluster>/export/pods.csv", exports.pods_csv, name="export-pods-csv"),
    path("clusters/<str:cluster>/export/pods.json", exports.pods_json, name="export-pods-json"),
    path(
        "clusters/<str:cluster>/pods/<str:namespace>/<str:name>/chart.html",
        exports.pod_chart,
        name="pod-chart",
    ),
]
