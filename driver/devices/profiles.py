"""Built-in simulated device profiles (`--device-profile gpu|nic`) for fake-device mode.

Attributes are derived from the node and driver name, so a node keeps the same device
identities across restarts while two nodes never share a UUID.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from driver.devices.model import JSON, Device, Inventory, Pool

# Fixed namespace so uuid5 gives the same UUID for the same (driver, node, device) forever.
_UUID_NAMESPACE = uuid.UUID("6b7e1f8a-58a4-4c0e-9a55-2f0f4b1c3d21")

GPU_MODEL = "Simulated GPU S1"
GPU_MEMORY = "80Gi"
GPU_DRIVER_VERSION = "1.0.0"
NIC_BANDWIDTH = "10G"


def stable_uuid(driver_name: str, node_name: str, device_name: str) -> str:
    """A UUID that is the same for the same device on the same node, and unique otherwise."""
    return str(uuid.uuid5(_UUID_NAMESPACE, f"{driver_name}/{node_name}/{device_name}"))


def gpu_device(driver_name: str, node_name: str, index: int) -> Device:
    """One exclusive simulated GPU."""
    name = f"gpu-{index}"
    spec: JSON = {
        "name": name,
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{stable_uuid(driver_name, node_name, name)}"},
            "model": {"string": GPU_MODEL},
            "driverVersion": {"version": GPU_DRIVER_VERSION},
            "index": {"int": index},
        },
        "capacity": {"memory": {"value": GPU_MEMORY}},
    }
    return Device(spec=spec)


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


PROFILES: dict[str, Callable[[str, str, int], Device]] = {"gpu": gpu_device, "nic": nic_device}


def profile_inventory(profiles: str, driver_name: str, node_name: str, count: int) -> Inventory:
    """`count` devices of each built-in profile in `profiles` ("gpu", "nic" or "gpu,nic"),
    in one pool named after the node."""
    devices: list[Device] = []
    for profile in profiles.split(","):
        try:
            make = PROFILES[profile.strip()]
        except KeyError:
            known = ", ".join(sorted(PROFILES))
            raise ValueError(f"unknown device profile {profile!r} (known: {known})") from None
        devices.extend(make(driver_name, node_name, i) for i in range(count))
    return Inventory(pools=(Pool(name=node_name, devices=tuple(devices)),))
