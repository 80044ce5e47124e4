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
consumes, until the claim is unprepared (see `simdra._driver.claims.reserved`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from fractions import Fraction

from simdra._driver.claims.ledger_problems import (
    capacity_problems,
    compatibility_problems,
    counter_problems,
    exclusivity_problems,
)
from simdra._driver.claims.ledger_totals import (
    CounterUse,
    DeviceKey,
    DeviceTotals,
    LedgerEntry,
    PoolTotals,
)
from simdra._driver.claims.plan import PreparedClaim, PreparedUnit

# LedgerEntry and CounterUse are what the ledger's queries return.
__all__ = ["CapacityLedger", "CounterKey", "CounterUse", "DeviceKey", "LedgerEntry"]

CounterKey = tuple[str, str]  # (pool, counter set)


class CapacityLedger:
    """Per device, the prepared units of all claims; checks new claims against them.

    Kept incrementally (`simdra._driver.claims.ledger_totals`): per device the running totals a
    check needs (holders, shared capacity in use) and per pool the counters of the
    devices in use, so adding, removing and checking a claim cost what its own units
    cost, however many claims the node holds. The refusals' texts are in
    `simdra._driver.claims.ledger_problems`.
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
