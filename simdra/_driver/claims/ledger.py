"""Capacity ledger: which claims hold which devices and shares on this node (pure).

Defence in depth (api-facts 2.3): the scheduler should never hand out an exclusive device
twice, overbook a shared one or overdraw a pool's shared counters, but the node checks
before it prepares. Three rules:

* an exclusive device is prepared for at most one claim;
* per capacity, the consumedCapacity of all prepared shares of a device stays within the
  device's capacity;
* per counter, the counters consumed by the devices in use stay within the pool's
  counter set (api-facts 4.4: a device consumes its counters once while it is allocated at
  all, however many shares it has, as the scheduler counts them). This is what keeps a
  whole partitionable GPU from being prepared while one of its partitions is;
* per counter set, the devices in use on it share a compatibility group, or none of them
  declares one (KEP-5963, Kubernetes 1.37: the scheduler's rule, so that e.g. one GPU's
  whole-memory partitions and its time-sliced shares are never prepared side by side).

Admin access results are monitoring access (api-facts 5.2): they consume nothing and block
nobody. The ledger holds no state of its own that the checkpoint lacks; after a restart
it is rebuilt from the checkpoint records, which carry every amount it needs.

A claim whose record cannot be read still holds its devices (fail closed): `reserve`
holds each device its CDI spec names as if exclusively, with the counters the device
consumes, until the claim is unprepared (see `simdra._driver.claims.store.reserved`).

Kept incrementally: per device the running totals a check needs (holders, shared
capacity in use, `DeviceTotals`) and per pool the counters of the devices in use
(`PoolTotals`), each updated by the units of one claim at a time, so that adding,
removing and checking a claim cost what its own units cost, however many claims the node
holds. A refusal names the device or counter, the amounts and the claims or devices in
the way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction

from simdra._driver.claims.plan.prepared import PreparedClaim, PreparedUnit
from simdra._driver.core.quantity import quantity_text

CounterKey = tuple[str, str]  # (pool, counter set)
DeviceKey = tuple[str, str]  # (pool, device)
HOLDERS_SHOWN = 8  # claim UIDs named in a refusal


class CapacityLedger:
    """Per device, the prepared units of all claims; checks new claims against them.

    Kept incrementally (see the module docstring): adding, removing and checking a
    claim cost what its own units cost, however many claims the node holds.
    """

    def __init__(self) -> None:
        self._by_device: dict[DeviceKey, DeviceTotals] = {}
        self._devices_of_claim: dict[str, set[DeviceKey]] = {}
        self._counter_totals: dict[CounterKey, dict[str, Fraction]] = {}
        self._pools: dict[str, PoolTotals] = {}
        self._unreadable: set[str] = set()

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
        """Every unit prepared on a device, claim by claim in the order they were added."""
        use = self._by_device.get((pool, device))
        return tuple(e for entries in use.by_claim.values() for e in entries) if use else ()

    def devices(self) -> list[DeviceKey]:
        """Every (pool, device) with at least one prepared unit, sorted."""
        return sorted(self.devices_in_use())

    def devices_in_use(self) -> frozenset[DeviceKey]:
        """Every (pool, device) with a prepared unit or held for an unreadable record.

        Cheap for a caller that asks every half second however many claims the node
        holds (the live-devices tick), and a consistent snapshot even while a prepare
        changes the ledger: the set is built from the dict's keys in one step of the
        interpreter, which no other thread can interleave with."""
        return frozenset(self._by_device)

    def used(self, pool: str, device: str) -> dict[str, Fraction]:
        """Capacity name -> amount consumed on a device by all counting shares."""
        use = self._by_device.get((pool, device))
        return dict(use.shared_used) if use else {}

    def consumed(self, pool: str, device: str,
                 capacity: Mapping[str, Fraction]) -> dict[str, Fraction]:
        """What the prepared units consume of a device, for each name in `capacity` (its
        capacities): all of it while a claim holds the device exclusively, else the sum
        of the shares' consumedCapacity; admin access consumes nothing. The one rule the
        checks enforce, `simdra usage` shows and the metrics report."""
        use = self._by_device.get((pool, device))
        amounts = {name: Fraction(0) for name in capacity}
        if use is not None and use.exclusive:
            return amounts | dict(capacity)
        return amounts | (dict(use.shared_used) if use is not None else {})

    def counter_sets(self) -> list[CounterKey]:
        """Every (pool, counter set) some prepared unit consumes from, sorted."""
        return sorted(self._counter_totals)

    def counter_total(self, pool: str, counter_set: str) -> dict[str, Fraction]:
        """The counters of a set as last recorded by a prepared unit ({} if unknown)."""
        return dict(self._counter_totals.get((pool, counter_set), {}))

    def counters_used(self, pool: str, exclude_claim: str | None = None) -> CounterUse:
        """Per counter set of `pool`: counter -> amount consumed by devices in use, and
        the devices consuming (optionally leaving out one claim's units)."""
        with self._without(exclude_claim):
            use = self._pools.get(pool, PoolTotals())
            return CounterUse(
                {name: dict(amounts) for name, amounts in use.amounts.items()},
                {name: use.consumers(name) for name in use.amounts},
                frozenset(use.devices),
            )

    def check(self, claim: PreparedClaim) -> list[str]:
        """Why `claim` cannot be prepared next to the claims already here (empty: it can).

        Entries of `claim` itself are ignored, so re-checking a held claim finds nothing.
        """
        with self._without(claim.claim.uid):
            return self._check(claim)

    def _check(self, claim: PreparedClaim) -> list[str]:
        problems: list[str] = []
        by_device: dict[DeviceKey, list[PreparedUnit]] = {}
        for unit in claim.units:
            if not unit.admin_access:
                by_device.setdefault((unit.pool, unit.device), []).append(unit)
        for (pool, device), units in by_device.items():
            use = self._by_device.get((pool, device)) or DeviceTotals()
            problems.extend(exclusivity_problems(pool, device, units, use))
            problems.extend(capacity_problems(pool, device, units, use))
        for pool in dict.fromkeys(pool for pool, _ in by_device):
            in_use = self._pools.get(pool, PoolTotals())
            problems.extend(counter_problems(pool, by_device, in_use))
            problems.extend(compatibility_problems(pool, by_device, in_use))
        return problems

    def add(self, claim: PreparedClaim) -> None:
        """Record `claim`'s units (replacing what was recorded for it before)."""
        self.remove(claim.claim.uid)
        entries = []
        for unit in claim.units:
            entry = LedgerEntry(
                claim_uid=claim.claim.uid,
                share_id=unit.share_id,
                exclusive=unit.exclusive,
                admin_access=unit.admin_access,
                consumed=dict(unit.consumed_capacity),
                counters={n: dict(a) for n, a in unit.consumes_counters.items()},
                groups=dict(unit.counter_groups),
            )
            entries.append(((unit.pool, unit.device), entry))
            for name, total in unit.counter_totals.items():
                self._counter_totals[(unit.pool, name)] = dict(total)
        self._put(claim.claim.uid, entries)

    def reserve(
        self,
        claim_uid: str,
        devices: Iterable[tuple[str, str, Mapping[str, Mapping[str, Fraction]]]],
    ) -> None:
        """Hold each (pool, device, counters it consumes) for a claim whose record is
        unreadable: nothing else is prepared on those devices or against those counters
        until `remove(claim_uid)`."""
        self.remove(claim_uid)
        entries = [
            ((pool, device), LedgerEntry(
                claim_uid=claim_uid, share_id=None, exclusive=True, admin_access=False,
                consumed={}, counters={n: dict(a) for n, a in counters.items()},
                unreadable=True,
            ))
            for pool, device, counters in devices
        ]
        self._put(claim_uid, entries)
        self._unreadable.add(claim_uid)

    def reserved(self) -> list[tuple[str, str, str]]:
        """(pool, device, claim UID) of every device held for an unreadable record."""
        return sorted(
            (pool, device, uid)
            for uid in self._unreadable
            for pool, device in self._devices_of_claim.get(uid, ())
        )

    def remove(self, claim_uid: str) -> None:
        """Forget every unit of a claim; unknown claims are fine."""
        self._take(claim_uid)
        self._unreadable.discard(claim_uid)

    # -- incremental bookkeeping -------------------------------------------------------

    @contextmanager
    def _without(self, claim_uid: str | None) -> Iterator[None]:
        """Leave one claim's units out for the duration of the block (a re-check)."""
        if claim_uid is None or claim_uid not in self._devices_of_claim:
            yield
            return
        taken = self._take(claim_uid)
        try:
            yield
        finally:
            self._put(claim_uid, taken)

    def _put(self, claim_uid: str, entries: list[tuple[DeviceKey, LedgerEntry]]) -> None:
        keys = self._devices_of_claim.setdefault(claim_uid, set())
        for key, entry in entries:
            use = self._by_device.setdefault(key, DeviceTotals())
            became_used = use.insert(entry)
            keys.add(key)
            if became_used:
                self._pools.setdefault(key[0], PoolTotals()).start(key[1], entry.counters,
                                                                   entry.groups)

    def _take(self, claim_uid: str) -> list[tuple[DeviceKey, LedgerEntry]]:
        taken: list[tuple[DeviceKey, LedgerEntry]] = []
        for key in sorted(self._devices_of_claim.pop(claim_uid, set())):
            use = self._by_device[key]
            entries, became_unused = use.pop(claim_uid)
            taken.extend((key, e) for e in entries)
            if became_unused:
                self._pools[key[0]].stop(key[1])
            if not use.by_claim:
                del self._by_device[key]
        return taken


# --- the running totals -------------------------------------------------------------


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
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # set -> groups

    @property
    def counts(self) -> bool:
        """Admin access entries neither consume capacity nor hold exclusivity."""
        return not self.admin_access


@dataclass
class DeviceTotals:
    """The prepared units of one device and the totals a check reads."""

    by_claim: dict[str, list[LedgerEntry]] = field(default_factory=dict)
    counting: dict[str, int] = field(default_factory=dict)  # claim -> counting entries
    exclusive: dict[str, int] = field(default_factory=dict)  # claim -> exclusive ones
    unreadable: set[str] = field(default_factory=set)
    sharers: int = 0  # counting entries that are shares
    shared_used: dict[str, Fraction] = field(default_factory=dict)

    def insert(self, entry: LedgerEntry) -> bool:
        """Add one entry; True when the device just came into use (first counting one)."""
        self.by_claim.setdefault(entry.claim_uid, []).append(entry)
        if not entry.counts:
            return False
        became_used = not self.counting
        uid = entry.claim_uid
        self.counting[uid] = self.counting.get(uid, 0) + 1
        if entry.exclusive:
            self.exclusive[uid] = self.exclusive.get(uid, 0) + 1
        else:
            self.sharers += 1
            add_amounts(self.shared_used, entry.consumed)
        if entry.unreadable:
            self.unreadable.add(uid)
        return became_used

    def pop(self, claim_uid: str) -> tuple[list[LedgerEntry], bool]:
        """Remove a claim's entries; True when the device is no longer in use."""
        entries = self.by_claim.pop(claim_uid, [])
        was_used = bool(self.counting)
        for entry in entries:
            if not entry.counts:
                continue
            if not entry.exclusive:
                self.sharers -= 1
                for name, value in entry.consumed.items():
                    self.shared_used[name] -= value
        self.counting.pop(claim_uid, None)
        self.exclusive.pop(claim_uid, None)
        self.unreadable.discard(claim_uid)
        if self.sharers == 0:
            self.shared_used = {}  # exact zeros; no key for a capacity nobody uses
        return entries, was_used and not self.counting


@dataclass
class PoolTotals:
    """Counters consumed in one pool: each device in use counts its counters once."""

    devices: dict[str, Mapping[str, Mapping[str, Fraction]]] = field(default_factory=dict)
    amounts: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)  # counter set -> devices using it
    # device -> counter set -> its compatibility groups there (devices with groups only)
    groups: dict[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)

    def start(self, device: str, counters: Mapping[str, Mapping[str, Fraction]],
              groups: Mapping[str, tuple[str, ...]] | None = None) -> None:
        """`device` came into use, consuming `counters` (in `groups`, per counter set)."""
        self.devices[device] = counters
        if groups:
            self.groups[device] = groups
        for name, amounts in counters.items():
            add_amounts(self.amounts.setdefault(name, {}), amounts)
            self.users[name] = self.users.get(name, 0) + 1

    def stop(self, device: str) -> None:
        """`device` is no longer in use."""
        self.groups.pop(device, None)
        for name, amounts in self.devices.pop(device, {}).items():
            self.users[name] -= 1
            if self.users[name] == 0:
                del self.users[name], self.amounts[name]
                continue
            for counter, value in amounts.items():
                self.amounts[name][counter] -= value

    def consumers(self, counter_set: str) -> list[str]:
        """The devices in use that consume from `counter_set`, sorted."""
        return sorted(d for d, counters in self.devices.items() if counter_set in counters)


@dataclass(frozen=True)
class CounterUse:
    """Counters consumed in one pool by the devices in use."""

    amounts: dict[str, dict[str, Fraction]]  # counter set -> counter -> amount
    consumers: dict[str, list[str]]  # counter set -> devices consuming from it
    devices: frozenset[str]  # every device in use, with or without counters


def add_amounts(into: dict[str, Fraction], amounts: Mapping[str, Fraction]) -> None:
    """Add `amounts` into `into`, name by name."""
    for name, value in amounts.items():
        into[name] = into.get(name, Fraction(0)) + value


def sum_amounts(amounts: Iterable[Mapping[str, Fraction]]) -> dict[str, Fraction]:
    """The amounts added up, name by name."""
    total: dict[str, Fraction] = {}
    for amount in amounts:
        for name, value in amount.items():
            total[name] = total.get(name, Fraction(0)) + value
    return total


# --- why a claim cannot be prepared ------------------------------------------------


def exclusivity_problems(
    pool: str, device: str, units: list[PreparedUnit], use: DeviceTotals
) -> list[str]:
    """Why `units` (one claim's counting units of a device) cannot join the device's
    holders: it is held exclusively, reserved for an unreadable record, or asked for
    exclusively while others hold it."""
    if not use.counting:
        return []
    if use.unreadable:
        return [
            f"device {pool}/{device} is reserved by an unreadable checkpoint record of claim "
            f"{', '.join(sorted(use.unreadable))} until the kubelet unprepares that claim"
        ]
    holders = _holders(use)
    if any(u.exclusive for u in units):
        return [f"device {pool}/{device} is exclusive and already prepared for claim {holders}"]
    if use.exclusive:
        # The device was exclusive when the other claim got it (inventory changed since).
        return [f"device {pool}/{device} is already prepared exclusively for claim {holders}"]
    return []


def _holders(use: DeviceTotals) -> str:
    # A long list helps nobody and would make the error grow with the node.
    uids = sorted(use.counting)
    shown = ", ".join(uids[:HOLDERS_SHOWN])
    return shown if len(uids) <= HOLDERS_SHOWN else f"{shown} and {len(uids) - HOLDERS_SHOWN} more"


def capacity_problems(
    pool: str, device: str, units: list[PreparedUnit], use: DeviceTotals
) -> list[str]:
    """Per capacity, why the shares among `units` do not fit in what the device's other
    shares leave of it."""
    shared = [u for u in units if not u.exclusive]
    if not shared:
        return []
    total = shared[0].device_capacity
    used = use.shared_used
    asked = sum_amounts(u.consumed_capacity for u in shared)
    problems = []
    for name in sorted(asked):
        limit = total.get(name, Fraction(0))
        in_use = used.get(name, Fraction(0))
        if in_use + asked[name] > limit:
            shares = ", ".join(str(u.share_id) for u in shared)
            problems.append(
                f"device {pool}/{device} capacity {name}: total {quantity_text(limit)}, "
                f"used {quantity_text(in_use)} by {use.sharers} other share(s), "
                f"asked {quantity_text(asked[name])} (share {shares}): "
                f"{quantity_text(in_use + asked[name] - limit)} over capacity"
            )
    return problems


def counter_problems(
    pool: str, by_device: Mapping[DeviceKey, list[PreparedUnit]], in_use: PoolTotals
) -> list[str]:
    """Per counter of `pool`, why the devices a claim would bring into use (`by_device`,
    its counting units) overdraw what the devices in use (`in_use`) leave."""
    asked: dict[str, dict[str, Fraction]] = {}
    askers: dict[str, list[str]] = {}
    totals: dict[str, Mapping[str, Fraction]] = {}
    for (unit_pool, device), units in by_device.items():
        if unit_pool != pool or device in in_use.devices:
            continue  # already counted once for the claims using it
        for name, amounts in units[0].consumes_counters.items():
            add_amounts(asked.setdefault(name, {}), amounts)
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
            holders = ", ".join(in_use.consumers(name)) or "none"
            problems.append(
                f"pool {pool} counter set {name} counter {counter}: total "
                f"{quantity_text(limit)}, used {quantity_text(in_set)} by device(s) "
                f"{holders}, asked {quantity_text(asked[name][counter])} by device(s) "
                f"{', '.join(askers[name])}: "
                f"{quantity_text(in_set + asked[name][counter] - limit)} over"
            )
    return problems


def compatibility_problems(
    pool: str, by_device: Mapping[DeviceKey, list[PreparedUnit]], in_use: PoolTotals
) -> list[str]:
    """Per counter set of `pool`, why the devices a claim would bring into use cannot be
    co-allocated with those in use (KEP-5963): all the devices on one set must share a
    compatibility group, unless none of them declares any. A device without groups next
    to one with groups is refused, as the scheduler refuses it."""
    asked: dict[str, dict[str, tuple[str, ...]]] = {}  # set -> new device -> groups
    for (unit_pool, device), units in by_device.items():
        if unit_pool != pool or device in in_use.devices:
            continue
        for name in units[0].consumes_counters:
            asked.setdefault(name, {})[device] = tuple(units[0].counter_groups.get(name, ()))
    problems = []
    for name, new in sorted(asked.items()):
        held = {d: tuple(in_use.groups.get(d, {}).get(name, ())) for d in in_use.consumers(name)}
        together = {**held, **new}
        if len(together) < 2 or not any(together.values()):
            continue
        common = set.intersection(*(set(g) for g in together.values()))
        if common:
            continue
        problems.append(
            f"pool {pool} counter set {name}: device(s) {_with_groups(new)} cannot be "
            f"used next to device(s) {_with_groups(held) or 'none'} in use: no compatibility "
            "group in common")
    return problems


def _with_groups(devices: Mapping[str, tuple[str, ...]]) -> str:
    return ", ".join(f"{d} (groups {', '.join(g) or 'none'})" for d, g in devices.items())
