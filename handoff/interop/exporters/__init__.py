"""Handoff's state in the formats operators already use: Prometheus text (``prometheus``,
with the Redis-side aggregation in ``metrics``), OpenTelemetry traces (``otlp``), CSV and
JSON of the triage table (``tables``) and a standalone timeline chart (``chart``).
docs/interop.md describes each."""
