"""simdra's NIC kind: simulated NICs whose 10G `bandwidth` many claims share (the
Kubernetes docs' example), and the NicConfig they take. Uses only the public API."""

from __future__ import annotations

import uuid

from simdra._driver.api import (
    JSON,
    NUMA_NODE,
    Device,
    DeviceKind,
    FakeProfile,
    numa_span_attributes,
    simulated_topology,
    stable_uuid,
)
from simdra._driver.kinds.config_handlers import NicConfigHandler

NIC_BANDWIDTH = "10G"
# `nic-multi-numa`: a node of two sockets, each split into two NUMA nodes (sub-NUMA
# clustering), so a NIC is near both nodes of its socket.
SPAN_SOCKETS = 2
SPAN_NODES_PER_SOCKET = 2


def spanning_numa_nodes(index: int) -> list[int]:
    """The NUMA nodes NIC `index` of `nic-multi-numa` is near: both nodes of socket
    index mod 2, physical node first ([0, 1] for even NICs, [2, 3] for odd ones)."""
    first = (index % SPAN_SOCKETS) * SPAN_NODES_PER_SOCKET
    return list(range(first, first + SPAN_NODES_PER_SOCKET))


def nic_device(driver_name: str, node_name: str, index: int) -> Device:
    """One simulated NIC whose bandwidth many claims share (the Kubernetes docs' example)."""
    return _nic(driver_name, node_name, index, simulated_topology(index))


def spanning_nic_device(driver_name: str, node_name: str, index: int) -> Device:
    """One simulated NIC near two NUMA nodes: the standard numaNode is a list
    (`spanning_numa_nodes`), published as such with `--list-attributes`."""
    topology = numa_span_attributes(spanning_numa_nodes(index), f"pci0000:{index % 256:02x}")
    return _nic(driver_name, node_name, index, topology)


def _nic(driver_name: str, node_name: str, index: int, topology: JSON) -> Device:
    name = f"nic-{index}"
    device_uuid = stable_uuid(driver_name, node_name, name)
    spec: JSON = {
        "name": name,
        "allowMultipleAllocations": True,
        "attributes": {
            "type": {"string": "nic"},
            "uuid": {"string": device_uuid},
            "interfaceName": {"string": f"sim{index}"},
            "macAddress": {"string": _mac_from_uuid(device_uuid)},
            **topology,
        },
        "capacity": {
            "bandwidth": {
                "value": NIC_BANDWIDTH,
                "requestPolicy": {"default": "1M", "validRange": {"min": "1M", "step": "8"}},
            }
        },
    }
    return Device(spec=spec)


def _mac_from_uuid(device_uuid: str) -> str:
    """A locally administered unicast MAC derived from the device UUID."""
    raw = bytearray(uuid.UUID(device_uuid).bytes[:6])
    raw[0] = (raw[0] | 0x02) & 0xFE
    return ":".join(f"{b:02x}" for b in raw)


class NicKind(DeviceKind):
    """NICs whose bandwidth many claims share."""

    name = "nic"
    env_attributes = {"uuid": "UUID", "interfaceName": "INTERFACE_NAME",
                      "macAddress": "MAC_ADDRESS", NUMA_NODE: "NUMA_NODE"}
    config_handlers = (NicConfigHandler(),)
    profiles = (
        FakeProfile("nic", lambda c, i: nic_device(c.driver_name, c.node_name, i),
                    "NICs whose 10G bandwidth many claims share"),
        FakeProfile("nic-multi-numa",
                    lambda c, i: spanning_nic_device(c.driver_name, c.node_name, i),
                    "NICs near two NUMA nodes each: the standard numaNode a list "
                    "(--list-attributes)"),
    )
