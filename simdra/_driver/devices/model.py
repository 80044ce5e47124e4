"""The node's inventory: pools of devices, as this node will publish and prepare them.

A device's published form is kept exactly as resource.k8s.io/v1 JSON (`spec`, one entry
of ResourceSlice `spec.devices[]`), so what an inventory file says is what gets
published. What only the container runtime needs (device nodes, env) lives beside it in
`container_edits` and never reaches the API server.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Iterator, KeysView, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from simdra._driver.core.quantity import parse_quantity

JSON = dict[str, Any]
"""A JSON object as `json.loads` gives it: device specs, counter sets, CDI edits."""


@dataclass(frozen=True)
class Device:
    """One device: its v1 JSON form plus local CDI container edits.

    Example::

        Device(spec={"name": "crypto-0",              # a DNS label, unique in its pool
                     "attributes": {"type": {"string": "crypto"}},
                     "capacity": {"sessions": {"value": "64"}}},
               container_edits={"deviceNodes": [{"path": "/dev/crypto0"}]})

    `skip_node_operations`: the kubelet calls the device needs none of (see
    `DeviceKind`), published on its slice as `spec.skipNodeOperations`.
    """

    spec: Mapping[str, Any]
    container_edits: Mapping[str, Any] = field(default_factory=dict)
    # The node operations (kubelet gRPC calls) this device needs none of, as
    # ResourceSlice `spec.skipNodeOperations` names them ("*", or "NodePrepareResources"
    # with "NodeUnprepareResources"; KEP-5945, gate DRAOptionalNodeOperations, 1.37).
    # Published on the slice, so devices that differ here never share a slice.
    skip_node_operations: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The device name (a DNS label, unique in its pool)."""
        return str(self.spec["name"])

    @property
    def allows_multiple_allocations(self) -> bool:
        """True when several claims (shares) may use this device at once."""
        return bool(self.spec.get("allowMultipleAllocations"))

    def capacity(self) -> dict[str, Fraction]:
        """Capacity name -> exact value."""
        return {
            name: parse_quantity(entry["value"])
            for name, entry in (self.spec.get("capacity") or {}).items()
        }

    def attribute(self, name: str) -> Any:
        """The value of attribute `name` (whatever member is set), or None."""
        entry = (self.spec.get("attributes") or {}).get(name)
        if not entry:
            return None
        return next(iter(entry.values()))

    def attribute_values(self, name: str) -> list[Any]:
        """Every value of attribute `name`: the items of a list attribute
        (DRAListTypeAttributes), a scalar as a list of one, [] when unset.

        Example::

            device.attribute_values(NUMA_NODE)  # [2, 3] near two nodes, [1] near one
        """
        value = self.attribute(name)
        if value is None:
            return []
        return list(value) if isinstance(value, list) else [value]

    def to_json(self) -> JSON:
        """A deep copy of the published form, safe for the caller to change."""
        return copy.deepcopy(dict(self.spec))


@dataclass(frozen=True)
class Pool:
    """A pool of devices on this node; published as one or more ResourceSlices.

    Example::

        Pool(name=context.node_name, devices=(Device(spec={"name": "crypto-0"}),))
    """

    name: str
    devices: tuple[Device, ...]
    shared_counters: tuple[Mapping[str, Any], ...] = ()
    # The string attribute (fully qualified, e.g. "dra.example.com/profile") whose value
    # names each partition's type: ResourceSlice `spec.partitionTypeAttribute` on the
    # slices of devices that consume counters (gate DRAPartitionableDevicesType, 1.37).
    # Devices sharing a value must consume the same counters (`validate_pool` checks).
    partition_type_attribute: str | None = None

    @cached_property
    def _by_name(self) -> dict[str, Device]:
        return {d.name: d for d in self.devices}

    def device(self, name: str) -> Device | None:
        """The device called `name`, or None."""
        return self._by_name.get(name)

    def device_names(self) -> KeysView[str]:
        """The names of its devices (a view of the index `device` uses, not a copy)."""
        return self._by_name.keys()


@dataclass(frozen=True)
class Inventory:
    """Everything this node offers: the single truth the publisher and preparer read.

    Example (what a backend's `discover()` returns)::

        inventory = Inventory(pools=(Pool(name="node-1", devices=devices),))
        inventory.device("node-1", "crypto-0")  # the Device, or None
    """

    pools: tuple[Pool, ...]

    @cached_property
    def _by_name(self) -> dict[str, Pool]:
        return {p.name: p for p in self.pools}

    def pool(self, name: str) -> Pool | None:
        """The pool called `name`, or None."""
        return self._by_name.get(name)

    def device(self, pool: str, name: str) -> Device | None:
        """The device `name` of pool `pool`, or None when either is unknown."""
        found = self.pool(pool)
        return found.device(name) if found else None

    def devices(self) -> Iterator[tuple[Pool, Device]]:
        """Every (pool, device) pair, pools in order."""
        for pool in self.pools:
            for device in pool.devices:
                yield pool, device


def compact(inventory: Inventory) -> Inventory:
    """The same inventory holding equal parts of device specs once.

    Devices of one kind repeat most of their spec (capacity with its request policy,
    the `type` attribute): on a node with 10,000 NICs that is most of the inventory's
    memory. Equal attribute values and equal other nested fields (`capacity`,
    `consumesCounters`, ...; compared by `repr`, so the same keys in the same order and
    values of the same types) become one shared object. Specs are never changed in place
    (`Device.to_json` hands out copies), so sharing is invisible to readers.
    """
    memo: dict[str, Any] = {}
    return Inventory(pools=tuple(
        dataclasses.replace(
            pool, devices=tuple(dataclasses.replace(d, spec=_compact_spec(d.spec, memo))
                                for d in pool.devices))
        for pool in inventory.pools))


def _compact_spec(spec: Mapping[str, Any], memo: dict[str, Any]) -> JSON:
    out: JSON = {}
    for key, value in spec.items():
        if key == "attributes" and isinstance(value, Mapping):
            value = {sys.intern(name): memo.setdefault(repr(v), v) for name, v in value.items()}
        elif isinstance(value, (Mapping, list)):
            value = memo.setdefault(repr(value), value)
        out[sys.intern(key)] = value
    return out
