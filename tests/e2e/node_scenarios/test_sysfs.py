"""The sysfs backend on the node's real /sys."""

from __future__ import annotations

import re

from ..realnode import (
    PluginDeployment,
    node_slices,
    wait,
)


def test_node_sysfs_overlay_publishes_without_error(plugin: PluginDeployment) -> None:
    """h. The sysfs backend on the real /sys: the pod is Ready (registered), its pool is
    published and accepted by the API server (possibly with no devices), no errors logged."""
    fake = re.compile(r"^(gpu|nic)-[0-9]+$")  # the fake profiles' device names
    with plugin.using("sysfs"):
        slices: list = []

        def republished() -> bool:
            slices[:] = node_slices(plugin.cp, plugin.node.name)
            names = [d["name"] for s in slices for d in s["spec"].get("devices") or []]
            return bool(slices) and not any(fake.match(n) for n in names)

        wait(
            "sysfs plugin replaced the fake devices in the node's slices",
            republished,
            90,
            plugin.node.kubelet_log,
            lambda: str([d["name"] for s in slices for d in s["spec"].get("devices") or []]),
        )
        for s in slices:
            assert s["spec"]["pool"]["resourceSliceCount"] == len(
                [x for x in slices if x["spec"]["pool"]["name"] == s["spec"]["pool"]["name"]]
            )
        log = plugin.logs()
        errors = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
        assert errors == [], errors[:3]
