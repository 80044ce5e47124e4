"""The counters a partitionable device consumes of its pool's shared counter sets (pure).

A partition and its whole device both draw on the counter sets of one physical device;
a claim's units record what they consume so that the ledger can refuse a partition
while the whole device (or too many siblings) is in use.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from simdra._driver.claims.errors import ClaimError
from simdra._driver.core.quantity import QuantityError, parse_quantity
from simdra._driver.devices.model import Device, Inventory, Pool

Counters = dict[str, dict[str, Fraction]]  # counter set -> counter -> amount


def pool_counters(
    pool: Pool, device: Device, where: str
) -> tuple[dict[str, dict[str, Fraction]], dict[str, dict[str, Fraction]]]:
    """What the device consumes of its pool's counter sets, and those sets' totals."""
    try:
        sets = {str(s["name"]): s for s in pool.shared_counters}
        consumes: dict[str, dict[str, Fraction]] = {}
        totals: dict[str, dict[str, Fraction]] = {}
        for entry in device.spec.get("consumesCounters") or []:
            name = str(entry["counterSet"])
            if name not in sets:
                raise ClaimError(
                    f"{where}: the device consumes counter set {name}, "
                    f"which pool {pool.name} does not have"
                )
            totals[name] = counter_amounts(sets[name]["counters"])
            wanted = counter_amounts(entry["counters"])
            unknown = sorted(set(wanted) - set(totals[name]))
            if unknown:
                raise ClaimError(f"{where}: counter set {name} has no counters {unknown}")
            into = consumes.setdefault(name, {})
            for counter, amount in wanted.items():
                into[counter] = into.get(counter, Fraction(0)) + amount
        return consumes, totals
    except (KeyError, TypeError, AttributeError, QuantityError) as exc:
        raise ClaimError(f"{where}: malformed counters in the inventory: {exc!r}") from None


def device_counters(inventory: Inventory, pool_name: str, device_name: str) -> dict[
    str, dict[str, Fraction]
]:
    """What a device of the inventory consumes of its pool's counter sets ({} when the
    device is not there or its counters are malformed)."""
    pool = inventory.pool(pool_name)
    device = pool.device(device_name) if pool is not None else None
    if pool is None or device is None:
        return {}
    try:
        return pool_counters(pool, device, f"pool {pool_name} device {device_name}")[0]
    except ClaimError:
        return {}


def counter_groups(device: Device) -> dict[str, tuple[str, ...]]:
    """Counter set -> the compatibility groups the device declares for its consumption of
    it (KEP-5963; only sets with groups are listed)."""
    groups: dict[str, tuple[str, ...]] = {}
    for entry in device.spec.get("consumesCounters") or []:
        named = entry.get("compatibilityGroups") if isinstance(entry, dict) else None
        if named:
            groups[str(entry.get("counterSet"))] = tuple(str(g) for g in named)
    return groups


def counter_amounts(counters: Any) -> dict[str, Fraction]:
    """A counters map of the API (`{name: {value: quantity}}`) as exact amounts."""
    return {str(name): parse_quantity(c["value"]) for name, c in counters.items()}
