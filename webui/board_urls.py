"""Cluster list, triage board and the board's JSON API."""

from django.urls import path

from webui import views

urlpatterns = [
    path("", views.home, name="home"),
]
