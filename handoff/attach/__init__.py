"""``simulate --attach``: the simulator's nodes and kubelets against a real API server.

``kube`` is the adapter: the simulator's ``Remote`` (``handoff/sim/attached``) over HTTP with
the kubeconfig's TLS and credentials, through the official ``kubernetes`` client. ``run``
builds a scenario on it and paces it against the wall clock.

Floors: above ``sim`` (it builds on the simulator's plain-Python kubelets) and beside
``live``, below the management commands; the simulator itself never imports a client.
"""
