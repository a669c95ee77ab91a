"""Where watch events come from: clusters (the official client), the simulator, traces.

Every source ends in ``sink.StreamSink``, which scrubs each object and appends it to the
cluster's Redis Stream; the fold worker (``handoff.live.fold``) takes it from there.
"""
