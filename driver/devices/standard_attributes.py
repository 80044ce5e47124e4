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

from driver.devices.model import JSON

STANDARD_DOMAIN = "resource.kubernetes.io"
NUMA_NODE = f"{STANDARD_DOMAIN}/numaNode"
"""The NUMA node of a device: an int, or a list of ints (physical node first) where
DRAListTypeAttributes is on."""
PCIE_ROOT = f"{STANDARD_DOMAIN}/pcieRoot"
"""The PCIe root complex of a PCI device, `pci<domain>:<bus>` (e.g. `pci0000:80`)."""
PCI_BUS_ID = f"{STANDARD_DOMAIN}/pciBusID"
"""The PCI address of a PCI device, extended BDF (e.g. `0000:3b:00.0`)."""
SIMULATED_NUMA_NODES = 2


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
