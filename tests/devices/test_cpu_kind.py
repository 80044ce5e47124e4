"""CPUs as devices (simdra._driver.kinds.cpu): one shared device per NUMA node whose claimed
`cpus` count against the node's allocatable cpu, fake and read from sysfs, valid as the
API server checks them, and what a container learns about its share."""

from __future__ import annotations

from pathlib import Path

import pytest

from simdra import NUMA_NODE, Device
from simdra._driver.builtins import builtin_kinds
from simdra._driver.core.validation import validate_device
from simdra._driver.devices.profiles import profile_inventory
from simdra._driver.kinds.sysfs import SysfsBackend
from simdra._driver.kinds.sysfs.cpus import cpu_devices, format_cpu_list, parse_cpu_list
from simdra._driver.kinds.sysfs.nvml import NoNvml
from tests.devices.sysfs_trees import SysfsTree

DRIVER, NODE = "dra.example.com", "node-a"
CPU_MAPPING = {"cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "1"}}}


def _by_name(devices: list[Device]) -> dict[str, Device]:
    return {d.name: d for d in devices}


def test_fake_profile_offers_one_shared_device_per_numa_node() -> None:
    inventory = profile_inventory("cpu", DRIVER, NODE, 2, kinds=builtin_kinds())
    found = _by_name([d for _, d in inventory.devices()])

    assert sorted(found) == ["cpu-0", "cpu-1"]
    for index, device in enumerate(found.values()):
        assert device.allows_multiple_allocations
        assert device.attribute(NUMA_NODE) == index
        assert device.capacity() == {"cpus": 32}
        assert device.spec["nodeAllocatableResources"] == CPU_MAPPING
        assert validate_device(device.spec, "spec.devices[0]") == []
    assert found["cpu-1"].attribute("cpuList") == "32-63"


def test_a_claim_gets_one_cpu_unless_it_asks_for_more_whole_cpus() -> None:
    (_, device), *_ = profile_inventory("cpu", DRIVER, NODE, 1, kinds=builtin_kinds()).devices()

    policy = device.spec["capacity"]["cpus"]["requestPolicy"]
    assert policy == {"default": "1", "validRange": {"min": "1", "step": "1"}}


def test_cpu_numa_nodes_align_with_the_simulated_gpus() -> None:
    inventory = profile_inventory("gpu,cpu", DRIVER, NODE, 2, kinds=builtin_kinds())
    found = _by_name([d for _, d in inventory.devices()])

    assert found["gpu-1"].attribute(NUMA_NODE) == found["cpu-1"].attribute(NUMA_NODE) == 1


@pytest.mark.parametrize(("text", "cpus"), [
    ("0-3,8,10-11\n", {0, 1, 2, 3, 8, 10, 11}),
    ("5", {5}),
    ("", set()),
    ("3-1", set()),  # backwards: broken
    ("0-x", set()),
    ("0-99999999", set()),  # beyond any kernel
])
def test_kernel_cpu_lists_parse_or_read_as_empty(text: str, cpus: set[int]) -> None:
    assert parse_cpu_list(text) == cpus


def test_cpu_lists_are_written_in_the_kernel_form() -> None:
    assert format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert format_cpu_list(set()) == ""


def test_sysfs_numa_nodes_become_devices_of_their_online_cpus(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    tree.cpus("0-5,7", {0: "0-3", 1: "4-7", 2: ""})  # cpu 6 offline; node 2 memory only

    found = _by_name(cpu_devices(tree.sys, DRIVER, NODE))

    assert sorted(found) == ["cpu-0", "cpu-1"]
    assert found["cpu-0"].capacity() == {"cpus": 4}
    assert found["cpu-1"].capacity() == {"cpus": 3}
    assert found["cpu-1"].attribute("cpuList") == "4-5,7"
    assert found["cpu-1"].attribute(NUMA_NODE) == 1
    assert all(validate_device(d.spec, "d") == [] for d in found.values())


def test_a_kernel_without_numa_has_one_device_without_a_numa_node(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    tree.cpus("0-1", {})

    [device] = cpu_devices(tree.sys, DRIVER, NODE)

    assert (device.name, device.capacity(), device.attribute(NUMA_NODE)) == (
        "cpu-0", {"cpus": 2}, None)


def test_unreadable_cpu_files_publish_nothing(tmp_path: Path) -> None:
    assert cpu_devices(SysfsTree(tmp_path).sys, DRIVER, NODE) == []


def test_the_sysfs_backend_publishes_cpus_only_when_asked(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    tree.cpus("0-3", {0: "0-3"})

    def names(cpus: bool) -> list[str]:
        backend = SysfsBackend(tree.sys, tree.dev, node_name=NODE, driver_name=DRIVER,
                               nvml=NoNvml(), cpus=cpus)
        return [d.name for _, d in backend.discover().devices()]

    assert names(cpus=False) == []
    assert names(cpus=True) == ["cpu-0"]


def test_cpus_going_offline_change_the_backends_stamp(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    tree.cpus("0-3", {0: "0-3"})
    backend = SysfsBackend(tree.sys, tree.dev, node_name=NODE, driver_name=DRIVER,
                           nvml=NoNvml(), cpus=True)
    before = backend.change_stamp()

    tree.cpus("0-2", {0: "0-3"})

    assert backend.change_stamp() != before
