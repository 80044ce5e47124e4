"""Capacity ledger: which claims hold which devices and shares on this node (pure).

Defence in depth (facts 2.3): the scheduler should never hand out an exclusive device
twice, overbook a shared one or overdraw a pool's shared counters, but the node checks
before it prepares. Three rules:

* an exclusive device is prepared for at most one claim;
* per capacity, the consumedCapacity of all prepared shares of a device stays within the
  device's capacity;
* per counter, the counters consumed by the devices in use stay within the pool's
  counter set (facts 4.4: a device consumes its counters once while it is allocated at
  all, however many shares it has, as the scheduler counts them). This is what keeps a
  whole partitionable GPU from being prepared while one of its partitions is.

Admin access results are monitoring access (facts 5.2): they consume nothing and block
nobody. The ledger holds no state of its own that the checkpoint lacks; after a restart
it is rebuilt from the checkpoint records, which carry every amount it needs.

A claim whose record cannot be read still holds its devices (fail closed): `reserve`
holds each device its CDI spec names as if exclusively, with the counters the device
consumes, until the claim is unprepared (see `driver.claims.reserved`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from driver.claims.errors import quantity_text
from driver.claims.plan import PreparedClaim, PreparedUnit

DeviceKey = tuple[str, str]  # (pool, device)
CounterKey = tuple[str, str]  # (pool, counter set)


@dataclass(frozen=True)
class LedgerEntry:
    """One prepared unit as the ledger sees it."""

    claim_uid: str
    share_id: str | None
    exclusive: bool
    admin_access: bool
    consumed: Mapping[str, Fraction]
    counters: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)  # set -> c
    unreadable: bool = False  # held for a checkpoint record that could not be read

    @property
    def counts(self) -> bool:
        """Admin access entries neither consume capacity nor hold exclusivity."""
        return not self.admin_access


class CapacityLedger:
    """Per device, the prepared units of all claims; checks new claims against them."""

    def __init__(self) -> None:
        self._by_device: dict[DeviceKey, list[LedgerEntry]] = {}
        self._devices_of_claim: dict[str, set[DeviceKey]] = {}
        self._counter_totals: dict[CounterKey, dict[str, Fraction]] = {}

    @classmethod
    def rebuild(cls, claims: Iterable[PreparedClaim]) -> CapacityLedger:
        """A ledger holding every claim in `claims` (e.g. the checkpoint records)."""
        ledger = cls()
        for claim in claims:
            ledger.add(claim)
        return ledger

    def __contains__(self, claim_uid: object) -> bool:
        return claim_uid in self._devices_of_claim

    def entries(self, pool: str, device: str) -> tuple[LedgerEntry, ...]:
        """Every unit prepared on a device, in the order they were added."""
        return tuple(self._by_device.get((pool, device), ()))

    def devices(self) -> list[DeviceKey]:
        """Every (pool, device) with at least one prepared unit, sorted."""
        return sorted(self._by_device)

    def used(self, pool: str, device: str) -> dict[str, Fraction]:
        """Capacity name -> amount consumed on a device by all counting shares."""
        return _sum(e.consumed for e in self.entries(pool, device) if e.counts)

    def counter_sets(self) -> list[CounterKey]:
        """Every (pool, counter set) some prepared unit consumes from, sorted."""
        return sorted(self._counter_totals)

    def counter_total(self, pool: str, counter_set: str) -> dict[str, Fraction]:
        """The counters of a set as last recorded by a prepared unit ({} if unknown)."""
        return dict(self._counter_totals.get((pool, counter_set), {}))

    def counters_used(self, pool: str, exclude_claim: str | None = None) -> _CounterUse:
        """Per counter set of `pool`: counter -> amount consumed by devices in use, and
        the devices consuming (optionally leaving out one claim's units)."""
        return _counter_use(
            {
                device: [e for e in entries if e.counts and e.claim_uid != exclude_claim]
                for (p, device), entries in self._by_device.items()
                if p == pool
            }
        )

    def check(self, claim: PreparedClaim) -> list[str]:
        """Why `claim` cannot be prepared next to the claims already here (empty: it can).

        Entries of `claim` itself are ignored, so re-checking a held claim finds nothing.
        """
        problems: list[str] = []
        by_device: dict[DeviceKey, list[PreparedUnit]] = {}
        for unit in claim.units:
            if not unit.admin_access:
                by_device.setdefault((unit.pool, unit.device), []).append(unit)
        for (pool, device), units in by_device.items():
            others = [
                e for e in self.entries(pool, device) if e.counts and e.claim_uid != claim.claim.uid
            ]
            problems.extend(_exclusivity_problems(pool, device, units, others))
            problems.extend(_capacity_problems(pool, device, units, others))
        for pool in dict.fromkeys(pool for pool, _ in by_device):
            problems.extend(self._counter_problems(pool, claim, by_device))
        return problems

    def _counter_problems(
        self, pool: str, claim: PreparedClaim, by_device: Mapping[DeviceKey, list[PreparedUnit]]
    ) -> list[str]:
        in_use = self.counters_used(pool, exclude_claim=claim.claim.uid)
        asked: dict[str, dict[str, Fraction]] = {}
        askers: dict[str, list[str]] = {}
        totals: dict[str, Mapping[str, Fraction]] = {}
        for (unit_pool, device), units in by_device.items():
            if unit_pool != pool or device in in_use.devices:
                continue  # already counted once for the claims using it
            for name, amounts in units[0].consumes_counters.items():
                _add(asked.setdefault(name, {}), amounts)
                askers.setdefault(name, []).append(device)
                totals[name] = units[0].counter_totals.get(name, {})
        problems = []
        for name in sorted(asked):
            used = in_use.amounts.get(name, {})
            for counter in sorted(asked[name]):
                limit = totals[name].get(counter, Fraction(0))
                in_set = used.get(counter, Fraction(0))
                if in_set + asked[name][counter] <= limit:
                    continue
                holders = ", ".join(in_use.consumers.get(name, [])) or "none"
                problems.append(
                    f"pool {pool} counter set {name} counter {counter}: total "
                    f"{quantity_text(limit)}, used {quantity_text(in_set)} by device(s) "
                    f"{holders}, asked {quantity_text(asked[name][counter])} by device(s) "
                    f"{', '.join(askers[name])}: "
                    f"{quantity_text(in_set + asked[name][counter] - limit)} over"
                )
        return problems

    def add(self, claim: PreparedClaim) -> None:
        """Record `claim`'s units (replacing what was recorded for it before)."""
        self.remove(claim.claim.uid)
        keys: set[DeviceKey] = set()
        for unit in claim.units:
            entry = LedgerEntry(
                claim_uid=claim.claim.uid,
                share_id=unit.share_id,
                exclusive=unit.exclusive,
                admin_access=unit.admin_access,
                consumed=dict(unit.consumed_capacity),
                counters={n: dict(a) for n, a in unit.consumes_counters.items()},
            )
            self._by_device.setdefault((unit.pool, unit.device), []).append(entry)
            keys.add((unit.pool, unit.device))
            for name, total in unit.counter_totals.items():
                self._counter_totals[(unit.pool, name)] = dict(total)
        self._devices_of_claim[claim.claim.uid] = keys

    def reserve(
        self,
        claim_uid: str,
        devices: Iterable[tuple[str, str, Mapping[str, Mapping[str, Fraction]]]],
    ) -> None:
        """Hold each (pool, device, counters it consumes) for a claim whose record is
        unreadable: nothing else is prepared on those devices or against those counters
        until `remove(claim_uid)`."""
        self.remove(claim_uid)
        keys: set[DeviceKey] = set()
        for pool, device, counters in devices:
            entry = LedgerEntry(
                claim_uid=claim_uid, share_id=None, exclusive=True, admin_access=False,
                consumed={}, counters={n: dict(a) for n, a in counters.items()},
                unreadable=True,
            )
            self._by_device.setdefault((pool, device), []).append(entry)
            keys.add((pool, device))
        self._devices_of_claim[claim_uid] = keys

    def reserved(self) -> list[tuple[str, str, str]]:
        """(pool, device, claim UID) of every device held for an unreadable record."""
        return sorted(
            (pool, device, e.claim_uid)
            for (pool, device), entries in self._by_device.items()
            for e in entries
            if e.unreadable
        )

    def remove(self, claim_uid: str) -> None:
        """Forget every unit of a claim; unknown claims are fine."""
        for key in self._devices_of_claim.pop(claim_uid, set()):
            kept = [e for e in self._by_device[key] if e.claim_uid != claim_uid]
            if kept:
                self._by_device[key] = kept
            else:
                del self._by_device[key]


def _exclusivity_problems(
    pool: str, device: str, units: list[PreparedUnit], others: list[LedgerEntry]
) -> list[str]:
    if not others:
        return []
    unreadable = sorted({e.claim_uid for e in others if e.unreadable})
    if unreadable:
        return [
            f"device {pool}/{device} is reserved by an unreadable checkpoint record of claim "
            f"{', '.join(unreadable)} until the kubelet unprepares that claim"
        ]
    holders = ", ".join(sorted({e.claim_uid for e in others}))
    if any(u.exclusive for u in units):
        return [f"device {pool}/{device} is exclusive and already prepared for claim {holders}"]
    if any(e.exclusive for e in others):
        # The device was exclusive when the other claim got it (inventory changed since).
        return [f"device {pool}/{device} is already prepared exclusively for claim {holders}"]
    return []


def _capacity_problems(
    pool: str, device: str, units: list[PreparedUnit], others: list[LedgerEntry]
) -> list[str]:
    shared = [u for u in units if not u.exclusive]
    if not shared:
        return []
    total = shared[0].device_capacity
    sharers = [e for e in others if not e.exclusive]
    used = _sum(e.consumed for e in sharers)
    asked = _sum(u.consumed_capacity for u in shared)
    problems = []
    for name in sorted(asked):
        limit = total.get(name, Fraction(0))
        in_use = used.get(name, Fraction(0))
        if in_use + asked[name] > limit:
            shares = ", ".join(str(u.share_id) for u in shared)
            problems.append(
                f"device {pool}/{device} capacity {name}: total {quantity_text(limit)}, "
                f"used {quantity_text(in_use)} by {len(sharers)} other share(s), "
                f"asked {quantity_text(asked[name])} (share {shares}): "
                f"{quantity_text(in_use + asked[name] - limit)} over capacity"
            )
    return problems


@dataclass(frozen=True)
class _CounterUse:
    """Counters consumed in one pool by the devices in use."""

    amounts: dict[str, dict[str, Fraction]]  # counter set -> counter -> amount
    consumers: dict[str, list[str]]  # counter set -> devices consuming from it
    devices: frozenset[str]  # every device in use, with or without counters


def _counter_use(entries_by_device: Mapping[str, list[LedgerEntry]]) -> _CounterUse:
    amounts: dict[str, dict[str, Fraction]] = {}
    consumers: dict[str, list[str]] = {}
    in_use = set()
    for device, entries in sorted(entries_by_device.items()):
        if not entries:
            continue
        in_use.add(device)
        for name, counters in entries[0].counters.items():
            _add(amounts.setdefault(name, {}), counters)
            consumers.setdefault(name, []).append(device)
    return _CounterUse(amounts, consumers, frozenset(in_use))


def _add(into: dict[str, Fraction], amounts: Mapping[str, Fraction]) -> None:
    for name, value in amounts.items():
        into[name] = into.get(name, Fraction(0)) + value


def _sum(amounts: Iterable[Mapping[str, Fraction]]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for amount in amounts:
        for name, value in amount.items():
            total[name] = total.get(name, Fraction(0)) + value
    return total
