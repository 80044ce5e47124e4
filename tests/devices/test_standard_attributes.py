"""Kubernetes' standard topology attributes on simdra's devices: a fake GPU and the fake
NIC of the same index sit on one NUMA node and one PCIe root complex, as on a real
server, so that a claim can align them with `matchAttribute` on the standard name."""

from __future__ import annotations

import pytest

from simdra import (
    NUMA_NODE,
    PCIE_ROOT,
    scalar_attributes,
    simulated_topology,
    topology_attributes,
)
from simdra._driver.builtins import builtin_kinds
from simdra._driver.devices.model import Device, Inventory, Pool
from simdra._driver.devices.profiles import profile_inventory


def _devices(profiles: str, count: int) -> dict[str, Device]:
    inventory = profile_inventory(profiles, "dra.example.com", "node-a", count,
                                  kinds=builtin_kinds())
    return {device.name: device for _, device in inventory.devices()}


@pytest.mark.parametrize("profiles", ["gpu,nic", "gpu-shared,nic", "gpu-partitioned,nic"])
def test_a_gpu_and_the_nic_of_its_index_share_numa_node_and_root_complex(profiles):
    found = _devices(profiles, 4)

    for index in range(4):
        gpu, nic = found[f"gpu-{index}"], found[f"nic-{index}"]
        assert gpu.attribute(NUMA_NODE) == nic.attribute(NUMA_NODE) == index % 2
        assert gpu.attribute(PCIE_ROOT) == nic.attribute(PCIE_ROOT) == f"pci0000:{index:02x}"


def test_partitions_carry_the_topology_of_their_gpu():
    found = _devices("gpu-partitioned", 2)

    partitions = [d for name, d in found.items() if name.startswith("gpu-1-")]
    assert partitions and all(d.attribute(NUMA_NODE) == 1 for d in partitions)


def test_a_device_without_numa_affinity_publishes_no_node():
    assert topology_attributes(-1, "pci0000:00") == {PCIE_ROOT: {"string": "pci0000:00"}}
    assert topology_attributes(None) == {}


def test_the_simulated_node_count_spreads_devices_round_robin():
    assert [simulated_topology(i, numa_nodes=4)[NUMA_NODE]["int"] for i in range(6)] == [
        0, 1, 2, 3, 0, 1]


def test_scalar_lists_keep_every_other_field_of_pools_and_devices():
    """Without DRAListTypeAttributes a list becomes its first item, and only that: a
    pool's partition type and counters and a device's node operations stay published."""
    spanning = Device(spec={"name": "nic-0", "attributes": {NUMA_NODE: {"ints": [2, 3]}},
                            "consumesCounters": [{"counterSet": "s", "counters": {}}]},
                      container_edits={"env": ["A=1"]}, skip_node_operations=("*",))
    pool = Pool(name="p", devices=(spanning,), shared_counters=({"name": "s"},),
                partition_type_attribute="dra.example.com/profile")

    (scalar_pool,) = scalar_attributes(Inventory(pools=(pool,))).pools

    (device,) = scalar_pool.devices
    assert device.spec["attributes"] == {NUMA_NODE: {"int": 2}}
    assert (device.container_edits, device.skip_node_operations) == ({"env": ["A=1"]}, ("*",))
    assert scalar_pool.partition_type_attribute == "dra.example.com/profile"
    assert scalar_pool.shared_counters == ({"name": "s"},)
