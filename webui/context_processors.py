from functools import cache

import redis
from django.conf import settings
from django.http import HttpRequest

from handoff.core import verdicts as v
from handoff.live import queries
from webui import clusterdata
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
        "demo_clusters": demo_clusters() if settings.HANDOFF_DEMO else None,
        "is_demo_user": bool(user and is_demo_user(user)),
        "handoff_meta": handoff_meta(),
    }


def demo_clusters() -> str:
    """For the demo banner: what the clusters shown are, so it never calls a real cluster
    simulated (or a replayed trace real). Empty when there are none or the store is down."""
    try:
        configs = list(queries.configs(clusterdata.client()).values())
    except redis.RedisError:
        return ""
    groups = {
        "simulated": [c.name for c in configs if clusterdata.simulated(c)],
        "real, watched read-only": [
            c.name for c in configs if c.kind != "trace" and not clusterdata.simulated(c)
        ],
        "replayed from recorded traces": [c.name for c in configs if c.kind == "trace"],
    }
    present = {what: names for what, names in groups.items() if names}
    if len(present) == 1:
        return f"the clusters shown are {next(iter(present))}"
    return "; ".join(f"{what}: {', '.join(sorted(names))}" for what, names in present.items())
