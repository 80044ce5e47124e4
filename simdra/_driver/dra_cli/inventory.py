"""The snapshot indexed for the views: every published device (pools at their highest
generation), who holds each (from the claims' allocations and reservations), the
counters of each pool and what allocated devices consume of them, and device health as
pods report it.

Health comes from `pod.status.containerStatuses[].allocatedResourcesStatus`: an entry
`claim:<pod claim>/<request>` lists resources (CDI device IDs, driver-specific) with a
health; it is mapped to the devices of that claim's request: the only one, or those
whose name ends a resource ID; else the request's devices all get its worst health.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from simdra._driver.core.quantity import QuantityError, parse_quantity
from simdra._driver.core.taint_rules import with_rule_taints
from simdra._driver.dra_cli.gather import Snapshot

JSON = dict[str, Any]
DeviceKey = tuple[str, str, str]  # (driver, pool, device)
PoolKey = tuple[str, str]  # (driver, pool)
Counters = dict[str, dict[str, Fraction]]  # counter set -> counter -> amount
ALL_NODES = "*"
BY_SELECTOR = "(node selector)"
HEALTH_ORDER = {"Unhealthy": 3, "Unknown": 2, "Healthy": 1}


@dataclass(frozen=True)
class Device:
    """One published device of a pool's current generation."""

    node: str  # its node, ALL_NODES or BY_SELECTOR
    driver: str
    pool: str
    spec: Mapping[str, Any]
    slice: str
    pool_complete: bool

    @property
    def name(self) -> str:
        """The device's name in its pool."""
        return str(self.spec.get("name", ""))

    @property
    def key(self) -> DeviceKey:
        """(driver, pool, device), as allocation results name it."""
        return (self.driver, self.pool, self.name)

    @property
    def shared(self) -> bool:
        """Multi-allocatable (allocated in shares with consumed capacity)."""
        return bool(self.spec.get("allowMultipleAllocations"))


@dataclass(frozen=True)
class Holder:
    """One allocation result of one claim on a device."""

    claim: str  # namespace/name
    request: str
    share_id: str | None
    consumed: Mapping[str, Fraction]
    admin: bool
    pods: tuple[str, ...]  # namespace/name of the pods in the claim's reservedFor


@dataclass
class Inventory:
    """Devices, holders, counters and health, indexed by device and pool."""

    devices: list[Device] = field(default_factory=list)
    holders: dict[DeviceKey, list[Holder]] = field(default_factory=dict)
    counters: dict[PoolKey, Counters] = field(default_factory=dict)  # published totals
    counters_used: dict[PoolKey, Counters] = field(default_factory=dict)
    health: dict[DeviceKey, str] = field(default_factory=dict)
    incomplete: dict[PoolKey, str] = field(default_factory=dict)  # pool -> why


def build(snapshot: Snapshot) -> Inventory:
    """The inventory of a snapshot; a DeviceTaintRule's taint shows as the device's own."""
    inventory = Inventory()
    published = with_rule_taints(snapshot.slices, snapshot.taint_rules)
    for key, slices in _current_pools(published).items():
        _add_pool(inventory, key, slices)
    claims = {claim_name(c): c for c in snapshot.claims}
    for name, claim in claims.items():
        for holder_key, holder in _holders(name, claim):
            inventory.holders.setdefault(holder_key, []).append(holder)
    _count_counters(inventory)
    inventory.health = _health(snapshot.pods, claims)
    return inventory


def claim_name(claim: Mapping[str, Any]) -> str:
    """`namespace/name` of an object."""
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def quantity(value: Any) -> Fraction:
    """A quantity's value; 0 for one that does not parse (shown, never fatal)."""
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError):
        return Fraction(0)


def _current_pools(slices: Iterable[JSON]) -> dict[PoolKey, list[JSON]]:
    grouped: dict[PoolKey, list[JSON]] = defaultdict(list)
    for item in slices:
        spec = item.get("spec") or {}
        grouped[(str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))]\
            .append(item)
    current = {}
    for key, members in sorted(grouped.items()):
        top = max(_generation(s) for s in members)
        current[key] = [s for s in members if _generation(s) == top]
    return current


def _generation(item: Mapping[str, Any]) -> int:
    return int(((item.get("spec") or {}).get("pool") or {}).get("generation") or 0)


def _add_pool(inventory: Inventory, key: PoolKey, slices: list[JSON]) -> None:
    expected = int(((slices[0].get("spec") or {}).get("pool") or {})
                   .get("resourceSliceCount") or 1)
    complete = len(slices) == expected
    if not complete:
        inventory.incomplete[key] = f"{len(slices)} of {expected} slices published"
    totals: Counters = {}
    for item in sorted(slices, key=lambda s: (s.get("metadata") or {}).get("name", "")):
        spec = item.get("spec") or {}
        for counter_set in spec.get("sharedCounters") or []:
            totals[counter_set.get("name", "")] = {
                name: quantity((c or {}).get("value")) for name, c in
                (counter_set.get("counters") or {}).items()}
        slice_name = str((item.get("metadata") or {}).get("name", ""))
        for device in spec.get("devices") or []:
            inventory.devices.append(
                Device(_node(spec, device), key[0], key[1], device, slice_name, complete))
    inventory.counters[key] = totals


def _node(spec: Mapping[str, Any], device: Mapping[str, Any]) -> str:
    source = device if spec.get("perDeviceNodeSelection") else spec
    if source.get("nodeName"):
        return str(source["nodeName"])
    if source.get("allNodes"):
        return ALL_NODES
    return BY_SELECTOR


def _holders(name: str, claim: Mapping[str, Any]) -> Iterable[tuple[DeviceKey, Holder]]:
    status = claim.get("status") or {}
    pods = tuple(f"{name.split('/')[0]}/{r.get('name', '')}"
                 for r in status.get("reservedFor") or [] if r.get("resource") == "pods")
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    for result in results:
        key = (str(result.get("driver", "")), str(result.get("pool", "")),
               str(result.get("device", "")))
        consumed = {k: quantity(v) for k, v in (result.get("consumedCapacity") or {}).items()}
        yield key, Holder(name, str(result.get("request", "")), result.get("shareID"),
                          consumed, bool(result.get("adminAccess")), pods)


def _count_counters(inventory: Inventory) -> None:
    """Counters consumed by allocated devices (once per device, admin access aside)."""
    for device in inventory.devices:
        if not any(not h.admin for h in inventory.holders.get(device.key, ())):
            continue
        used = inventory.counters_used.setdefault((device.driver, device.pool), {})
        for entry in device.spec.get("consumesCounters") or []:
            counters = used.setdefault(entry.get("counterSet", ""), {})
            for name, counter in (entry.get("counters") or {}).items():
                counters[name] = counters.get(name, Fraction(0)) + quantity(
                    (counter or {}).get("value"))


def _health(pods: Iterable[JSON], claims: Mapping[str, JSON]) -> dict[DeviceKey, str]:
    found: dict[DeviceKey, str] = {}
    for pod in pods:
        namespace = (pod.get("metadata") or {}).get("namespace", "")
        names = _pod_claim_names(pod)
        status = pod.get("status") or {}
        for container in [*(status.get("initContainerStatuses") or []),
                          *(status.get("containerStatuses") or [])]:
            for entry in container.get("allocatedResourcesStatus") or []:
                pod_claim, _, request = str(entry.get("name", "")).removeprefix("claim:")\
                    .partition("/")
                claim = claims.get(f"{namespace}/{names.get(pod_claim, pod_claim)}")
                if claim is not None:
                    _apply_health(found, claim, request, entry.get("resources") or [])
    return found


def _pod_claim_names(pod: Mapping[str, Any]) -> dict[str, str]:
    """Pod claim name -> ResourceClaim name (direct or generated from a template)."""
    names = {c.get("name", ""): c["resourceClaimName"]
             for c in (pod.get("spec") or {}).get("resourceClaims") or []
             if c.get("resourceClaimName")}
    for c in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if c.get("resourceClaimName"):
            names[c.get("name", "")] = c["resourceClaimName"]
    return names


def _apply_health(found: dict[DeviceKey, str], claim: Mapping[str, Any], request: str,
                  resources: list[JSON]) -> None:
    results = [r for r in (((claim.get("status") or {}).get("allocation") or {})
                           .get("devices") or {}).get("results") or []
               if not request or str(r.get("request", "")).split("/")[0] == request]
    for result in results:
        key = (str(result.get("driver", "")), str(result.get("pool", "")),
               str(result.get("device", "")))
        mine = [r for r in resources if str(r.get("resourceID", "")).endswith(key[2])]
        for resource in (mine if mine and len(results) > 1 else resources):
            health = str(resource.get("health") or "Unknown")
            if HEALTH_ORDER.get(health, 0) > HEALTH_ORDER.get(found.get(key, ""), 0):
                found[key] = health
