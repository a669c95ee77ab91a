from functools import cache

from django.conf import settings
from django.http import HttpRequest

from handoff.core import verdicts as v
from webui.demo import is_demo_user


@cache
def handoff_meta() -> dict:
    """Verdict and stage names, colours and order for every page's scripts and styles.

    Rendered once per page by base.html (json_script id="handoff-meta", and CSS custom
    properties --v-<verdict> / --s-<stage>) so one verdict has one colour everywhere.
    """
    return {
        "verdicts": [
            {
                "name": x.name,
                "severity": x.severity,
                "colour": x.colour,
                "attention": x.attention,
                "summary": x.summary,
            }
            for x in v.VERDICTS.values()
        ],
        "stages": [{"name": s.name, "label": s.label, "colour": s.colour} for s in v.STAGES],
        "bindings": list(v.BINDINGS),
        "milestones": list(v.MILESTONES),
        "durations": [name for name, _, _ in v.DURATIONS],
    }


def handoff(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    return {
        "demo_mode": settings.HANDOFF_DEMO,
        "is_demo_user": bool(user and is_demo_user(user)),
        "handoff_meta": handoff_meta(),
    }
