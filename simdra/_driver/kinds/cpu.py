"""simdra's CPU kind: the CPUs of each NUMA node as one shared device whose consumable
`cpus` capacity counts against the node's allocatable CPU (KEP-5517).

Every NUMA node is one multi-allocatable device `cpu-<node>` (`allowMultipleAllocations`)
with capacity `cpus` (the node's online CPUs; a share takes 1 by default, in steps of 1),
the standard `resource.kubernetes.io/numaNode` attribute and `cpuList` (the kernel's list
form, e.g. `0-15,32-47`, where it fits an attribute). Its `nodeAllocatableResources` map
`cpus` one to one onto the node resource `cpu`: where the gate DRANodeAllocatableResources
is on, the scheduler subtracts a claim's consumed `cpus` from the node's allocatable CPU
as it would a container's CPU request, so CPUs handed out through claims are never also
handed out to ordinary pods. A container learns its NUMA node (`NUMA_NODE`), the CPUs of
that node (`CPU_LIST`) and how many it was granted (`CAPACITY_CPUS`) through CDI env.

Fake profile (`--device-profile cpu`): `--num-devices` NUMA nodes of 32 CPUs each, node i
holding CPUs `32i` to `32i+31`. Real CPUs come from sysfs (`simdra._driver.kinds.sysfs.cpus`).
Like every kind, this one uses only the public API (`simdra`).
"""

from __future__ import annotations

from simdra._driver.api import (
    JSON,
    NUMA_NODE,
    Device,
    DeviceKind,
    FakeProfile,
    stable_uuid,
    topology_attributes,
)

CPU_CAPACITY = "cpus"
SIMULATED_CPUS_PER_NUMA_NODE = 32
MAX_CPU_LIST_LENGTH = 64  # a string attribute's limit; longer lists are left out
# A share gets one CPU unless it asks for more, and whole CPUs only: a CPU driver hands
# out exclusive CPUs, never fractions of one.
CPU_REQUEST_POLICY: JSON = {"default": "1", "validRange": {"min": "1", "step": "1"}}
# One claimed `cpus` is one `cpu` of the node's allocatable (the 1.37 field's shape).
CPU_NODE_ALLOCATABLE: JSON = {
    "cpu": {"mapping": {"capacityKey": CPU_CAPACITY, "capacityMultiplier": "1"}},
}


def cpu_device(driver_name: str, node_name: str, numa_node: int | None, cpus: int,
               cpu_list: str | None = None) -> Device:
    """The device of NUMA node `numa_node` holding `cpus` CPUs (`cpu_list` in the
    kernel's list form, when known). None: a node without NUMA, whose one device is
    `cpu-0` with no NUMA node attribute."""
    name = f"cpu-{numa_node or 0}"
    attributes: JSON = {
        "type": {"string": "cpu"},
        "uuid": {"string": stable_uuid(driver_name, node_name, name)},
        **topology_attributes(numa_node),
    }
    if cpu_list and len(cpu_list) <= MAX_CPU_LIST_LENGTH:
        attributes["cpuList"] = {"string": cpu_list}
    spec: JSON = {
        "name": name,
        "allowMultipleAllocations": True,
        "attributes": attributes,
        "capacity": {CPU_CAPACITY: {"value": str(cpus), "requestPolicy": CPU_REQUEST_POLICY}},
        "nodeAllocatableResources": CPU_NODE_ALLOCATABLE,
    }
    return Device(spec=spec)


def simulated_cpu_device(driver_name: str, node_name: str, index: int) -> Device:
    """Simulated NUMA node `index`: 32 CPUs, numbered on from the nodes before it."""
    first = index * SIMULATED_CPUS_PER_NUMA_NODE
    cpu_list = f"{first}-{first + SIMULATED_CPUS_PER_NUMA_NODE - 1}"
    return cpu_device(driver_name, node_name, index, SIMULATED_CPUS_PER_NUMA_NODE, cpu_list)


class CpuKind(DeviceKind):
    """The CPUs of each NUMA node, shared by claims and counted against the node's
    allocatable CPU."""

    name = "cpu"
    env_attributes = {NUMA_NODE: "NUMA_NODE", "cpuList": "CPU_LIST"}
    profiles = (FakeProfile("cpu", lambda c, i: simulated_cpu_device(c.driver_name, c.node_name, i),
                            "one shared device per NUMA node, 32 CPUs each, counted against "
                            "the node's allocatable cpu"),)
