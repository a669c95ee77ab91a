"""The web UI's middleware: demo sign-in, and the Content Security Policy header.

The policy keeps cluster data from becoming script: scripts only from this site (no inline
script, so markup injected through a cluster string could not run even if it slipped past
escaping); 'unsafe-eval' because Plotly's WebGL traces compile their shaders' glue code with
Function(). Styles may be inline: Plotly and base.html's verdict colours set them.
"""

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden

from webui.demo import demo_user, is_demo_user

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class DemoSignInMiddleware:
    """In demo mode, sign anonymous visitors in as the demo user, and keep it read-only."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.HANDOFF_DEMO and not request.user.is_authenticated:
            login(request, demo_user(), backend="django.contrib.auth.backends.ModelBackend")
        if is_demo_user(request.user) and request.method not in SAFE_METHODS:
            return HttpResponseForbidden("The demo user is read-only.")
        return self.get_response(request)


class ContentSecurityPolicyMiddleware:
    """Set the Content-Security-Policy on every response that does not set its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.HANDOFF_CSP and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.HANDOFF_CSP
        return response
