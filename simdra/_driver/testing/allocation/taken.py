"""What is already taken: exclusive devices, consumed shared capacity, consumed counters.

Built from every allocated claim, then extended and rolled back by the search while it
tries devices for the claim being allocated. Results with adminAccess are not counted,
as in the scheduler: admin access never takes a device away from anyone.

Compatibility groups (KEP-5963, `consumesCounters[].compatibilityGroups`): devices drawing
on one counter set at the same time must all declare groups that share at least one
group, or all declare none, as the scheduler's allocator checks before the counters.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from simdra._driver.core.quantity import parse_quantity
from simdra._driver.testing.allocation.format import human_quantity
from simdra._driver.testing.allocation.pools import Candidate, DeviceKey, Pool
from simdra._driver.testing.allocation.requests import claim_label

PoolKey = tuple[str, str]  # (driver, pool)
Groups = frozenset[str]  # one device's compatibility groups for one counter set


@dataclass
class Usage:
    """Mutable ledger of taken devices, capacity and counters; `take`/`give_back` pair up."""

    pools: dict[PoolKey, Pool]
    exclusive: dict[DeviceKey, str] = field(default_factory=dict)  # device -> owner claim
    shares: dict[DeviceKey, int] = field(default_factory=lambda: defaultdict(int))
    consumed: dict[DeviceKey, dict[str, Fraction]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Fraction))
    )
    counters: dict[PoolKey, dict[str, dict[str, Fraction]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(Fraction)))
    )
    # Pool -> counter set -> the groups of the devices drawing on it, counted.
    groups: dict[PoolKey, dict[str, Counter[Groups]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Counter))
    )

    @classmethod
    def from_claims(
        cls, claims: Iterable[Mapping[str, Any]], pools: Iterable[Pool], skip_uid: str | None
    ) -> Usage:
        """The ledger of every allocated claim except the one with UID `skip_uid`."""
        by_key = {(p.driver, p.name): p for p in pools}
        usage = cls(by_key)
        devices = {c.key: c for p in by_key.values() for c in p.candidates}
        for claim in claims:
            if skip_uid and (claim.get("metadata") or {}).get("uid") == skip_uid:
                continue
            allocation = (claim.get("status") or {}).get("allocation") or {}
            for result in (allocation.get("devices") or {}).get("results") or []:
                if result.get("adminAccess"):
                    continue
                key = (result["driver"], result["pool"], result["device"])
                usage.record(key, devices.get(key), result, claim_label(claim))
        return usage

    def record(
        self,
        key: DeviceKey,
        device: Candidate | None,
        result: Mapping[str, Any],
        owner: str,
    ) -> None:
        """Count one existing allocation result."""
        if device is None:
            # The device is no longer published (or its pool is incomplete): it cannot be
            # picked anyway, but keep exclusive ownership for messages.
            self.exclusive.setdefault(key, owner)
            return
        # The result's shareID, not what the device says now, makes it a share: like the
        # scheduler, a result without one holds the device exclusively even where the
        # device has since been republished as multi-allocatable (and vice versa).
        if result.get("shareID") is None:
            self.take(device, None, owner)
            return
        consumed: dict[str, Fraction] = {}
        for name, amount in (result.get("consumedCapacity") or {}).items():
            published = device.capacity_name(name)
            if published is not None:
                consumed[published] = parse_quantity(amount)
        self.take(device, consumed, owner)

    def in_use(self, device: Candidate) -> bool:
        """True when any (non-admin) allocation holds the device."""
        return device.key in self.exclusive or self.shares.get(device.key, 0) > 0

    def take(self, device: Candidate, consumed: Mapping[str, Fraction] | None, owner: str) -> None:
        """Mark `device` as allocated: exclusively (consumed None) or as one more share."""
        if not self.in_use(device):
            self._add_counters(device, 1)
        if consumed is None:
            self.exclusive[device.key] = owner
            return
        self.shares[device.key] += 1
        for name, amount in consumed.items():
            self.consumed[device.key][name] += amount

    def give_back(self, device: Candidate, consumed: Mapping[str, Fraction] | None) -> None:
        """Undo one `take` with the same arguments."""
        if consumed is None:
            del self.exclusive[device.key]
        else:
            self.shares[device.key] -= 1
            for name, amount in consumed.items():
                self.consumed[device.key][name] -= amount
        if not self.in_use(device):
            self._add_counters(device, -1)

    def counters_left(self, device: Candidate) -> list[str]:
        """Why the device's counter consumption does not fit its pool (empty: it fits).
        For a device in use its consumption is already counted and is added once more
        (admin access to a used device: the scheduler charges it twice)."""
        pool = self.pools.get((device.driver, device.pool))
        sets = pool.counter_sets if pool else {}
        used = self.counters[(device.driver, device.pool)]
        problems = []
        for entry in device.spec.get("consumesCounters") or []:
            set_name = entry.get("counterSet", "")
            available = sets.get(set_name)
            if available is None:
                problems.append(f"counter set {set_name!r} is not published in its pool")
                continue
            refused = self._incompatible(device, set_name, _groups(entry))
            if refused:
                problems.append(refused)
                continue
            for name, counter in (entry.get("counters") or {}).items():
                need = parse_quantity(counter["value"])
                total = available.get(name, Fraction(0))
                if used[set_name][name] + need > total:
                    problems.append(
                        f"counter {set_name}/{name}: needs {human_quantity(need)}, "
                        f"{human_quantity(used[set_name][name])} of {human_quantity(total)} used"
                    )
        return problems

    def _incompatible(self, device: Candidate, set_name: str, groups: Groups) -> str:
        """Why the device may not draw on `set_name` beside the devices that do ("": it
        may): their compatibility groups and its own share none."""
        members = [g for g, n in self.groups[(device.driver, device.pool)][set_name].items()
                   if n > 0]
        if not members:
            return ""
        if groups and all(members) and frozenset.intersection(*members) & groups:
            return ""
        if not groups and not any(members):
            return ""
        theirs = sorted(frozenset.union(*members))
        return (f"counter set {set_name}: compatibility groups {sorted(groups)} share none "
                f"with {theirs} of the devices drawing on it")

    def _add_counters(self, device: Candidate, sign: int) -> None:
        key = (device.driver, device.pool)
        used = self.counters[key]
        for entry in device.spec.get("consumesCounters") or []:
            set_name = entry.get("counterSet", "")
            for name, counter in (entry.get("counters") or {}).items():
                used[set_name][name] += sign * parse_quantity(counter["value"])
            self.groups[key][set_name][_groups(entry)] += sign


def _groups(entry: Mapping[str, Any]) -> Groups:
    return frozenset(entry.get("compatibilityGroups") or ())
