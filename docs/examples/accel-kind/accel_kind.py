"""accel_kind: a partitionable inference accelerator, as a simdra DeviceKind.

Profile `accel`: each physical accelerator `i` has 4 cores and 32Gi of memory, published
once in the pool as the counter set `accel-<i>-counters`. A claim gets the whole
accelerator `accel-<i>`, one of its halves `accel-<i>-half-<k>` or one of its quarters
`accel-<i>-quarter-<k>`: each is a device that consumes its share of those counters, so
the scheduler never hands out more of one accelerator than it has.

Profile `accel-shared`: the whole accelerator, which many claims share (its `streams`
have a request policy, its `memory` has none).

Register it with `simdra run --kind accel_kind:AccelKind --device-profile accel`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import simdra
from simdra import JSON, Device, DeviceKind, FakeProfile, ProfileContext, ProfileDevices

CORES = 4
MEMORY_GI = 32
# shape -> how many of it one accelerator holds; a part has CORES / n and MEMORY_GI / n.
SHAPES = {"whole": 1, "half": 2, "quarter": 4}


def counter_set(index: int) -> JSON:
    """What accelerator `index` has, once: the counters its whole and its parts draw on."""
    return {"name": f"accel-{index}-counters", "counters": {
        "cores": {"value": str(CORES)}, "memory": {"value": f"{MEMORY_GI}Gi"}}}


def part(context: ProfileContext, index: int, shape: str, k: int) -> Device:
    """Part `k` of a shape: an exclusive device that consumes its cores and memory."""
    n = SHAPES[shape]
    name = f"accel-{index}" if n == 1 else f"accel-{index}-{shape}-{k}"
    amounts = {"cores": {"value": str(CORES // n)}, "memory": {"value": f"{MEMORY_GI // n}Gi"}}
    return Device(spec={
        "name": name,
        "attributes": {
            "type": {"string": "accel"},
            "shape": {"string": shape},  # the partition type: one shape, one cost
            "partition": {"bool": n > 1},  # true: the plugin sets PARTITION=true
            "uuid": {"string": simdra.stable_uuid(context.driver_name, context.node_name,
                                                  name)},
        },
        "capacity": amounts,
        "consumesCounters": [{"counterSet": f"accel-{index}-counters", "counters": amounts}],
    })


def accelerator(context: ProfileContext, index: int) -> ProfileDevices:
    """Accelerator `index`: the whole, its halves and its quarters, and their counters."""
    devices = tuple(part(context, index, shape, k)
                    for shape, n in SHAPES.items() for k in range(n))
    return ProfileDevices(devices=devices, shared_counters=(counter_set(index),),
                          partition_type_attribute=f"{context.driver_name}/shape")


def shared_accelerator(context: ProfileContext, index: int) -> Device:
    """Accelerator `index` whole, shared: 16 `streams` handed out one by default, and
    `memory` without a request policy, so a share that does not ask for memory gets it all."""
    return Device(spec={
        "name": f"accel-{index}",
        "allowMultipleAllocations": True,
        "attributes": {"type": {"string": "accel"}, "shape": {"string": "whole"}},
        "capacity": {
            "streams": {"value": "16", "requestPolicy": {
                "default": "1", "validRange": {"min": "1", "step": "1"}}},
            "memory": {"value": f"{MEMORY_GI}Gi"},
        },
    })


class AccelKind(DeviceKind):
    """Inference accelerators: whole, in halves or in quarters drawn from shared counters."""

    name = "accel"
    env_attributes: ClassVar[Mapping[str, str]] = {"shape": "SHAPE", "uuid": "UUID"}
    profiles = (
        FakeProfile("accel", build=accelerator,
                    description="accelerators of 4 cores: whole, halves or quarters"),
        FakeProfile("accel-shared", build=shared_accelerator,
                    description="whole accelerators whose streams many claims share"),
    )
