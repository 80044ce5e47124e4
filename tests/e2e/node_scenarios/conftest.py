"""The real-node scenarios: our DaemonSet (deploy/overlays) on the real kubelet and
containerd, one node and one DaemonSet shared by every file of this package (the fixtures
are package-scoped: they come up before its first scenario and go after its last, so the
run's other scenarios never see the node). Each file holds the scenarios of one topic;
fixtures and helpers live in tests/e2e/realnode.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..realnode import kube, node_bin, node_images, plugin, real_node

__all__ = ["kube", "node_bin", "node_images", "plugin", "real_node"]


@pytest.fixture(autouse=True)
def default_overlay(request: pytest.FixtureRequest) -> None:
    """A scenario that uses the DaemonSet runs on its default overlay unless it switches
    (`PluginDeployment.using`, which leaves the switch back to this fixture). Module
    fixtures come up first, so one holding a `using` block keeps its overlay."""
    if "plugin" in request.fixturenames:
        request.getfixturevalue("plugin").restore()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """This package's files on the default overlay first, then those marked `overlay`
    (they switch the DaemonSet), grouped by the marker's key: files on the same overlay
    side by side share one rolling update, and the default comes back at most once per
    file that mixes both."""
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if Path(str(item.fspath)).parent == here]
    ours = sorted((items[i] for i in slots), key=_overlay_key)  # stable: files stay whole
    for slot, item in zip(slots, ours, strict=True):
        items[slot] = item


def _overlay_key(item: pytest.Item) -> tuple[str, str]:
    marker = item.get_closest_marker("overlay")  # a file's `pytestmark`
    return (str(marker.args[0]) if marker else "", str(item.fspath))
