"""``kubectl handoff``: Handoff's verdicts where on-call people already are, in kubectl.

``bin/kubectl-handoff`` (on PATH: ``make kubectl-handoff``) runs ``cli.main``. It reads a
Handoff server's JSON API with a token (``remote``), or watches the current kubeconfig
context for a few seconds itself and folds what it saw (``local``); ``output`` prints
either as kubectl would. docs/cli.md#kubectl-handoff.
"""
