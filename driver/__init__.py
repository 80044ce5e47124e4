"""simdra: a Kubernetes Dynamic Resource Allocation (DRA) kubelet plugin."""

__version__ = "0.1.0"
