"""A device as the API server of one release takes it: the node-allocatable mappings
(KEP-5517) under the name and in the shape that release knows (pure).

1.37 calls the field `nodeAllocatableResources` (`mapping` with `capacityKey` and
`capacityMultiplier`, or `deviceMultiplier`; `overhead`). 1.36 called it
`nodeAllocatableResourceMappings` (`capacityKey` and `allocationMultiplier`, which with no
key multiplies the device count; no overheads); 1.37 tombstoned that name. 1.34 and 1.35
know neither. An inventory states the 1.37 form; an older server gets what it can
express, and nothing it would refuse as unknown: an overhead is left out on 1.36, every
mapping before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CURRENT = "nodeAllocatableResources"
MAPPINGS_1_36 = "nodeAllocatableResourceMappings"


def device_for_release(spec: Mapping[str, Any], field: str | None) -> Mapping[str, Any]:
    """`spec` with its node-allocatable mappings under `field` (CURRENT, MAPPINGS_1_36,
    or None where the release has no such field); unchanged when it has none or `field`
    is CURRENT."""
    resources = spec.get(CURRENT)
    if not resources or field == CURRENT:
        return spec
    out = {k: v for k, v in spec.items() if k != CURRENT}
    if field == MAPPINGS_1_36 and isinstance(resources, Mapping):
        mappings = {name: mapping for name, entry in resources.items()
                    if (mapping := mapping_1_36(entry)) is not None}
        if mappings:
            out[MAPPINGS_1_36] = mappings
    return out


def mapping_1_36(entry: Any) -> dict[str, Any] | None:
    """The 1.36 NodeAllocatableResourceMapping of a 1.37 NodeAllocatableResource, or None
    when it has no mapping (an overhead alone has no 1.36 form).

    Example::

        mapping_1_36({"mapping": {"capacityKey": "cpus", "capacityMultiplier": "1"}})
        # {"capacityKey": "cpus", "allocationMultiplier": "1"}
    """
    mapping = entry.get("mapping") if isinstance(entry, Mapping) else None
    if not isinstance(mapping, Mapping):
        return None
    if mapping.get("capacityKey") is not None:
        out = {"capacityKey": mapping["capacityKey"]}
        if mapping.get("capacityMultiplier") is not None:
            out["allocationMultiplier"] = mapping["capacityMultiplier"]
        return out
    if mapping.get("deviceMultiplier") is not None:
        return {"allocationMultiplier": mapping["deviceMultiplier"]}
    return None
