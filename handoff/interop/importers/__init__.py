"""Read what operators already have as watch events; ``reader`` has the details."""

from handoff.interop.importers.reader import ImportReader, is_trace_file, open_events

__all__ = ["ImportReader", "is_trace_file", "open_events"]
