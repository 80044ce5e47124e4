"""The sysfs backend as the plugin uses it: one pool, stable names, valid devices."""

from __future__ import annotations

from pathlib import Path

import pytest

from simdra._driver.core.validation import validate_device
from simdra._driver.devices.backend import DeviceBackend
from simdra._driver.devices.model import Inventory
from simdra._driver.kinds.sysfs import SysfsBackend
from simdra._driver.kinds.sysfs.nvml import NoNvml, NvmlGpu, NvmlSnapshot
from tests.devices.sysfs_trees import GIB, SysfsTree, gpu_node, nic_node

NODE = "worker-1"


def backend(tree: SysfsTree, **kwargs: object) -> SysfsBackend:
    return SysfsBackend(tree.sys, tree.dev, node_name=NODE, driver_name="hw.example.com",
                        nvml=kwargs.pop("nvml", NoNvml()), **kwargs)  # type: ignore[arg-type]


def names(inventory: Inventory) -> list[str]:
    return [device.name for _, device in inventory.devices()]


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    return nic_node(gpu_node(SysfsTree(tmp_path)))


def test_one_pool_named_after_the_node_in_name_order(tree: SysfsTree) -> None:
    inventory = backend(tree).discover()

    assert [pool.name for pool in inventory.pools] == [NODE]
    assert names(inventory) == sorted(names(inventory))
    assert len(names(inventory)) == 8  # 4 GPUs + 4 physical NICs


@pytest.mark.parametrize("layout", ["empty-tree", "missing-root"])
def test_node_without_devices_has_an_empty_pool(tmp_path: Path, layout: str) -> None:
    sys_root = SysfsTree(tmp_path).sys if layout == "empty-tree" else tmp_path / "nothing"

    inventory = SysfsBackend(sys_root, tmp_path / "dev", node_name=NODE,
                             driver_name="hw.example.com", nvml=NoNvml()).discover()

    assert inventory == Inventory(pools=(inventory.pools[0],))
    assert inventory.pools[0].name == NODE
    assert inventory.pools[0].devices == ()


def test_rescanning_the_same_hardware_gives_the_same_inventory(tree: SysfsTree) -> None:
    first = backend(tree).discover()

    assert backend(tree).discover() == first  # a restarted plugin
    assert backend(tree).discover().pools[0].devices == first.pools[0].devices


def test_a_root_mounted_through_a_symlink_sees_the_same_devices(tree: SysfsTree,
                                                               tmp_path: Path) -> None:
    # e.g. the host's /sys bind-mounted into the plugin's container under another path
    (tmp_path / "host-sys").symlink_to(tree.sys)
    via_link = SysfsBackend(tmp_path / "host-sys", tree.dev, node_name=NODE,
                            driver_name="hw.example.com", nvml=NoNvml()).discover()

    assert via_link == backend(tree).discover()


def test_new_hardware_never_renames_existing_devices(tree: SysfsTree) -> None:
    before = {d.name: d for _, d in backend(tree).discover().devices()}
    # Lower addresses and names than all existing ones: enumeration order shifts.
    tree.gpu("0000:01:00.0", vendor=0x10DE, device=0x2684, card=5)
    tree.nic("eno0", address="0000:00:1a.0", speed=1000, vendor=0x8086, device=0x15B9,
             driver="e1000e")

    after = {d.name: d for _, d in backend(tree).discover().devices()}

    assert set(after) - set(before) == {"gpu-0000-01-00-0", "nic-eno0"}
    assert {name: after[name] for name in before} == before


def test_every_device_passes_api_validation(tree: SysfsTree) -> None:
    tree.nvidia_control_nodes("nvidiactl", "nvidia-uvm")
    long_name = "NVIDIA " + "X" * 100  # longer than the API's 64 characters
    nvml = NvmlSnapshot(driver_version="550.54", cuda_driver_version=12040, gpus=(
        NvmlGpu(bus_id="0000:3b:00.0", uuid="GPU-abc", name=long_name, memory_total=80 * GIB,
                compute_capability=(9, 0), minor=3),))
    tree.nic("Weird.If@1", address="0000:00:1b.0", speed=1)

    inventory = backend(tree, nvml=_Fixed(nvml), include_virtual_nics=True).discover()

    errors = [str(e) for i, (_, device) in enumerate(inventory.devices())
              for e in validate_device(device.to_json(), f"spec.devices[{i}]")]
    assert errors == []
    gpu = inventory.device(NODE, "gpu-0000-3b-00-0")
    assert gpu is not None and gpu.attribute("model") == long_name[:64]
    assert gpu.spec["attributes"]["driverVersion"] == {"version": "550.54.0"}


def test_sysfs_backend_is_a_device_backend(tree: SysfsTree) -> None:
    chosen: DeviceBackend = backend(tree)

    assert isinstance(chosen.discover(), Inventory)


def test_this_machines_sys_scans_without_error() -> None:
    inventory = SysfsBackend(node_name=NODE, driver_name="hw.example.com").discover()

    assert [pool.name for pool in inventory.pools] == [NODE]
    for i, (_, device) in enumerate(inventory.devices()):
        assert validate_device(device.to_json(), f"spec.devices[{i}]") == []


class _Fixed:
    def __init__(self, snapshot: NvmlSnapshot) -> None:
        self._snapshot = snapshot

    def snapshot(self) -> NvmlSnapshot:
        return self._snapshot
