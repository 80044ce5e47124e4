"""GPU discovery from fake sysfs trees: identity, topology, memory, device nodes, NVML."""

from __future__ import annotations

from pathlib import Path

import pytest

from simdra._driver.devices.model import Device, Inventory
from simdra._driver.kinds.sysfs import SysfsBackend
from simdra._driver.kinds.sysfs.gpus import device_node
from simdra._driver.kinds.sysfs.nvml import NoNvml, NvmlGpu, NvmlSnapshot
from tests.devices.sysfs_trees import GIB, SysfsTree, gpu_node

NODE = "node-a"
DRIVER = "gpu.example.com"


class FakeNvml:
    """NVML as a driver would report it, with NVML's own bus id spelling."""

    def __init__(self, snapshot: NvmlSnapshot | None) -> None:
        self._snapshot = snapshot
        self.calls = 0

    def snapshot(self) -> NvmlSnapshot | None:
        self.calls += 1
        return self._snapshot


H100 = NvmlGpu(bus_id="0000:3b:00.0", uuid="GPU-1d2c3b4a-0000-1111-2222-333344445555",
               name="NVIDIA H100 80GB HBM3", memory_total=80 * GIB,
               compute_capability=(9, 0), minor=0)
NVML = NvmlSnapshot(driver_version="535.104.05", cuda_driver_version=12040,
                    gpus=(H100, NvmlGpu(bus_id="0000:99:00.0", uuid="GPU-not-in-sysfs",
                                        name="ghost", memory_total=GIB)))


def discover(tree: SysfsTree, nvml: object = None) -> Inventory:
    backend = SysfsBackend(tree.sys, tree.dev, node_name=NODE, driver_name=DRIVER,
                           nvml=nvml or NoNvml())
    return backend.discover()


def devices(inventory: Inventory) -> dict[str, Device]:
    return {device.name: device for _, device in inventory.devices()}


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    return gpu_node(SysfsTree(tmp_path))


def test_every_display_function_is_a_gpu_and_nothing_else(tree: SysfsTree) -> None:
    found = devices(discover(tree))

    # The SATA controller and the PCI bridge are not display controllers.
    assert sorted(found) == ["gpu-0000-00-02-0", "gpu-0000-3b-00-0", "gpu-0000-86-00-0",
                             "gpu-0000-c1-00-0"]
    assert all(d.attribute("type") == "gpu" for d in found.values())
    assert not any(d.allows_multiple_allocations for d in found.values())


def test_gpu_carries_pci_identity_and_topology(tree: SysfsTree) -> None:
    behind_bridge = devices(discover(tree))["gpu-0000-3b-00-0"]

    assert behind_bridge.attribute("resource.kubernetes.io/pciBusID") == "0000:3b:00.0"
    # The root complex is the top of the resolved path, not the function's own bus.
    assert behind_bridge.attribute("resource.kubernetes.io/pcieRoot") == "pci0000:3a"
    assert behind_bridge.attribute("vendor") == "NVIDIA"
    assert behind_bridge.attribute("vendorID") == "0x10de"
    assert behind_bridge.attribute("deviceID") == "0x2330"
    assert behind_bridge.attribute("kernelDriver") == "nvidia"
    assert behind_bridge.attribute("numaNode") == 0
    # The standard name, which aligns devices of different drivers (matchAttribute).
    assert behind_bridge.attribute("resource.kubernetes.io/numaNode") == 0


def test_unknown_numa_node_is_left_out(tree: SysfsTree) -> None:
    igpu = devices(discover(tree))["gpu-0000-00-02-0"]

    # The kernel's -1 is not published: it would match every other device without one.
    assert "numaNode" not in igpu.spec["attributes"]
    assert "resource.kubernetes.io/numaNode" not in igpu.spec["attributes"]
    assert igpu.attribute("vendor") == "Intel"


def test_unknown_vendor_has_ids_but_no_name(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    tree.gpu("0000:07:00.0", vendor=0xABCD, device=0x0001, driver=None)

    gpu = devices(discover(tree))["gpu-0000-07-00-0"]

    assert gpu.attribute("vendorID") == "0xabcd"
    assert "vendor" not in gpu.spec["attributes"]
    assert "kernelDriver" not in gpu.spec["attributes"]


def test_amdgpu_vram_is_the_memory_capacity(tree: SysfsTree) -> None:
    amd = devices(discover(tree))["gpu-0000-c1-00-0"]

    assert amd.spec["capacity"] == {"memory": {"value": "64Gi"}}
    assert amd.attribute("vendor") == "AMD"


def test_no_memory_capacity_when_the_kernel_does_not_say(tree: SysfsTree) -> None:
    found = devices(discover(tree))

    # Without NVML an NVIDIA GPU's memory is unknown, and an iGPU has none of its own.
    assert "capacity" not in found["gpu-0000-3b-00-0"].spec
    assert "capacity" not in found["gpu-0000-00-02-0"].spec


def test_drm_nodes_become_cdi_device_nodes(tree: SysfsTree) -> None:
    found = devices(discover(tree))

    assert found["gpu-0000-00-02-0"].container_edits == {"deviceNodes": [
        {"path": "/dev/dri/card0", "hostPath": str(tree.dev / "dri/card0")},
        {"path": "/dev/dri/renderD128", "hostPath": str(tree.dev / "dri/renderD128")},
    ]}
    assert [n["path"] for n in found["gpu-0000-c1-00-0"].container_edits["deviceNodes"]] == [
        "/dev/dri/card1", "/dev/dri/renderD129"]
    for node in found["gpu-0000-00-02-0"].container_edits["deviceNodes"]:
        assert Path(node["hostPath"]).exists()


def test_device_nodes_under_the_real_dev_need_no_host_path() -> None:
    # hostPath needs CDI 0.5.0, so it is only written when it differs from path.
    assert device_node("dri/card0", Path("/dev")) == {"path": "/dev/dri/card0"}
    assert device_node("dri/card0", Path("/host/dev")) == {
        "path": "/dev/dri/card0", "hostPath": "/host/dev/dri/card0"}


def test_container_edits_never_reach_the_published_form(tree: SysfsTree) -> None:
    for _, device in discover(tree).devices():
        assert "deviceNodes" not in device.to_json()
        assert "containerEdits" not in device.to_json()


def test_nvml_enriches_the_matching_nvidia_gpu(tree: SysfsTree) -> None:
    tree.nvidia_control_nodes("nvidiactl")  # nvidia-uvm not loaded on this node
    found = devices(discover(tree, FakeNvml(NVML)))
    h100 = found["gpu-0000-3b-00-0"]

    assert h100.attribute("uuid") == H100.uuid
    assert h100.attribute("model") == "NVIDIA H100 80GB HBM3"
    assert h100.spec["capacity"] == {"memory": {"value": "80Gi"}}
    # 535.104.05 is not semver (leading zero); published as 535.104.5.
    assert h100.spec["attributes"]["driverVersion"] == {"version": "535.104.5"}
    assert h100.spec["attributes"]["cudaDriverVersion"] == {"version": "12.4.0"}
    assert h100.spec["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert [n["path"] for n in h100.container_edits["deviceNodes"]] == [
        "/dev/nvidia0", "/dev/nvidiactl"]


def test_nvidia_gpu_unknown_to_nvml_keeps_sysfs_attributes(tree: SysfsTree) -> None:
    found = devices(discover(tree, FakeNvml(NVML)))
    other = found["gpu-0000-86-00-0"]

    assert "uuid" not in other.spec["attributes"]
    assert "capacity" not in other.spec
    assert other.attribute("resource.kubernetes.io/pciBusID") == "0000:86:00.0"
    # The NVML GPU without a sysfs function is not invented.
    assert len(found) == 4


def test_absent_nvml_gives_the_same_devices_as_no_nvml(tree: SysfsTree) -> None:
    absent = FakeNvml(None)

    assert discover(tree, absent) == discover(tree, NoNvml())
    assert absent.calls == 1
