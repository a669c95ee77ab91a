"""The domain: reading Kubernetes objects and trace lines, folding them into per-pod
timelines, judging them and putting them into words. Plain Python: no Django, Redis,
Celery, Channels or ``kubernetes`` client (``.importlinter`` keeps it so)."""
