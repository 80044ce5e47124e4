"""Kubernetes' standard device attributes (domain `resource.kubernetes.io`), which every
driver publishes under the same name so that one claim can align devices of different
drivers: `matchAttribute: resource.kubernetes.io/numaNode` puts a GPU of one driver and
a NIC of another on one NUMA node.

Names and value forms as k8s.io/dynamic-resource-allocation/deviceattribute defines them
(v0.37): `numaNode` an int (GA in 1.37; a list of ints only where DRAListTypeAttributes
is on, physical node first), `pcieRoot` `pci<domain>:<bus>`, `pciBusID` the extended BDF.
A device without NUMA affinity (the kernel's -1) publishes no `numaNode`: -1 would match
every other such device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from simdra._driver.devices.model import JSON, Device, Inventory

STANDARD_DOMAIN = "resource.kubernetes.io"
NUMA_NODE = f"{STANDARD_DOMAIN}/numaNode"
"""The NUMA node of a device: an int, or a list of ints (physical node first) where
DRAListTypeAttributes is on."""
PCIE_ROOT = f"{STANDARD_DOMAIN}/pcieRoot"
"""The PCIe root complex of a PCI device, `pci<domain>:<bus>` (e.g. `pci0000:80`)."""
PCI_BUS_ID = f"{STANDARD_DOMAIN}/pciBusID"
"""The PCI address of a PCI device, extended BDF (e.g. `0000:3b:00.0`)."""
SIMULATED_NUMA_NODES = 2
LIST_KINDS = {"ints": "int", "bools": "bool", "strings": "string", "versions": "version"}
"""The list members of a DeviceAttribute (DRAListTypeAttributes) and their scalar forms."""


def topology_attributes(numa_node: int | None, pcie_root: str | None = None,
                        pci_bus_id: str | None = None) -> JSON:
    """The standard attributes of what is known; nothing for an unknown or -1 node.

    Example::

        topology_attributes(1, "pci0000:81")
        # {"resource.kubernetes.io/numaNode": {"int": 1},
        #  "resource.kubernetes.io/pcieRoot": {"string": "pci0000:81"}}
    """
    attributes: JSON = {}
    if numa_node is not None and numa_node >= 0:
        attributes[NUMA_NODE] = {"int": numa_node}
    if pcie_root:
        attributes[PCIE_ROOT] = {"string": pcie_root}
    if pci_bus_id:
        attributes[PCI_BUS_ID] = {"string": pci_bus_id}
    return attributes


def simulated_topology(index: int, numa_nodes: int = SIMULATED_NUMA_NODES) -> JSON:
    """The standard attributes of simulated device `index` on a node of `numa_nodes`
    NUMA nodes: device i sits on node i mod numa_nodes, behind PCIe root complex i.

    Devices of different kinds with one index share a root complex and a node, as a GPU
    and the NIC beside it do on a real server, so fake mode can test alignment.

    Example::

        simulated_topology(3)
        # {"resource.kubernetes.io/numaNode": {"int": 1},
        #  "resource.kubernetes.io/pcieRoot": {"string": "pci0000:03"}}
    """
    return topology_attributes(index % numa_nodes, f"pci0000:{index % 256:02x}")


def numa_span_attributes(numa_nodes: Sequence[int], pcie_root: str | None = None) -> JSON:
    """The standard attributes of a device near several NUMA nodes (physical node
    first): `numaNode` a list of ints, as DRAListTypeAttributes publishes it; one node
    gives the plain int. Nodes below 0 (no affinity) are left out.

    A server without the gate refuses the list (the slice fails validation), so the
    plugin publishes it only with `--list-attributes` and otherwise folds it to the
    first node (`scalar_attributes`).

    Example::

        numa_span_attributes([2, 3])
        # {"resource.kubernetes.io/numaNode": {"ints": [2, 3]}}
    """
    nodes = list(dict.fromkeys(n for n in numa_nodes if n >= 0))
    attributes = topology_attributes(nodes[0] if len(nodes) == 1 else None, pcie_root)
    if len(nodes) > 1:
        attributes[NUMA_NODE] = {"ints": nodes}
    return attributes


def scalar_attributes(inventory: Inventory) -> Inventory:
    """`inventory` with every list-valued attribute replaced by its first item (for
    the standard `numaNode`, the physical node): what a server without
    DRAListTypeAttributes accepts. Devices without lists are kept as they are.

    Example::

        scalar_attributes(inventory)  # {"ints": [2, 3]} becomes {"int": 2}
    """
    if not any(_has_lists(d) for _, d in inventory.devices()):
        return inventory
    # replace(), not a new Pool or Device: every other field (counters, partition type,
    # node operations) is kept as it is.
    return Inventory(pools=tuple(
        dataclasses.replace(pool, devices=tuple(_scalar_device(d) for d in pool.devices))
        for pool in inventory.pools))


def _has_lists(device: Device) -> bool:
    return any(key in LIST_KINDS for entry in (device.spec.get("attributes") or {}).values()
               for key in entry)


def _scalar_device(device: Device) -> Device:
    if not _has_lists(device):
        return device
    spec = dict(device.spec)
    spec["attributes"] = {name: _scalar_entry(entry)
                          for name, entry in (device.spec.get("attributes") or {}).items()}
    return dataclasses.replace(device, spec=spec)


def _scalar_entry(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    for key, scalar in LIST_KINDS.items():
        if entry.get(key):
            return {scalar: entry[key][0]}
    return entry
