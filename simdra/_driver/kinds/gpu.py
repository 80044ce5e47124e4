"""simdra's GPU kind: simulated GPUs in three fake profiles, and the GpuConfig they take.

Profiles (`--device-profile`), one per inventory (all name their GPUs `gpu-<i>`):

* `gpu`: exclusive GPUs (`gpu-<i>`), one claim at a time, `memory` 80Gi;
* `gpu-shared`: multi-allocatable GPUs (`allowMultipleAllocations`) whose consumable
  `memory` (80Gi; default 8Gi, min 1Gi, step 1Gi) and `compute` (100 units, i.e. percent
  of the GPU; default = min 10, step 10) many claims share;
* `gpu-fractional`: multi-allocatable GPUs whose `compute` is one whole GPU ("1") handed
  out in milli-unit shares (default = min 100m, step 50m, max 1; DRAFractionalCapacityRange,
  beta in 1.37), next to `memory` as in `gpu-shared`;
* `gpu-partitioned`: MIG-like GPUs. Each physical GPU has a counter set
  `gpu-<i>-counters` (`memory` 80Gi, `slices` 7) published in the pool's counter slice
  (api-facts 4.2: never in a slice with devices). The whole GPU `gpu-<i>` consumes all of
  it; its partitions `gpu-<i>-1g-<k>` (7 x 1g.10gb), `gpu-<i>-2g-<k>` (3 x 2g.20gb) and
  `gpu-<i>-3g-<k>` (2 x 3g.40gb) consume parts, so the scheduler can hand out e.g. a 3g
  and two 2g partitions of one GPU, but never the whole GPU next to any partition of it.
  The `profile` attribute is the pool's partition type (`partitionTypeAttribute`,
  Kubernetes 1.37).

Attributes are derived from the node and driver name, so a node keeps the same device
identities across restarts while two nodes never share a UUID. Like every kind, this one
uses only the public API (`simdra`).
"""

from __future__ import annotations

from dataclasses import dataclass

from simdra._driver.api import (
    JSON,
    NUMA_NODE,
    Device,
    DeviceKind,
    FakeProfile,
    ProfileContext,
    ProfileDevices,
    simulated_topology,
    stable_uuid,
)
from simdra._driver.kinds.config_handlers import GpuConfigHandler

GPU_MODEL = "Simulated GPU S1"
GPU_MEMORY = "80Gi"
GPU_DRIVER_VERSION = "1.0.0"

# Shared GPUs: what one share consumes when its request names no amount, and the grid
# requests are rounded up to (api-facts 4.5, 4.8: default >= min, aligned to step).
GPU_COMPUTE = "100"
GPU_MEMORY_POLICY: JSON = {"default": "8Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
GPU_COMPUTE_POLICY: JSON = {"default": "10", "validRange": {"min": "10", "step": "10"}}

# Fractional GPUs: compute as a fraction of one GPU, in milli-units (api-facts 4.8; 1.37).
GPU_FRACTION = "1"
GPU_FRACTION_POLICY: JSON = {"default": "100m",
                             "validRange": {"min": "100m", "max": "1", "step": "50m"}}

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


def _gpu_attributes(driver_name: str, node_name: str, name: str, index: int) -> JSON:
    return {
        "type": {"string": "gpu"},
        "uuid": {"string": f"GPU-{stable_uuid(driver_name, node_name, name)}"},
        "model": {"string": GPU_MODEL},
        "driverVersion": {"version": GPU_DRIVER_VERSION},
        "index": {"int": index},
        **simulated_topology(index),
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
    return _shared_gpu(driver_name, node_name, index, GPU_COMPUTE, GPU_COMPUTE_POLICY)


def fractional_gpu_device(driver_name: str, node_name: str, index: int) -> Device:
    """One simulated GPU shared in fractions: a share takes 100m to 1 of its `compute`
    in steps of 50m (a request of 120m consumes 150m), and memory as `gpu-shared`."""
    return _shared_gpu(driver_name, node_name, index, GPU_FRACTION, GPU_FRACTION_POLICY)


def _shared_gpu(driver_name: str, node_name: str, index: int, compute: str,
                compute_policy: JSON) -> Device:
    name = f"gpu-{index}"
    spec: JSON = {
        "name": name,
        "allowMultipleAllocations": True,
        "attributes": _gpu_attributes(driver_name, node_name, name, index),
        "capacity": {
            "memory": {"value": GPU_MEMORY, "requestPolicy": _copy(GPU_MEMORY_POLICY)},
            "compute": {"value": compute, "requestPolicy": _copy(compute_policy)},
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
    # Each device's `profile` names its partition type (all of one type consume alike).
    return ProfileDevices(tuple(devices), (gpu_counter_set(index),),
                          partition_type_attribute=f"{driver_name}/profile")


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


def _partitioned(context: ProfileContext, index: int) -> ProfileDevices:
    return partitioned_gpu(context.driver_name, context.node_name, index)


def _copy(policy: JSON) -> JSON:
    return {"default": policy["default"], "validRange": dict(policy["validRange"])}


class GpuKind(DeviceKind):
    """GPUs: exclusive, shared by memory and compute, or cut into partitions."""

    name = "gpu"
    env_attributes = {"uuid": "UUID", "profile": "PARTITION_PROFILE",
                      "parentUUID": "PARENT_UUID", NUMA_NODE: "NUMA_NODE"}
    config_handlers = (GpuConfigHandler(),)
    profiles = (
        FakeProfile("gpu", lambda c, i: gpu_device(c.driver_name, c.node_name, i),
                    "exclusive GPUs, memory 80Gi"),
        FakeProfile("gpu-shared", lambda c, i: shared_gpu_device(c.driver_name, c.node_name, i),
                    "GPUs whose memory and compute many claims share"),
        FakeProfile("gpu-fractional",
                    lambda c, i: fractional_gpu_device(c.driver_name, c.node_name, i),
                    "GPUs whose compute claims share in milli-unit fractions (100m steps "
                    "of 50m; Kubernetes 1.37)"),
        FakeProfile("gpu-partitioned", _partitioned, "MIG-like GPUs: the whole GPU or its "
                    "1g/2g/3g partitions, drawn from shared counters"),
    )
