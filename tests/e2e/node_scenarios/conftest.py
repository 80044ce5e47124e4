"""The real-node scenarios: our DaemonSet (deploy/overlays) on the real kubelet and
containerd, one node and one DaemonSet shared by every file of this package (the fixtures
are package-scoped: they come up before its first scenario and go after its last, so the
run's other scenarios never see the node). Each file holds the scenarios of one topic;
fixtures and helpers live in tests/e2e/realnode.py.
"""

from __future__ import annotations

from ..realnode import kube, node_bin, node_images, plugin, real_node

__all__ = ["kube", "node_bin", "node_images", "plugin", "real_node"]
