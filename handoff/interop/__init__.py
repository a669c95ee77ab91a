"""Formats operators already have: importers (kubectl output, watch streams, audit
logs) and exporters (Prometheus, OpenTelemetry, CSV/JSON, charts, scenarios). Plain
Python."""
