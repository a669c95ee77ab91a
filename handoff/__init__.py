"""Handoff: where the scheduler-to-kubelet handoff of a Pod stopped, and why.

This package holds the domain (trace parsing, timeline folding, simulator) and the
project glue (settings, Celery app, ASGI entry point). It deliberately does not import
the Celery app here, unlike the usual Django recipe: importing a domain module such as
``handoff.core.timeline`` must not pull in Celery or Django. ``webui.apps`` loads the Celery
app in every Django process instead, and ``celery -A handoff`` finds ``handoff.celery``.
"""
