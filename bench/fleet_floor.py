"""The floor of the fleet's start: a bare loop that creates the same number of Node objects
and the very same slices (the fleet's own, read back, renamed to nodes of the floor's), one
request each, on one keep-alive connection. No client does less to publish them; the
fleet's time to publish and its request count are printed against it.

The floor's objects are removed again (two deletecollection calls) before pods are
scheduled, so that no pod lands on them.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

from fleet_api import JSON, Api

FLOOR_LABEL = "simdra.dev/bench-floor"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def floor_node(name: str) -> JSON:
    """A plain Node no pod will use (tainted) and nothing manages (no kwok annotation)."""
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {FLOOR_LABEL: "1",
                                              "kubernetes.io/hostname": name}},
        "spec": {"taints": [{"key": FLOOR_LABEL, "value": "1", "effect": "NoSchedule"}]},
    }


def floor_slices(fleet_slices: list[JSON], rename: dict[str, str]) -> list[JSON]:
    """The fleet's slices as the floor creates them: same spec, node and pool renamed to
    the floor's node (`rename`: fleet node -> floor node), server-set metadata dropped."""
    out = []
    for index, original in enumerate(fleet_slices):
        spec = copy.deepcopy(original["spec"])
        node = spec.get("nodeName", "")
        if node in rename:
            spec["nodeName"] = rename[node]
            if spec.get("pool", {}).get("name") == node:
                spec["pool"]["name"] = rename[node]
        out.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"bench-floor-{index}", "labels": {FLOOR_LABEL: "1"}},
            "spec": spec,
        })
    return out


@dataclass(frozen=True)
class FloorRun:
    """The floor's seconds (all, and the Nodes' part), its own CPU seconds (this
    thread's: what the client cost), and its requests."""

    seconds: float
    nodes_seconds: float
    cpu_seconds: float
    requests: int


def run_floor(api: Api, fleet_nodes: list[str], fleet_slices: list[JSON]) -> FloorRun:
    """Create the floor's nodes, then its slices."""
    rename = {node: f"bench-floor-{i}" for i, node in enumerate(sorted(fleet_nodes))}
    nodes = [floor_node(name) for name in rename.values()]
    slices = floor_slices(fleet_slices, rename)
    start, cpu = time.monotonic(), time.thread_time()
    for node in nodes:
        api.call("POST", "/api/v1/nodes", node)
    nodes_done = time.monotonic()
    for slice_ in slices:
        api.call("POST", SLICES, slice_)
    return FloorRun(time.monotonic() - start, nodes_done - start, time.thread_time() - cpu,
                    len(nodes) + len(slices))


def remove_floor(api: Api) -> None:
    """Delete the floor's slices and nodes."""
    selector = f"labelSelector={FLOOR_LABEL}%3D1"
    api.call("DELETE", f"{SLICES}?{selector}")
    api.call("DELETE", f"/api/v1/nodes?{selector}")
