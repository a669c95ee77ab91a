"""The detail area: pod timeline, fleet, nodes and replay pages with their JSON API.

Each page reads a *source* (``sources.py``): a live cluster's views in Redis, or a trace
folded to a moment (``handoff.offline.replay``). Both give the same JSON shapes, so the same
page scripts draw a live cluster and a replayed one.
"""
