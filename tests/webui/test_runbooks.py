"""/runbooks/: the pages the alert rules' runbook_url point at, served from docs/runbooks."""

from __future__ import annotations

import re

import pytest

from tests.alerting.tools import RUNBOOKS, alerts

pytestmark = pytest.mark.django_db


def test_it_serves_every_runbook_the_rules_link_to_without_a_sign_in(client, settings):
    settings.HANDOFF_DEMO = False
    for rule in alerts():
        name = re.search(r"/runbooks/([a-z-]+)/$", rule["annotations"]["runbook_url"]).group(1)

        response = client.get(f"/runbooks/{name}/")

        assert response.status_code == 200, name
        assert response["Content-Type"] == "text/plain; charset=utf-8"
        assert response.content.decode() == (RUNBOOKS / f"{name}.md").read_text()
        assert rule["alert"] in response.content.decode()


def test_it_lists_the_runbooks_at_the_top(client, settings):
    settings.HANDOFF_DEMO = False

    response = client.get("/runbooks/")

    assert response.status_code == 200
    assert "pods-stuck.md" in response.content.decode()


@pytest.mark.parametrize(
    "path",
    ["/runbooks/nope/", "/runbooks/..%2Fapi/", "/runbooks/../README/", "/runbooks/README.md/"],
)
def test_it_serves_nothing_but_the_runbooks(client, path):
    assert client.get(path).status_code == 404
