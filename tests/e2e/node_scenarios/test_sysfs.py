"""The sysfs backend on the real node, over a simulated GPU server (a sysfs tree, /dev and
route tables built on the host: tests/e2e/inventories/sysfs_node.py), deployed with the
sysfs overlay: what it publishes is what that tree implies, and what its CDI specs add
(device nodes, and the mount a custom backend adds) reaches a container through the
real kubelet, containerd and runc."""

from __future__ import annotations

import json
import uuid

import pytest
from kubernetes.client.rest import ApiException

from simdra._driver.claims.plan.metadata import cdi_device_name

from ..inventories import sysfs_node
from ..inventories.sysfs_node import NODES, SimulatedNode
from ..realnode import (
    CDI_ROOT,
    HOLD,
    NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    cdi_files,
    node_slices,
    spec_file,
    unit_env,
    wait,
)

pytestmark = pytest.mark.overlay("sysfs")

GPU = "gpu.dra.example.com"
# CEL sees no device names: the GPU with device nodes, by its standard PCI attribute.
NODE_GPU = f'device.attributes["resource.kubernetes.io"].pciBusID == "{sysfs_node.NODE_GPU}"'
DONE = "PROBE-DONE"


def test_node_sysfs_overlay_publishes_the_simulated_server(
        kube: Kube, plugin: PluginDeployment) -> None:
    """h. The sysfs overlay over the simulated tree: the node's slices publish exactly its
    two GPUs and its fast NIC, with the attributes and capacities the tree implies; the
    start-up log names the BMC display and the uplink NIC as left out, and no error;
    a pod given the GPU that has DRM nodes sees them as the character devices they are
    on the host (type, major:minor, mode)."""
    with sysfs_node.deployed(plugin, "no backend mounts it") as hardware:
        published = _wait_published(plugin)
        assert {name: _values(d) for name, d in published.items()} == sysfs_node.PUBLISHED
        assert {name: _capacity(d) for name, d in published.items()} == sysfs_node.CAPACITY
        assert published["nic-enp94s0f1"].get("allowMultipleAllocations") is True
        assert not any(d.get("allowMultipleAllocations") for n, d in published.items()
                       if n.startswith("gpu-"))
        log = plugin.logs()
        errors = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
        assert errors == [], errors[:3]
        [left_out] = [line for line in log.splitlines() if "not publishing" in line]
        assert all(item in left_out for item in sysfs_node.LEFT_OUT), left_out

        claim, printed = _probe_pod(kube, "gpu-nodes", hardware)
        assert printed["nodes"] == {n.path: n.stat_line() for n in NODES}
        spec = json.loads((CDI_ROOT / spec_file(claim)).read_text())
        # The GPU's CDI device; the other mounts the claim's device metadata file.
        [result] = allocated(claim)
        metadata = cdi_device_name(claim["metadata"]["uid"], result["request"])
        [device] = [d for d in spec["devices"] if d["name"] != metadata]
        hosts = {n["path"]: n.get("hostPath") for n in device["containerEdits"]["deviceNodes"]}
        assert hosts == {n.path: f"{hardware.base}/dev{n.path.removeprefix('/dev')}"
                         for n in NODES}
        kube.delete_pod("gpu-nodes")  # before the fake overlay is back


def test_node_sysfs_backend_mount_reaches_the_container(
        kube: Kube, plugin: PluginDeployment) -> None:
    """A custom backend (the sysfs backend plus a read-only bind mount of a host directory
    for each GPU, inventories/mounting_backend.py, loaded by DEVICE_BACKEND from
    PYTHONPATH): the pod given the GPU reads the host's file at the mount, cannot write
    there, and still sees the GPU's device nodes."""
    greeting = f"simdra-e2e {uuid.uuid4()}"
    with sysfs_node.deployed(plugin, greeting, mounting_backend=True) as hardware:
        _wait_published(plugin)
        _claim, printed = _probe_pod(kube, "gpu-mount", hardware)
        assert printed["mount"] == greeting
        assert printed["writable"] == "no", "the read-only mount was writable"
        assert printed["nodes"] == {n.path: n.stat_line() for n in NODES}
        assert not list(hardware.share.glob("probe*")), "the container wrote to the host"
        kube.delete_pod("gpu-mount")


def _wait_published(plugin: PluginDeployment) -> dict[str, dict]:
    """Device name -> published device, once the node's slices hold the tree's devices
    (the fake instance's slices replaced)."""
    published: dict[str, dict] = {}

    def republished() -> bool:
        published.clear()
        published.update({d["name"]: d for s in node_slices(plugin.cp, plugin.node.name)
                          for d in s["spec"].get("devices") or []})
        return set(published) == set(sysfs_node.PUBLISHED)

    wait("the node's slices publish the simulated server's devices", republished, 90,
         plugin.node.kubelet_log, lambda: f"published {sorted(published)}; {plugin.describe()}")
    pools = {s["spec"]["pool"]["name"] for s in node_slices(plugin.cp, plugin.node.name)}
    assert pools == {plugin.node.name}, pools
    return published


def _probe_pod(kube: Kube, name: str, hardware: SimulatedNode) -> tuple[dict, dict]:
    """A pod given the GPU with device nodes; its claim and what its container saw: each
    node's `stat` line, the mount's file, whether the mount takes a write."""
    probe = "; ".join(
        [f"echo \"NODE {n.path} $(stat -c '%F|%t:%T|%a' {n.path} 2>&1)\"" for n in NODES]
        + [f"echo \"MOUNT $(cat {sysfs_node.MOUNT_PATH}/greeting 2>&1)\"",
           f"if touch {sysfs_node.MOUNT_PATH}/probe 2>/dev/null; then echo WRITABLE yes; "
           "else echo WRITABLE no; fi",
           f"env | grep ^SIMDRA_ | sort; echo {DONE}; {HOLD}"])
    kube.template(f"{name}-gpu", GPU, selector=NODE_GPU)
    kube.pod(name, f"{name}-gpu", command=probe)
    claim = kube.claim_of(kube.wait_running(name))
    [result] = allocated(claim)
    assert result["device"] == "gpu-0000-c1-00-0"
    assert spec_file(claim) in cdi_files()
    lines = _printed(kube, name)
    printed = {
        "nodes": dict(line.split(" ", 2)[1:] for line in lines if line.startswith("NODE ")),
        "mount": next(line[len("MOUNT "):] for line in lines if line.startswith("MOUNT ")),
        "writable": next(line.split()[1] for line in lines if line.startswith("WRITABLE ")),
    }
    [unit] = unit_env(dict(line.split("=", 1) for line in lines if "=" in line)).values()
    assert (unit["NAME"], unit["CLAIM_UID"]) == (result["device"], claim["metadata"]["uid"])
    return claim, printed


def _printed(kube: Kube, name: str) -> list[str]:
    """The lines the pod's container printed, once it printed all of them."""
    lines: list[str] = []

    def done() -> bool:
        try:
            text = kube.core.read_namespaced_pod_log(name, NAMESPACE)
        except ApiException:  # the kubelet serves the log a moment after the start
            return False
        lines[:] = text.splitlines()
        return DONE in lines

    wait(f"pod {name} printed what it sees", done, 60, kube.node.kubelet_log,
         lambda: kube.pod_summary(name))
    return lines


def _values(device: dict) -> dict[str, object]:
    """Attribute name -> plain value."""
    return {k: next(iter(v.values())) for k, v in device.get("attributes", {}).items()}


def _capacity(device: dict) -> dict[str, str]:
    return {k: v["value"] for k, v in (device.get("capacity") or {}).items()}
