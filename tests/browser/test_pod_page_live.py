"""The pod page follows the cluster's websocket: a change arrives without a reload, and
nothing is polled in between."""

from __future__ import annotations

import json
import re
import urllib.request

from playwright.sync_api import expect

from handoff.live import clusters


def _sim_address(live_cluster) -> str:
    with live_cluster.client() as client:
        kubeconfig = clusters.cluster(client, live_cluster.name).kubeconfig
    return re.search(r"server: (\S+)", open(kubeconfig).read()).group(1)


def _request(url: str, method: str, body: dict | None = None) -> None:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    urllib.request.urlopen(request, timeout=10).close()


def test_a_change_arrives_over_the_websocket_without_reload_or_polling(
    page, live_cluster, screenshot
):
    sim = _sim_address(live_cluster)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "live-probe", "namespace": "default"},
        # Pinned to a node whose kubelet runs it: running, then nothing changes.
        "spec": {"nodeName": "worker-2", "containers": [{"name": "c", "image": "nginx:1.25"}]},
    }
    _request(f"{sim}/api/v1/namespaces/default/pods", "POST", pod)
    api_calls: list[str] = []
    page.on(
        "request",
        lambda r: (
            api_calls.append(r.url) if "/api/clusters/" in r.url and "/pods/" in r.url else None
        ),
    )
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append(str(f)[:300])))
    page.goto(f"{live_cluster.site}/clusters/{live_cluster.name}/pods/default/live-probe/")
    expect(page.get_by_test_id("live")).to_have_text("live", timeout=15_000)
    page.evaluate("window.__same_page = true")  # gone if anything reloads the page
    expect(page.locator("#pod-root")).to_have_attribute("data-loaded", "running", timeout=60_000)
    page.wait_for_timeout(1000)
    before = len(api_calls)
    page.wait_for_timeout(7000)  # the old page polled every 5 s
    pushed = [f for f in frames if "live-probe" in f or '"refresh": true' in f]
    assert len(api_calls) == before, pushed

    _request(f"{sim}/api/v1/namespaces/default/pods/live-probe", "DELETE")
    # Its container's exit on deletion is judged deleted or succeeded, by timing.
    expect(page.locator("#pod-root")).to_have_attribute(
        "data-loaded", re.compile("^(deleted|succeeded)$"), timeout=60_000
    )
    assert page.evaluate("window.__same_page === true")
    assert len(api_calls) > before
    screenshot("changed-live")
