"""The simulator served as a Kubernetes API over HTTP: verbs, discovery, tables,
patches, selectors and fault injection."""
