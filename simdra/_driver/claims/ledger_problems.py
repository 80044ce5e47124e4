"""Why a claim cannot be prepared next to the claims the capacity ledger holds: the
texts of its three rules (`simdra._driver.claims.ledger`), exclusivity, capacity of a shared
device and the counters of a pool. Each names the device or counter, the amounts and
the claims or devices in the way."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from simdra._driver.claims.ledger_totals import (
    DeviceKey,
    DeviceTotals,
    PoolTotals,
    add_amounts,
    sum_amounts,
)
from simdra._driver.claims.plan import PreparedUnit
from simdra._driver.core.quantity import quantity_text

HOLDERS_SHOWN = 8  # claim UIDs named in a refusal


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
