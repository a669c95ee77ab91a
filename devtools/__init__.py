"""Development tools outside the runtime package: benchmarks and the ``make demo``
supervisor."""
