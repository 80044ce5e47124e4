"""What is prepared on this node, per device, like a quota shows used vs hard (pure).

Built from the plugin's checkpoint records alone: each prepared unit stores the device's
capacity, the counters it consumes and their totals as they were at prepare time, and
the amounts in use come from the same CapacityLedger the preparer checks claims with.
Per device: each capacity's hard limit, what is used, what is free, and the holders
(claim, UID, shareID, consumed). An exclusive device counts as fully used while a claim
holds it; admin-access holders are listed but consume nothing. Per counter set of a
partitionable pool: total, used by the devices in use, free. Devices that unreadable
records keep reserved (`simdra._driver.claims.store.reserved`) are listed with those records.
`simdra usage` (simdra._driver.cli.usage) reads the records and shows this report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan.prepared import PreparedClaim, PreparedUnit
from simdra._driver.claims.store.checkpoint import CorruptRecord
from simdra._driver.claims.store.reserved import Reservation

UNREADABLE_NOTE = "reserved by an unreadable record"
Amounts = dict[str, Fraction]


@dataclass(frozen=True)
class Holder:
    """One prepared unit of a device: a share, or the claim holding it exclusively."""

    namespace: str
    name: str
    uid: str
    share_id: str | None
    consumed: Amounts  # {} for admin access
    admin_access: bool
    requests: tuple[str, ...]


@dataclass(frozen=True)
class DeviceUsage:
    """Used vs hard for one device."""

    pool: str
    device: str
    device_type: str
    exclusive: bool
    capacity: Amounts
    used: Amounts
    holders: tuple[Holder, ...]
    reserved_by: tuple[str, ...] = ()  # UIDs of unreadable records holding the device

    @property
    def free(self) -> Amounts:
        """Capacity left (negative if the device is overbooked)."""
        return {
            name: total - self.used.get(name, Fraction(0)) for name, total in self.capacity.items()
        }


@dataclass(frozen=True)
class CounterUsage:
    """Used vs total for one counter set of a pool."""

    pool: str
    counter_set: str
    total: Amounts
    used: Amounts
    devices: tuple[str, ...]

    @property
    def free(self) -> Amounts:
        """Counters left."""
        return {
            name: total - self.used.get(name, Fraction(0)) for name, total in self.total.items()
        }


@dataclass(frozen=True)
class UsageReport:
    """Everything `simdra usage` shows."""

    data_dir: str
    devices: tuple[DeviceUsage, ...]
    counters: tuple[CounterUsage, ...]
    problems: tuple[CorruptRecord, ...]
    reservations: tuple[Reservation, ...] = ()


def usage_report(
    data_dir: str,
    records: Mapping[str, PreparedClaim],
    problems: Sequence[CorruptRecord] = (),
    reservations: Sequence[Reservation] = (),
) -> UsageReport:
    """The usage of every device and counter set the records mention, and the devices
    that unreadable records keep reserved."""
    ledger = CapacityLedger.rebuild(records.values())
    units: dict[tuple[str, str], list[tuple[PreparedClaim, PreparedUnit]]] = {}
    for claim in sorted(records.values(), key=lambda c: (c.claim.namespace, c.claim.name)):
        for unit in claim.units:
            units.setdefault((unit.pool, unit.device), []).append((claim, unit))
    reserved: dict[tuple[str, str], list[str]] = {}
    for held in reservations:
        for key in held.devices:
            reserved.setdefault(key, []).append(held.claim_uid)
    devices = tuple(
        _device_usage(pool, device, units.get((pool, device), []), ledger,
                      tuple(reserved.get((pool, device), ())))
        for pool, device in sorted(set(units) | set(reserved))
    )
    counters = []
    for pool, counter_set in ledger.counter_sets():
        in_use = ledger.counters_used(pool)
        counters.append(
            CounterUsage(
                pool,
                counter_set,
                ledger.counter_total(pool, counter_set),
                dict(in_use.amounts.get(counter_set, {})),
                tuple(in_use.consumers.get(counter_set, [])),
            )
        )
    return UsageReport(data_dir, devices, tuple(counters), tuple(problems), tuple(reservations))


def _device_usage(
    pool: str,
    device: str,
    held: list[tuple[PreparedClaim, PreparedUnit]],
    ledger: CapacityLedger,
    reserved_by: tuple[str, ...] = (),
) -> DeviceUsage:
    if not held:  # only known from an unreadable record's CDI spec: no amounts
        return DeviceUsage(pool, device, "-", True, {}, {}, (), reserved_by)
    latest = held[-1][1]
    exclusive = latest.exclusive
    capacity = dict(latest.device_capacity)
    holders = tuple(
        Holder(
            claim.claim.namespace,
            claim.claim.name,
            claim.claim.uid,
            unit.share_id,
            {} if unit.admin_access else unit.granted,
            unit.admin_access,
            unit.requests,
        )
        for claim, unit in held
    )
    used = ledger.consumed(pool, device, capacity)
    return DeviceUsage(
        pool, device, latest.device_type, exclusive, capacity, used, holders, reserved_by
    )


