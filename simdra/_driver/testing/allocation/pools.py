"""Published ResourceSlices -> the pools and devices an allocation may use.

Per (driver, pool) only slices with the highest generation count, and a pool is used
only when it is complete (as many slices at that generation as `resourceSliceCount`
says), like the scheduler (api-facts 4.3). Devices keep their published JSON.

Node selection supported: slice `nodeName`, slice `allNodes`, and with
`perDeviceNodeSelection` the device's own `nodeName` / `allNodes`. Slices or devices
selected by a `nodeSelector` are ignored: evaluating node labels is out of scope for a
test allocator.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from simdra._driver.core.quantity import parse_quantity
from simdra._driver.testing.allocation.cel import DeviceView

DeviceKey = tuple[str, str, str]  # (driver, pool, device)
CounterSets = dict[str, dict[str, Fraction]]  # counter set -> counter -> value


@dataclass(frozen=True, eq=False)
class Candidate:
    """One published device an allocation may pick."""

    driver: str
    pool: str
    spec: Mapping[str, Any]
    node_name: str | None  # the node it is local to; None = usable from every node
    # Its slice's spec.skipNodeOperations, which the allocation result copies (1.37).
    skip_node_operations: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The device name."""
        return str(self.spec["name"])

    @property
    def key(self) -> DeviceKey:
        """(driver, pool, device): the identity allocation results use."""
        return (self.driver, self.pool, self.name)

    @property
    def shared(self) -> bool:
        """True for a multi-allocatable device (consumable capacity)."""
        return bool(self.spec.get("allowMultipleAllocations"))

    @cached_property
    def view(self) -> DeviceView:
        """What CEL selectors see of this device."""
        return DeviceView.of(self.driver, self.spec)

    def capacity_name(self, name: str) -> str | None:
        """`name` when the device publishes a capacity of exactly that name, else None.

        Exact, like the scheduler (k8s.io/dynamic-resource-allocation looks capacity
        names up as written): "bandwidth" and "<driver>/bandwidth" are different names,
        unlike attribute names in CEL.
        """
        return name if name in (self.spec.get("capacity") or {}) else None

    def attribute(self, qualified: str) -> Mapping[str, Any] | None:
        """The attribute entry for a fully qualified name (driver domain may be implicit)."""
        attributes: Mapping[str, Mapping[str, Any]] = self.spec.get("attributes") or {}
        if qualified in attributes:
            return attributes[qualified]
        domain, _, ident = qualified.partition("/")
        return attributes.get(ident) if domain == self.driver else None


@dataclass
class Pool:
    """One (driver, pool) at its highest generation."""

    driver: str
    name: str
    generation: int
    expected_slices: int
    slices: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when every slice of the current generation has been seen."""
        return len(self.slices) == self.expected_slices

    @property
    def usable(self) -> bool:
        """Complete and valid: its devices may be allocated."""
        return self.complete and self.invalid is None

    @cached_property
    def invalid(self) -> str | None:
        """Why the scheduler would use no device of this pool, or None. Like
        k8s.io/dynamic-resource-allocation: a device name twice, a counter set name
        twice, or a device consuming a counter set or counter the pool lacks."""
        names: set[str] = set()
        sets: dict[str, set[str]] = {}
        for item in self.slices:
            for counter_set in item["spec"].get("sharedCounters") or []:
                if counter_set["name"] in sets:
                    return f"duplicate counter set name {counter_set['name']}"
                sets[counter_set["name"]] = set(counter_set.get("counters") or {})
        for item in self.slices:
            for device in item["spec"].get("devices") or []:
                if device["name"] in names:
                    return f"duplicate device name {device['name']}"
                names.add(device["name"])
                for entry in device.get("consumesCounters") or []:
                    counters = sets.get(entry.get("counterSet", ""))
                    if counters is None:
                        return f"counter set {entry.get('counterSet')} not found"
                    missing = sorted(set(entry.get("counters") or {}) - counters)
                    if missing:
                        where = entry["counterSet"]
                        return f"counter {missing[0]} not found in counter set {where}"
        return None

    def serves(self, node: str | None) -> bool:
        """True when some slice of the pool publishes devices for `node` (or all nodes)."""
        return any(s["spec"].get("allNodes") or s["spec"].get("perDeviceNodeSelection")
                   or (node is not None and s["spec"].get("nodeName") == node)
                   for s in self.slices)

    @cached_property
    def counter_sets(self) -> CounterSets:
        """Shared counters of the pool: counter set -> counter -> value."""
        sets: CounterSets = {}
        for item in self.slices:
            for counter_set in item["spec"].get("sharedCounters") or []:
                counters = sets.setdefault(counter_set["name"], {})
                for name, counter in (counter_set.get("counters") or {}).items():
                    counters[name] = parse_quantity(counter["value"])
        return sets

    @cached_property
    def candidates(self) -> list[Candidate]:
        """All devices of the pool in a stable order (slice name, then position)."""
        found: list[Candidate] = []
        for item in sorted(self.slices, key=lambda s: s.get("metadata", {}).get("name", "")):
            spec = item["spec"]
            for device in spec.get("devices") or []:
                placed, node = _placement(spec, device)
                if placed:
                    skip = tuple(spec.get("skipNodeOperations") or ())
                    found.append(Candidate(self.driver, self.name, device, node, skip))
        return found


def gather_pools(slices: Iterable[Mapping[str, Any]]) -> list[Pool]:
    """Group slices into pools, keeping only each pool's highest generation."""
    grouped: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for item in slices:
        spec = item["spec"]
        grouped[(spec["driver"], spec["pool"]["name"])].append(item)
    pools = []
    for (driver, name), members in sorted(grouped.items()):
        generation = max(int(s["spec"]["pool"].get("generation", 0)) for s in members)
        current = [s for s in members if int(s["spec"]["pool"].get("generation", 0)) == generation]
        expected = int(current[0]["spec"]["pool"].get("resourceSliceCount", 1))
        pools.append(Pool(driver, name, generation, expected, current))
    return pools


def node_names(pools: Iterable[Pool]) -> list[str]:
    """Every node that has node-local devices in a usable pool, sorted."""
    return sorted({c.node_name for p in pools if p.usable for c in p.candidates if c.node_name})


def candidates_for_node(pools: Iterable[Pool], node: str | None) -> list[Candidate]:
    """Devices of usable pools usable from `node` (None: only devices for all nodes)."""
    return [
        c
        for p in pools
        if p.usable
        for c in p.candidates
        if c.node_name is None or c.node_name == node
    ]


def unusable_pools(pools: Iterable[Pool], node: str | None) -> list[str]:
    """Why each pool serving `node` is unusable (incomplete or invalid): a request for
    all devices fails there, as "all" cannot be known (the scheduler errors out)."""
    found = []
    for pool in pools:
        if pool.serves(node) and not pool.usable:
            why = pool.invalid or "is currently being updated"
            found.append(f"resource pool {pool.driver}/{pool.name} {why}")
    return found


def _placement(spec: Mapping[str, Any], device: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(usable, node): where a device may be used according to its slice."""
    source = device if spec.get("perDeviceNodeSelection") else spec
    if source.get("nodeName"):
        return True, str(source["nodeName"])
    if source.get("allNodes"):
        return True, None
    return False, None
