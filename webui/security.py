"""Response headers that keep cluster data from becoming script: a Content Security Policy
on every response that does not set its own.

Scripts only from this site (no inline script, so markup injected through a cluster string
could not run even if it slipped past escaping); 'unsafe-eval' because Plotly's WebGL
traces compile their shaders' glue code with Function(). Styles may be inline: Plotly and
base.html's verdict colours set them.
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.HANDOFF_CSP and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.HANDOFF_CSP
        return response
