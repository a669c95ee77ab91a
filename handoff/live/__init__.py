"""The live pipeline over Redis: watch sources and their sink, the fold worker, the
Redis layout, the read side, the push to browsers, health and leases. Handed its
settings (``handoff.conf``); imports neither Django nor Celery."""
