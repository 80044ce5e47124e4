"""The running totals the capacity ledger keeps (`simdra._driver.claims.ledger`): per device
its prepared units, holders and shared capacity in use; per pool the counters of the
devices in use. Each is updated by the units of one claim at a time, so that adding,
removing and checking a claim cost what its own units cost."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

DeviceKey = tuple[str, str]  # (pool, device)


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
