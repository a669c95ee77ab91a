from django.urls import re_path

from webui.board import consumers

websocket_urlpatterns = [
    re_path(r"^ws/clusters/(?P<cluster>[^/]+)/$", consumers.ClusterConsumer.as_asgi()),
]
