"""The simulated control plane and kubelets, one module per Kubernetes component."""
