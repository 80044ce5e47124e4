"""The sysfs device backend end to end: a fake sysfs tree (kernel layout, symlinks and
all) read by the plugin process, published as ResourceSlices, rescanned as hardware
comes and goes, and prepared into CDI specs with the GPU's device nodes."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from typing import Any

from simdra._driver.testing.allocation.builders import claim as claim_json
from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster, PluginProcess
from tests.claims.builders import assert_valid_cdi_spec
from tests.devices.sysfs_trees import SysfsTree, gpu_node, nic_node

PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
# The physical devices of gpu_node + nic_node; loopback, bridge and veth are not published.
NODE_DEVICES = [
    "gpu-0000-00-02-0", "gpu-0000-3b-00-0", "gpu-0000-86-00-0", "gpu-0000-c1-00-0",
    "nic-eno1", "nic-enp94s0f0", "nic-enp94s0f1", "nic-eth0",
]


def _start(cluster: LocalCluster, tree: SysfsTree, *extra: str) -> PluginProcess:
    return cluster.start_plugin(extra=["--device-backend", "sysfs", "--sysfs-root", str(tree.sys),
                                "--rescan-interval", "0.5", *extra])


def _wait(predicate: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _attrs(device: dict) -> dict[str, Any]:
    """Attribute name -> plain value."""
    return {name: next(iter(value.values())) for name, value in device["attributes"].items()}


def _unplug_pci(tree: SysfsTree, address: str) -> None:
    """What the kernel shows after a PCI function is removed: link and directory gone."""
    link = tree.sys / "bus/pci/devices" / address
    real = link.resolve()
    link.unlink()
    shutil.rmtree(real)


def test_sysfs_node_is_published_rescanned_and_prepared(cluster: LocalCluster) -> None:
    tree = nic_node(gpu_node(SysfsTree(cluster.workdir / "hw")))
    _start(cluster, tree)

    devices = cluster.published_devices()

    assert sorted(devices) == NODE_DEVICES
    assert [len(s) for s in cluster.complete_pools().values()] == [1]  # one pool, the node
    nvidia = _attrs(devices["gpu-0000-3b-00-0"])
    assert (nvidia["type"], nvidia["vendor"], nvidia["numaNode"]) == ("gpu", "NVIDIA", 0)
    assert (nvidia[PCI_BUS_ID], nvidia[PCIE_ROOT]) == ("0000:3b:00.0", "pci0000:3a")
    assert devices["gpu-0000-c1-00-0"]["capacity"] == {"memory": {"value": "64Gi"}}
    fast_nic = devices["nic-enp94s0f1"]
    assert fast_nic["allowMultipleAllocations"] is True
    assert fast_nic["capacity"]["bandwidth"]["value"] == "25G"
    nic_attrs = _attrs(fast_nic)
    assert (nic_attrs["interfaceName"], nic_attrs["mtu"], nic_attrs[PCIE_ROOT]) == (
        "enp94s0f1", 9000, "pci0000:5e")

    # A GPU and a NIC behind the same PCIe root, as a topology-aware workload asks.
    cluster.resource.create_namespaced_resource_claim("default", _same_root_claim())
    results = cluster.allocate("same-root")["status"]["allocation"]["devices"]["results"]
    ref = cluster.claim_ref("same-root")
    answer = cluster.prepare("same-root")[ref.uid]

    assert answer["error"] == ""
    chosen = {r["request"]: r["device"] for r in results}
    assert chosen["gpu"] == "gpu-0000-00-02-0"  # the only GPU on root pci0000:00
    assert chosen["net"] in ("nic-eno1", "nic-eth0")
    [spec_file] = cluster.cdi_root.glob(f"*_{ref.uid}.json")
    spec = json.loads(spec_file.read_text())
    assert_valid_cdi_spec(spec)
    edits = {_env_value(d["containerEdits"], "REQUEST"): d["containerEdits"]
             for d in spec["devices"]}
    # Device nodes name the host's /dev: the plugin has no dev root of its own to point at.
    assert edits["gpu"]["deviceNodes"] == [{"path": "/dev/dri/card0"},
                                           {"path": "/dev/dri/renderD128"}]
    interface = _env_value(edits["net"], "INTERFACE_NAME")
    assert chosen["net"] == f"nic-{interface}"

    # Hot-plug: a new NIC appears, an unprepared GPU goes away.
    tree.nic("enp1s0", address="0000:01:00.0", speed=100000, numa_node=0)
    _unplug_pci(tree, "0000:86:00.0")

    expected = sorted({*NODE_DEVICES, "nic-enp1s0"} - {"gpu-0000-86-00-0"})
    _wait(lambda: sorted(cluster.published_devices()) == expected, "rescan published")
    added = cluster.published_devices()["nic-enp1s0"]
    assert added["capacity"]["bandwidth"]["value"] == "100G"
    assert _attrs(added)[PCI_BUS_ID] == "0000:01:00.0"
    assert cluster.unprepare(ref) == {ref.uid: {"error": ""}}


def test_bmc_video_and_the_uplink_nic_stay_out_of_the_slices(cluster: LocalCluster) -> None:
    """A GPU server: the BMC's ASPEED VGA is no GPU and eth0 carries the node's traffic;
    neither is published, nor the GPU --sysfs-deny names, and the log says why. When the
    default route moves to eno1, eno1 leaves the slices and eth0 comes back."""
    tree = nic_node(gpu_node(SysfsTree(cluster.workdir / "hw")))
    tree.gpu("0000:03:00.0", vendor=0x1A03, device=0x2000, driver="ast", class_code=0x030000)
    tree.routes(ipv4_default=("eth0",))
    plugin = _start(cluster, tree, "--proc-root", str(tree.proc),
                    "--sysfs-deny", "pci:86:00.0")

    expected = sorted(set(NODE_DEVICES) - {"nic-eth0", "gpu-0000-86-00-0"})
    assert sorted(cluster.published_devices()) == expected
    [line] = [x for x in plugin.log().splitlines() if "not publishing" in x]
    for why in ("gpu 0000:03:00.0: console display: ASPEED",
                "gpu 0000:86:00.0: denied by --sysfs-deny pci:0000:86:00.0",
                "nic eth0: carries the node's default route (IPv4)"):
        assert why in line

    tree.routes(ipv4_default=("eno1",))

    moved = sorted({*expected, "nic-eth0"} - {"nic-eno1"})
    _wait(lambda: sorted(cluster.published_devices()) == moved, "default route moved")


def _same_root_claim() -> dict:
    body = claim_json(
        "same-root",
        exactly("gpu", "gpu.dra.example.com"),
        exactly("net", "nic.dra.example.com"),
        constraints=[{"matchAttribute": PCIE_ROOT}],
    )
    body["metadata"].pop("uid")
    return body


def _env_value(edits: dict, key: str) -> str:
    [value] = [e.split("=", 1)[1] for e in edits["env"]
               if e.split("=", 1)[0].endswith(f"_{key}")]
    return value


def test_node_without_devices_publishes_an_empty_pool_and_keeps_scanning(
        cluster: LocalCluster) -> None:
    tree = SysfsTree(cluster.workdir / "hw")
    plugin = _start(cluster, tree)

    [[only_slice]] = cluster.complete_pools().values()

    assert only_slice["spec"]["pool"]["name"] == cluster.node_name
    assert only_slice["spec"].get("devices", []) == []

    tree.nic("eth0", address="0000:00:03.0", speed=1000)

    _wait(lambda: list(cluster.published_devices()) == ["nic-eth0"], "first device published")
    assert plugin.process.poll() is None
