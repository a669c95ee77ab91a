"""A Handoff server's JSON API (docs/api.md), read with ``Authorization: Bearer <token>``,
gzip-packed: a page of 500 pods is about a megabyte of JSON and a tenth of that packed."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.parse
import urllib.request
import zlib
from typing import Any

from handoff.kubectl.errors import PluginError

PAGE = 500
TIMEOUT = 30.0


class HandoffServer:
    def __init__(self, url: str, token: str) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise PluginError(
                f"--server must be an http(s) URL such as https://handoff.example.com, got {url!r}"
            )
        self.url = url.rstrip("/")
        self.token = token

    def get(self, path: str, **query: str) -> dict[str, Any]:
        """GET a JSON endpoint; every failure becomes a one-line PluginError."""
        address = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Accept": "application/json", "Accept-Encoding": "gzip"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(address, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
                body = answer.read()
                packed = answer.headers.get("Content-Encoding", "").strip().lower() == "gzip"
        except urllib.error.HTTPError as exc:
            raise PluginError(self._refusal(exc)) from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PluginError(f"cannot reach Handoff at {self.url}: {reason}") from exc
        if packed:
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError, zlib.error) as exc:
                raise PluginError(
                    f"{self.url}{path} sent a broken gzip body ({exc}): try again"
                ) from exc
        try:
            return json.loads(body)
        except ValueError as exc:
            raise PluginError(
                f"{self.url}{path} did not answer JSON: is --server a Handoff?"
            ) from exc

    def _refusal(self, exc: urllib.error.HTTPError) -> str:
        try:
            said = json.loads(exc.read()).get("error") or exc.reason
        except (ValueError, AttributeError, OSError):
            said = exc.reason
        if exc.code == 401 and not self.token:
            said = f"{said} (pass --token, or set HANDOFF_TOKEN)"
        return f"{exc.code} from {self.url}: {said}"

    def cluster(self, wanted: str | None, context: str | None) -> str:
        """The cluster to read: ``wanted``, else the only one, else the one named like the
        kubeconfig context."""
        names = [c["name"] for c in self.get("/api/clusters").get("clusters", [])]
        if wanted:
            if wanted not in names:
                raise PluginError(
                    f"Handoff at {self.url} watches no cluster named {wanted!r}"
                    f" (it has: {', '.join(names) or 'none'})"
                )
            return wanted
        if len(names) == 1:
            return names[0]
        if context in names:
            return context
        if not names:
            raise PluginError(f"Handoff at {self.url} watches no cluster yet")
        raise PluginError(
            f"Handoff at {self.url} watches several clusters ({', '.join(names)}):"
            " pick one with --cluster"
        )

    def pods(self, cluster: str, namespace: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """Every pod of the cluster (or namespace), worst first, and the evaluation time."""
        query = {"verdict": "all", "limit": str(PAGE)}
        if namespace:
            query["namespace"] = namespace
        pods: list[dict[str, Any]] = []
        evaluated = None
        path = f"/api/clusters/{urllib.parse.quote(cluster, safe='')}/pods"
        while True:  # keyset pages: none is repeated or skipped (docs/api.md)
            page = self.get(path, **query)
            evaluated = evaluated or page.get("evaluated_at")
            pods += page.get("pods", [])
            if not page.get("next"):
                return pods, evaluated
            query["cursor"] = page["next"]

    def pod(self, cluster: str, namespace: str, name: str, uid: str | None) -> dict[str, Any]:
        """One pod's view (the most recent of that name, or the one with ``uid``)."""
        quoted = [urllib.parse.quote(part, safe="") for part in (cluster, namespace, name)]
        path = "/api/clusters/{}/pods/{}/{}".format(*quoted)
        return self.get(path, **({"uid": uid} if uid else {}))
