"""Built-in simulated device profiles (`--device-profile`) for fake-device mode.

Profiles, comma-combinable into one pool named after the node:

* `gpu`: exclusive GPUs (`gpu-<i>`), one claim at a time, `memory` 80Gi;
* `gpu-shared`: multi-allocatable GPUs (`allowMultipleAllocations`) whose consumable
  `memory` (80Gi; default 8Gi, min 1Gi, step 1Gi) and `compute` (100 units, i.e. percent
  of the GPU; default = min 10, step 10) many claims share;
* `gpu-partitioned`: MIG-like GPUs. Each physical GPU has a counter set
  `gpu-<i>-counters` (`memory` 80Gi, `slices` 7) published in the pool's counter slice
  (api-facts 4.2: never in a slice with devices). The whole GPU `gpu-<i>` consumes all of it;
  its partitions `gpu-<i>-1g-<k>` (7 x 1g.10gb), `gpu-<i>-2g-<k>` (3 x 2g.20gb) and
  `gpu-<i>-3g-<k>` (2 x 3g.40gb) consume parts, so the scheduler can hand out e.g. a 3g and
  two 2g partitions of one GPU, but never the whole GPU next to any partition of it;
* `nic`: NICs whose 10G `bandwidth` many claims share.

At most one GPU profile per inventory: all three name their GPUs `gpu-<i>`.
Attributes are derived from the node and driver name, so a node keeps the same device
identities across restarts while two nodes never share a UUID.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from driver.devices.model import JSON, Device, Inventory, Pool

# Fixed namespace so uuid5 gives the same UUID for the same (driver, node, device) forever.
_UUID_NAMESPACE = uuid.UUID("6b7e1f8a-58a4-4c0e-9a55-2f0f4b1c3d21")

GPU_MODEL = "Simulated GPU S1"
GPU_MEMORY = "80Gi"
GPU_DRIVER_VERSION = "1.0.0"
NIC_BANDWIDTH = "10G"

# Shared GPUs: what one share consumes when its request names no amount, and the grid
# requests are rounded up to (api-facts 4.5, 4.8: default >= min, aligned to step).
GPU_COMPUTE = "100"
GPU_MEMORY_POLICY: JSON = {"default": "8Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
GPU_COMPUTE_POLICY: JSON = {"default": "10", "validRange": {"min": "10", "step": "10"}}

# Partitioned GPUs: the counters of one physical GPU and the partition shapes cut from it.
GPU_SLICES = 7


@dataclass(frozen=True)
class PartitionShape:
    """One MIG-like partition profile: compute slices, memory, and how many fit a GPU."""

    profile: str  # e.g. "1g.10gb"
    slices: int
    memory: str
    count: int

    @property
    def short(self) -> str:
        """The device name part, e.g. `1g`."""
        return self.profile.split(".", 1)[0]


PARTITION_SHAPES = (
    PartitionShape("1g.10gb", 1, "10Gi", 7),
    PartitionShape("2g.20gb", 2, "20Gi", 3),
    PartitionShape("3g.40gb", 3, "40Gi", 2),
)
WHOLE_GPU_PROFILE = f"{GPU_SLICES}g.80gb"


@dataclass(frozen=True)
class ProfileDevices:
    """What one profile adds to the pool: devices and the counter sets they consume."""

    devices: tuple[Device, ...]
    shared_counters: tuple[JSON, ...] = ()


def stable_uuid(driver_name: str, node_name: str, device_name: str) -> str:
    """A UUID that is the same for the same device on the same node, and unique otherwise."""
    return str(uuid.uuid5(_UUID_NAMESPACE, f"{driver_name}/{node_name}/{device_name}"))


def _gpu_attributes(driver_name: str, node_name: str, name: str, index: int) -> JSON:
    return {
        "type": {"string": "gpu"},
        "uuid": {"string": f"GPU-{stable_uuid(driver_name, node_name, name)}"},
        "model": {"string": GPU_MODEL},
        "driverVersion": {"version": GPU_DRIVER_VERSION},
        "index": {"int": index},
    }


def gpu_device(driver_name: str, node_name: str, index: int) -> Device:
    """One exclusive simulated GPU."""
    name = f"gpu-{index}"
    spec: JSON = {
        "name": name,
        "attributes": _gpu_attributes(driver_name, node_name, name, index),
        "capacity": {"memory": {"value": GPU_MEMORY}},
    }
    return Device(spec=spec)


def shared_gpu_device(driver_name: str, node_name: str, index: int) -> Device:
    """One simulated GPU whose memory and compute many claims share."""
    name = f"gpu-{index}"
    spec: JSON = {
        "name": name,
        "allowMultipleAllocations": True,
        "attributes": _gpu_attributes(driver_name, node_name, name, index),
        "capacity": {
            "memory": {"value": GPU_MEMORY, "requestPolicy": _copy(GPU_MEMORY_POLICY)},
            "compute": {"value": GPU_COMPUTE, "requestPolicy": _copy(GPU_COMPUTE_POLICY)},
        },
    }
    return Device(spec=spec)


def counter_set_name(index: int) -> str:
    """The counter set of physical GPU `index` in a partitioned pool."""
    return f"gpu-{index}-counters"


def gpu_counter_set(index: int) -> JSON:
    """The shared counters of one physical GPU (a v1 CounterSet)."""
    return {
        "name": counter_set_name(index),
        "counters": {"memory": {"value": GPU_MEMORY}, "slices": {"value": str(GPU_SLICES)}},
    }


def partitioned_gpu(driver_name: str, node_name: str, index: int) -> ProfileDevices:
    """One physical GPU as the whole device plus its partitions, and its counter set."""
    whole_name = f"gpu-{index}"
    whole = _partition_spec(
        driver_name, node_name, index, whole_name, WHOLE_GPU_PROFILE, GPU_SLICES, GPU_MEMORY
    )
    whole["attributes"]["partition"] = {"bool": False}
    parent_uuid = whole["attributes"]["uuid"]["string"]
    devices = [Device(spec=whole)]
    for shape in PARTITION_SHAPES:
        for k in range(shape.count):
            name = f"{whole_name}-{shape.short}-{k}"
            spec = _partition_spec(
                driver_name, node_name, index, name, shape.profile, shape.slices, shape.memory
            )
            spec["attributes"]["uuid"] = {
                "string": f"MIG-{stable_uuid(driver_name, node_name, name)}"
            }
            spec["attributes"]["partition"] = {"bool": True}
            spec["attributes"]["parentUUID"] = {"string": parent_uuid}
            devices.append(Device(spec=spec))
    return ProfileDevices(tuple(devices), (gpu_counter_set(index),))


def _partition_spec(
    driver_name: str, node_name: str, index: int, name: str, profile: str, slices: int, memory: str
) -> JSON:
    attributes = _gpu_attributes(driver_name, node_name, name, index)
    attributes["profile"] = {"string": profile}
    return {
        "name": name,
        "attributes": attributes,
        "capacity": {"memory": {"value": memory}, "slices": {"value": str(slices)}},
        "consumesCounters": [
            {
                "counterSet": counter_set_name(index),
                "counters": {"memory": {"value": memory}, "slices": {"value": str(slices)}},
            }
        ],
    }


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


def _copy(policy: JSON) -> JSON:
    return {"default": policy["default"], "validRange": dict(policy["validRange"])}


ProfileBuilder = Callable[[str, str, int], ProfileDevices]


def _single(make: Callable[[str, str, int], Device]) -> ProfileBuilder:
    return lambda driver, node, index: ProfileDevices((make(driver, node, index),))


# Profile name -> what one device index of it adds.
PROFILES: dict[str, ProfileBuilder] = {
    "gpu": _single(gpu_device),
    "gpu-shared": _single(shared_gpu_device),
    "gpu-partitioned": partitioned_gpu,
    "nic": _single(nic_device),
}
GPU_PROFILES = ("gpu", "gpu-shared", "gpu-partitioned")


INVENTORY_SUFFIXES = (".yaml", ".yml", ".json")


def looks_like_path(profile: str) -> bool:
    """True when a `--device-profile` value names an inventory file rather than profiles:
    it has a `/` or ends in .yaml, .yml or .json. Anything else is read as profile names,
    so a typo (`tpu`) is an unknown profile, not a file that cannot be read."""
    value = profile.strip()
    return "/" in value or value.endswith(INVENTORY_SUFFIXES)


def parse_profiles(profiles: str) -> list[str]:
    """The profile names of a `--device-profile` list, checked; ValueError names the
    problem (unknown name, repeated name, two GPU profiles)."""
    names = [p.strip() for p in profiles.split(",")]
    for name in names:
        if name not in PROFILES:
            known = ", ".join(sorted(PROFILES))
            raise ValueError(f"unknown device profile {name!r} (known: {known})")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"device profile {repeated[0]!r} is listed twice in {profiles!r}")
    gpus = [n for n in names if n in GPU_PROFILES]
    if len(gpus) > 1:
        raise ValueError(
            f"device profiles {' and '.join(gpus)} both name their GPUs gpu-<i>; use one"
        )
    return names


def profile_inventory(profiles: str, driver_name: str, node_name: str, count: int) -> Inventory:
    """`count` physical devices of each built-in profile in `profiles` (e.g. "gpu",
    "gpu-shared,nic", "gpu-partitioned,nic"), in one pool named after the node."""
    devices: list[Device] = []
    counters: list[JSON] = []
    for name in parse_profiles(profiles):
        for index in range(count):
            made = PROFILES[name](driver_name, node_name, index)
            devices.extend(made.devices)
            counters.extend(made.shared_counters)
    pool = Pool(name=node_name, devices=tuple(devices), shared_counters=tuple(counters))
    return Inventory(pools=(pool,))
