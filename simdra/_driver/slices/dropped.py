"""Detect fields the API server silently dropped from a written slice (pure).

A server with a feature gate off accepts a slice but drops the fields that gate guards
(api-facts 4.9). Comparing what we sent with what it stored tells which fields went missing;
the field names tell which gates are probably off. Paths are generalised (`[*]` for
devices, list entries and map keys) so that 10,000 devices losing the same field give
one line, not 10,000.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simdra._driver.slices.semantic import normalize, normalize_device, with_taint_times

# Maps whose keys are names chosen by the driver, not API field names.
_NAME_MAPS = frozenset(
    {"attributes", "capacity", "counters", "nodeAllocatableResourceMappings",
     "nodeAllocatableResources"}
)

# Generalised path (regex) -> feature gate that guards it (api-facts 4.2, 4.4, 4.5, 4.9).
_GATES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), gate)
    for pattern, gate in (
        (r"^spec\.devices\[\*\]\.taints", "DRADeviceTaints"),
        (r"^spec\.(sharedCounters|perDeviceNodeSelection)", "DRAPartitionableDevices"),
        (r"^spec\.devices\[\*\]\.(consumesCounters|nodeName|nodeSelector|allNodes)",
         "DRAPartitionableDevices"),
        (r"^spec\.devices\[\*\]\.(bindsToNode|bindingConditions|bindingFailureConditions)",
         "DRADeviceBindingConditions"),
        (r"^spec\.devices\[\*\]\.(allowMultipleAllocations|capacity\[\*\]\.requestPolicy)",
         "DRAConsumableCapacity"),
        (r"^spec\.devices\[\*\]\.attributes\[\*\]\.(ints|bools|strings|versions)",
         "DRAListTypeAttributes"),
        (r"^spec\.devices\[\*\]\.nodeAllocatable", "DRANodeAllocatableResources"),
        (r"^spec\.partitionTypeAttribute", "DRAPartitionableDevicesType"),
        (r"^spec\.skipNodeOperations", "DRAOptionalNodeOperations"),
        (r"^spec\.devices\[\*\]\.consumesCounters\[\*\]\.compatibilityGroups",
         "DRADeviceCompatibilityGroups"),
    )
)


@dataclass(frozen=True)
class DroppedFields:
    """The server stored a slice without some fields we sent."""

    pool: str
    slice_name: str
    fields: tuple[str, ...]  # generalised paths, e.g. spec.devices[*].allowMultipleAllocations
    gates: tuple[str, ...]  # likely disabled feature gates ("unknown" when none fits)

    def __str__(self) -> str:
        return (
            f'pool "{self.pool}", slice "{self.slice_name}": the API server dropped '
            f"{', '.join(self.fields)}; probably disabled feature gates: "
            f"{', '.join(self.gates)}"
        )


def find_dropped(sent_spec: Mapping[str, Any], stored_spec: Mapping[str, Any]) -> list[str]:
    """Generalised paths of fields present in `sent_spec` but changed or absent when stored.

    Server-side normalisation (quantity format, empty lists, `timeAdded` it fills in)
    does not count.
    """
    stored_devices = stored_spec.get("devices") or []
    sent_devices = with_taint_times(sent_spec.get("devices") or [], stored_devices)
    sent = normalize({k: v for k, v in sent_spec.items() if k != "devices"})
    stored = normalize({k: v for k, v in stored_spec.items() if k != "devices"})
    paths: set[str] = set()
    _walk(sent, stored, "spec", paths)
    stored_by_name = {d.get("name"): d for d in stored_devices}
    for device in sent_devices:
        have = stored_by_name.get(device.get("name"))
        if have is None:
            paths.add("spec.devices[*]")
        elif have != device:  # most devices come back byte for byte: skip normalising them
            _walk(normalize_device(device), normalize_device(have), "spec.devices[*]", paths)
    return sorted(paths)


def likely_gates(paths: list[str]) -> tuple[str, ...]:
    """Feature gates that probably explain the dropped `paths`."""
    gates = {gate for path in paths for pattern, gate in _GATES if pattern.match(path)}
    return tuple(sorted(gates)) or ("unknown",)


def _walk(sent: Any, stored: Any, path: str, out: set[str]) -> None:
    if isinstance(sent, dict) and isinstance(stored, dict):
        name_map = path.rsplit(".", 1)[-1] in _NAME_MAPS
        for key, value in sent.items():
            child = f"{path}[*]" if name_map else f"{path}.{key}"
            if key not in stored:
                _missing(value, child, out)
            else:
                _walk(value, stored[key], child, out)
    elif isinstance(sent, list) and isinstance(stored, list):
        for i, value in enumerate(sent):
            if i >= len(stored):
                out.add(f"{path}[*]")
            else:
                _walk(value, stored[i], f"{path}[*]", out)
    elif sent != stored:
        out.add(path)


def _missing(value: Any, path: str, out: set[str]) -> None:
    """Record a missing value; for a whole attribute, name its value kind (list or not)."""
    if path.endswith(".attributes[*]") and isinstance(value, dict):
        out.update(f"{path}.{member}" for member in value)
    else:
        out.add(path)


_EMPTIED_ATTRIBUTE = "exactly one value must be specified"


def refusal_hint(message: str) -> str:
    """Why a server may refuse a slice that passed our own validation, for its log line.

    A server with DRAListTypeAttributes off drops list values (`ints`, ...) and then finds
    the attribute without a value; our validation never lets an empty attribute through,
    so this refusal means a list was sent. Empty when nothing fits.
    """
    if _EMPTIED_ATTRIBUTE in message:
        return ("; a list-valued attribute needs the DRAListTypeAttributes feature gate: "
                "turn it on or run without --list-attributes")
    return ""
