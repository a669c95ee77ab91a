from django.apps import AppConfig


class WebuiConfig(AppConfig):
    name = "webui"
    verbose_name = "Handoff web UI"

    def ready(self) -> None:
        # Every Django process (web, management commands) sends tasks through the project's
        # Celery app rather than Celery's default one, which would talk to a local AMQP.
        import handoff.celery  # noqa: F401
