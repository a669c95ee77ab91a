"""A file folded without services: the ``triage`` report and the replay page's state at
any time of a trace."""
