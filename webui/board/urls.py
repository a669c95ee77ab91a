"""Cluster list, triage board and the board's JSON API."""

from django.urls import path

from webui import api
from webui.board import views as board

urlpatterns = [
    path("", board.home, name="home"),
    path("clusters/<str:cluster>/", board.board, name="board"),
    path("api/clusters", api.clusters, name="api-clusters"),
    path("api/clusters/<str:cluster>/summary", api.summary, name="api-summary"),
    path("api/clusters/<str:cluster>/pods", api.pods, name="api-pods"),
    path("api/clusters/<str:cluster>/owners", api.owners, name="api-owners"),
]
