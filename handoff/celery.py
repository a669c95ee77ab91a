"""The Celery app: `celery -A handoff worker -Q default,watch` and `celery -A handoff beat`.

Configuration lives in Django settings under the CELERY_ prefix. Queues: `default` for short
tasks (heartbeat, sweeps), `watch` for the long-running watch streams of the ingestion.
"""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handoff.settings")

app = Celery("handoff")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _send_first_heartbeat(sender, **kwargs) -> None:
    # Through the broker like every later beat, so /healthz turns green seconds after a
    # worker starts instead of waiting for beat's first tick.
    app.send_task("handoff.tasks.heartbeat")
