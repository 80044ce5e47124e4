"""Feature gates: fields a real API server silently drops on write when their gate is off.

Facts 4.9. The server keeps a gated field on update when the stored object already uses
it (the API server's "ratcheting" of disabled fields), so only new uses are dropped.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from simdra._driver.testing.apiserver.validation.release import minor_of

JSON = dict[str, Any]

# Gates the stand-in models: on by default as in Kubernetes 1.37, and the alpha ones the
# e2e's servers turn on (tests/e2e/controlplane.py DRA_GATES), whose verdicts it matches.
# DRAFractionalCapacityRange (beta, on in 1.37) is modelled in validation only: the
# stand-in always takes the milli path that it opens.
DEFAULT_GATES: dict[str, bool] = {
    "DRAConsumableCapacity": True,
    "DRADeviceTaints": True,
    "DRAPartitionableDevices": True,
    "DRADeviceBindingConditions": True,
    "DRAResourceClaimDeviceStatus": True,
    "DRAAdminAccess": True,
    "DRAListTypeAttributes": True,
    "DRAFractionalCapacityRange": True,
    "DRANodeAllocatableResources": True,  # alpha (off) in a real 1.36 and 1.37
    "DRAOptionalNodeOperations": True,  # the 1.37 alphas, off in a real 1.37
    "DRADeviceCompatibilityGroups": True,
    "DRAPartitionableDevicesType": True,
}
# The minor release that introduced a gate (the older ones are in every release modelled).
_SINCE = {gate: 37 for gate in ("DRAOptionalNodeOperations", "DRADeviceCompatibilityGroups",
                                "DRAPartitionableDevicesType")}
# DRAListTypeAttributes: the list members of a DeviceAttribute. Off, the server drops them,
# and an attribute left without a value then fails validation (the slice is refused).
_LIST_MEMBERS = ("bools", "ints", "strings", "versions")

_DEVICE_FIELDS = {
    "DRAConsumableCapacity": ("allowMultipleAllocations",),
    "DRADeviceTaints": ("taints",),
    "DRAPartitionableDevices": ("consumesCounters", "nodeName", "nodeSelector", "allNodes"),
    "DRADeviceBindingConditions": ("bindsToNode", "bindingConditions", "bindingFailureConditions"),
    "DRANodeAllocatableResources": ("nodeAllocatableResources", "nodeAllocatableResourceMappings"),
}
_SLICE_SPEC_FIELDS = {
    "DRAPartitionableDevices": ("sharedCounters", "perDeviceNodeSelection"),
    "DRAOptionalNodeOperations": ("skipNodeOperations",),
    "DRAPartitionableDevicesType": ("partitionTypeAttribute",),
}
_GROUPS = "DRADeviceCompatibilityGroups"  # consumesCounters[].compatibilityGroups


def _consumptions(device: Mapping[str, Any]) -> Iterator[JSON]:
    for entry in device.get("consumesCounters") or ():
        if isinstance(entry, dict):
            yield entry


def _devices(obj: Mapping[str, Any]) -> Iterator[JSON]:
    for device in (obj.get("spec") or {}).get("devices") or ():
        if isinstance(device, dict):
            yield device


def _slice_uses(obj: Mapping[str, Any], gate: str) -> bool:
    spec = obj.get("spec") or {}
    if any(spec.get(f) is not None for f in _SLICE_SPEC_FIELDS.get(gate, ())):
        return True
    for device in _devices(obj):
        if any(device.get(f) is not None for f in _DEVICE_FIELDS.get(gate, ())):
            return True
        if gate == "DRAListTypeAttributes" and any(
            isinstance(a, dict) and any(a.get(m) is not None for m in _LIST_MEMBERS)
            for a in (device.get("attributes") or {}).values()
        ):
            return True
        if gate == "DRAConsumableCapacity" and any(
            isinstance(c, dict) and "requestPolicy" in c
            for c in (device.get("capacity") or {}).values()
        ):
            return True
        if gate == _GROUPS and any(e.get("compatibilityGroups") for e in _consumptions(device)):
            return True
    return False


def _drop_slice_fields(obj: JSON, gate: str) -> None:
    spec = obj.get("spec") or {}
    for name in _SLICE_SPEC_FIELDS.get(gate, ()):
        spec.pop(name, None)
    for device in _devices(obj):
        for name in _DEVICE_FIELDS.get(gate, ()):
            device.pop(name, None)
        if gate == "DRAListTypeAttributes":
            for attribute in (device.get("attributes") or {}).values():
                for member in _LIST_MEMBERS if isinstance(attribute, dict) else ():
                    attribute.pop(member, None)
        if gate == "DRAConsumableCapacity":
            for entry in (device.get("capacity") or {}).values():
                if isinstance(entry, dict):
                    entry.pop("requestPolicy", None)
        if gate == _GROUPS:
            for consumption in _consumptions(device):
                consumption.pop("compatibilityGroups", None)


def _claim_results(obj: Mapping[str, Any]) -> list[JSON]:
    allocation = (obj.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [r for r in results if isinstance(r, dict)]


def _claim_requests(obj: Mapping[str, Any]) -> Iterator[JSON]:
    for request in ((obj.get("spec") or {}).get("devices") or {}).get("requests") or []:
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            yield request["exactly"]
        yield from (s for s in request.get("firstAvailable") or [] if isinstance(s, dict))


def _status_devices(obj: Mapping[str, Any]) -> list[JSON]:
    return [d for d in (obj.get("status") or {}).get("devices") or [] if isinstance(d, dict)]


def _claim_uses(obj: Mapping[str, Any], gate: str) -> bool:
    if gate == "DRAConsumableCapacity":
        return (
            any("shareID" in r or "consumedCapacity" in r for r in _claim_results(obj))
            or any("shareID" in d for d in _status_devices(obj))
            or any("capacity" in r for r in _claim_requests(obj))
        )
    if gate == "DRAResourceClaimDeviceStatus":
        return "devices" in (obj.get("status") or {})
    if gate == "DRAAdminAccess":
        return any("adminAccess" in r for r in _claim_requests(obj)) or any(
            "adminAccess" in r for r in _claim_results(obj)
        )
    if gate == "DRAOptionalNodeOperations":
        return any(r.get("skipNodeOperations") for r in _claim_results(obj))
    return False


def _drop_claim_fields(obj: JSON, gate: str) -> None:
    if gate == "DRAConsumableCapacity":
        for result in _claim_results(obj):
            result.pop("shareID", None)
            result.pop("consumedCapacity", None)
        for device in _status_devices(obj):
            device.pop("shareID", None)
        for request in _claim_requests(obj):
            request.pop("capacity", None)
    elif gate == "DRAResourceClaimDeviceStatus":
        (obj.get("status") or {}).pop("devices", None)
    elif gate == "DRAAdminAccess":
        for entry in [*_claim_requests(obj), *_claim_results(obj)]:
            entry.pop("adminAccess", None)
    elif gate == "DRAOptionalNodeOperations":
        for result in _claim_results(obj):
            result.pop("skipNodeOperations", None)


_RULES: dict[str, tuple[Callable[[Mapping[str, Any], str], bool], Callable[[JSON, str], None]]] = {
    "resourceslices": (_slice_uses, _drop_slice_fields),
    "resourceclaims": (_claim_uses, _drop_claim_fields),
}


def drop_disabled_fields(
    resource: str, new: JSON, old: Mapping[str, Any] | None, gates: Mapping[str, bool],
    release: str = "1.37",
) -> JSON:
    """`new` without the fields of disabled gates that `old` does not already use. A
    release older than a gate does not know its fields at all: the schema refuses them."""
    rules = _RULES.get(resource)
    minor = minor_of(release)
    disabled = [g for g, on in gates.items()
                if not on and _SINCE.get(g, 0) <= minor]
    if rules is None or not disabled:
        return new
    uses, drop = rules
    if not gates.get("DRAResourceClaimDeviceStatus", True):
        # Binding conditions need both gates (they are reported in claim status.devices).
        disabled.append("DRADeviceBindingConditions")
    wanted = [
        g
        for g in dict.fromkeys(disabled)
        if uses(new, g) and not (old is not None and uses(old, g))
    ]
    if not wanted:
        return new
    new = copy.deepcopy(new)
    for gate in wanted:
        drop(new, gate)
    return new
