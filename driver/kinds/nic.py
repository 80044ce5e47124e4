"""simdra's NIC kind: simulated NICs whose 10G `bandwidth` many claims share (the
Kubernetes docs' example), and the NicConfig they take. Uses only the public API."""

from __future__ import annotations

import uuid

from driver.kinds.config_handlers import NicConfigHandler
from simdra import JSON, NUMA_NODE, Device, DeviceKind, FakeProfile, simulated_topology, stable_uuid

NIC_BANDWIDTH = "10G"


def nic_device(driver_name: str, node_name: str, index: int) -> Device:
    """One simulated NIC whose bandwidth many claims share (the Kubernetes docs' example)."""
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
            **simulated_topology(index),
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
    profiles = (FakeProfile("nic", lambda c, i: nic_device(c.driver_name, c.node_name, i),
                            "NICs whose 10G bandwidth many claims share"),)
