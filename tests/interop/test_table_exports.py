"""CSV and JSON downloads of the triage table: the board's rows and filters, values as is."""

from __future__ import annotations

import csv
import io
import json

import pytest

from handoff.interop.exporters.tables import COLUMNS
from tests.interop.conftest import NASTY

pytestmark = pytest.mark.django_db


def _api_uids(client, query: str) -> list[str]:
    uids, cursor = [], None
    while True:
        url = f"/api/clusters/prod/pods?limit=7&{query}" + (f"&cursor={cursor}" if cursor else "")
        body = client.get(url).json()
        uids += [p["uid"] for p in body["pods"]]
        cursor = body["next"]
        if not cursor:
            return uids


def _csv(client, query: str = "") -> list[dict[str, str]]:
    response = client.get(f"/clusters/prod/export/pods.csv?{query}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="prod-pods.csv"' in response["Content-Disposition"]
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == list(COLUMNS) if rows else True
    return rows


def _json(client, query: str = "") -> dict:
    response = client.get(f"/clusters/prod/export/pods.json?{query}")
    assert response.status_code == 200
    return json.loads(b"".join(response.streaming_content))


@pytest.mark.parametrize(
    "query",
    [
        "",
        "verdict=rejected",
        "verdict=stuck,podgc-deleted",
        "namespace=odd",
        "node=worker-1",
        "binding=manual",
        "q=big",
        "verdict=rejected&binding=manual&q=big",
    ],
)
def test_it_lists_the_boards_pods_in_its_order_for_each_filter(signed_in, prod, query):
    expected = _api_uids(signed_in, query)

    assert [row["uid"] for row in _csv(signed_in, query)] == expected
    assert [pod["uid"] for pod in _json(signed_in, query)["pods"]] == expected
    assert expected


def test_it_writes_cluster_text_unchanged_but_defuses_formulas(signed_in, prod):
    (row,) = _csv(signed_in, "namespace=odd")
    body = _json(signed_in, "namespace=odd")
    (pod,) = body["pods"]

    assert row["reason"] == '\'=HYPERLINK("http://x")'
    assert pod["reason"] == '=HYPERLINK("http://x")'
    assert NASTY in row["explanation"]  # quotes, commas, newline and markup round-trip
    assert pod["events"][0]["message"] == NASTY
    assert "&lt;" not in row["explanation"]
    assert body["filters"]["namespace"] == "odd"


def test_it_refuses_bad_filters_and_unknown_clusters(signed_in, prod):
    assert signed_in.get("/clusters/prod/export/pods.csv?verdict=nope").status_code == 400
    assert signed_in.get("/clusters/nope/export/pods.json").status_code == 404


def test_it_asks_anonymous_visitors_to_sign_in(client, settings, prod):
    settings.HANDOFF_DEMO = False
    response = client.get("/clusters/prod/export/pods.csv")

    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_it_exports_a_pods_timeline_as_standalone_html(signed_in, prod):
    response = signed_in.get("/clusters/prod/pods/odd/weird/chart.html")
    page = response.content.decode()

    assert response.status_code == 200
    assert 'filename="prod-odd-weird-timeline.html"' in response["Content-Disposition"]
    assert response["Content-Security-Policy"].startswith("sandbox allow-scripts;")
    assert "plotly.js v" in page[:2_000_000]  # the library itself, inlined
    assert "src=" not in page.split("</script>", 1)[1]  # nothing loaded from elsewhere
    assert "<script>alert" not in page
    assert page.count("</script>") == 2  # plotly.js and the figure: the message closed none
    # HTML-escaped for Plotly's hover text, then JSON-escaped for the script it sits in.
    assert "\\u0026lt;/script\\u0026gt;\\u0026lt;script\\u0026gt;alert" in page


def test_it_answers_404_for_an_unknown_pod(signed_in, prod):
    assert signed_in.get("/clusters/prod/pods/odd/nobody/chart.html").status_code == 404
