"""Device rows of `kubectl dra devices`, computed from an Inventory (pure functions).

Capacity used of a multi-allocatable device is the sum of its shares' consumedCapacity;
a device without shares is used wholly while allocated. Counters are the pool's
sharedCounters against what its allocated devices consume. Admin-access results hold
nothing (as in the scheduler): they are listed among the holders, marked.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from simdra._driver.core import quantity as _quantity
from simdra._driver.dra_cli.inventory import Device, Holder, Inventory, quantity

JSON = dict[str, Any]
SUMMARY_ATTRIBUTES = 3  # attributes a narrow table shows per device


@functools.lru_cache(maxsize=4096)
def quantity_text(value: Fraction) -> str:
    """A quantity as Kubernetes writes it; cached, as a fleet's 8,000 GPUs show the same
    few amounts (80Gi, 0) and formatting one takes tens of microseconds."""
    return _quantity.quantity_text(value)


@dataclass(frozen=True)
class Amount:
    """Used of total, for one capacity or counter."""

    name: str
    used: Fraction
    total: Fraction

    def text(self) -> str:
        """`name used/total`."""
        return f"{self.name} {quantity_text(self.used)}/{quantity_text(self.total)}"


@dataclass(frozen=True)
class DeviceRow:
    """One device, as `devices` shows it."""

    node: str
    driver: str
    pool: str
    device: str
    attributes: Mapping[str, str]
    capacity: tuple[Amount, ...]
    counters: tuple[Amount, ...]
    taints: tuple[str, ...]
    health: str  # "" when no pod reports it
    holders: tuple[Holder, ...]
    shared: bool
    pool_note: str  # why the pool is not usable, "" when it is

    @property
    def allocated(self) -> bool:
        """Held by some claim (admin access aside)."""
        return any(not h.admin for h in self.holders)


def device_rows(inventory: Inventory, *, node: str | None = None, driver: str | None = None,
                keep: Callable[[Device], bool] | None = None) -> list[DeviceRow]:
    """The rows of the devices on `node` (and for all nodes), of `driver`, that `keep`
    keeps; sorted by node, driver, pool and device (numbers in names by value)."""
    rows = [device_row(inventory, d) for d in inventory.devices
            if (node is None or d.node == node) and (driver is None or d.driver == driver)
            and (keep is None or keep(d))]
    return sorted(rows, key=lambda r: (r.node, r.driver, natural(r.pool), natural(r.device)))


def device_row(inventory: Inventory, device: Device) -> DeviceRow:
    """The row of one device."""
    holders = tuple(inventory.holders.get(device.key, ()))
    return DeviceRow(
        node=device.node, driver=device.driver, pool=device.pool, device=device.name,
        attributes={k: attribute_text(v) for k, v in
                    sorted((device.spec.get("attributes") or {}).items())},
        capacity=capacity_usage(device, holders),
        counters=counter_usage(inventory, device),
        taints=tuple(taint_text(t) for t in device.spec.get("taints") or []),
        health=inventory.health.get(device.key, ""),
        holders=holders,
        shared=device.shared,
        pool_note=inventory.incomplete.get((device.driver, device.pool), ""),
    )


def capacity_usage(device: Device, holders: Iterable[Holder]) -> tuple[Amount, ...]:
    """Used/total of each capacity of the device."""
    counted = [h for h in holders if not h.admin]
    amounts = []
    for name, entry in sorted((device.spec.get("capacity") or {}).items()):
        total = quantity((entry or {}).get("value"))
        if device.shared:
            used = sum((h.consumed.get(name, Fraction(0)) for h in counted), Fraction(0))
        else:
            used = total if counted else Fraction(0)
        amounts.append(Amount(name, used, total))
    return tuple(amounts)


def counter_usage(inventory: Inventory, device: Device) -> tuple[Amount, ...]:
    """Used/total of each pool counter the device consumes."""
    pool = (device.driver, device.pool)
    totals = inventory.counters.get(pool, {})
    used = inventory.counters_used.get(pool, {})
    amounts = []
    for entry in device.spec.get("consumesCounters") or []:
        set_name = str(entry.get("counterSet", ""))
        for name in sorted(entry.get("counters") or {}):
            amounts.append(Amount(f"{set_name}/{name}",
                                  used.get(set_name, {}).get(name, Fraction(0)),
                                  totals.get(set_name, {}).get(name, Fraction(0))))
    return tuple(amounts)


def attribute_text(entry: Any) -> str:
    """An attribute's value as text: `H100`, `80`, `true`, `1.2.3`, `[a,b]`."""
    if not isinstance(entry, Mapping) or not entry:
        return str(entry)
    value = next(iter(entry.values()))
    if isinstance(value, list):
        return "[" + ",".join(_scalar(v) for v in value) + "]"
    return _scalar(value)


def _scalar(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def taint_text(taint: Mapping[str, Any]) -> str:
    """`key=value:Effect`."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def holder_text(holder: Holder) -> str:
    """`ns/claim -> pod,pod` (admin access and share marked)."""
    marks = (" (admin)" if holder.admin else "") + (" (share)" if holder.share_id else "")
    pods = ",".join(p.split("/", 1)[1] for p in holder.pods) or "(no pod)"
    return f"{holder.claim}{marks} -> {pods}"


@functools.lru_cache(maxsize=65536)  # pools and devices sort many times by few names
def natural(text: str) -> tuple[tuple[int, str], ...]:
    """A sort key that orders `gpu-2` before `gpu-10`."""
    return tuple((int(part), "") if part.isdigit() else (-1, part)
                 for part in re.split(r"(\d+)", text) if part)


def row_cells(row: DeviceRow, wide: bool) -> list[str]:
    """The table cells of a row: NODE DRIVER POOL DEVICE ATTRIBUTES CAPACITY COUNTERS
    TAINTS HEALTH HELD-BY (narrow: the first few attributes)."""
    attributes = [f"{k}={v}" for k, v in row.attributes.items()]
    if not wide and len(attributes) > SUMMARY_ATTRIBUTES:
        attributes = [*attributes[:SUMMARY_ATTRIBUTES], f"+{len(attributes) - SUMMARY_ATTRIBUTES}"]
    holders = [holder_text(h) for h in row.holders]
    return [row.node, row.driver, row.pool, row.device, " ".join(attributes) or "-",
            ", ".join(a.text() for a in row.capacity) or "-",
            ", ".join(a.text() for a in row.counters) or "-",
            ", ".join(row.taints) or "-", row.health or "-",
            "; ".join(holders) or ("-" if not row.pool_note else f"pool: {row.pool_note}")]


HEADERS = ["NODE", "DRIVER", "POOL", "DEVICE", "ATTRIBUTES", "CAPACITY", "COUNTERS",
           "TAINTS", "HEALTH", "HELD BY"]


def row_json(row: DeviceRow) -> JSON:
    """A row for `-o json`/`-o yaml` (quantities as Kubernetes quantity strings)."""
    return {
        "node": row.node, "driver": row.driver, "pool": row.pool, "device": row.device,
        "attributes": dict(row.attributes),
        "capacity": [_amount_json(a) for a in row.capacity],
        "counters": [_amount_json(a) for a in row.counters],
        "taints": list(row.taints),
        "health": row.health or None,
        "allocated": row.allocated,
        "multipleAllocations": row.shared,
        "poolIncomplete": row.pool_note or None,
        "holders": [{"claim": h.claim, "request": h.request, "shareID": h.share_id,
                     "adminAccess": h.admin, "pods": list(h.pods),
                     "consumedCapacity": {k: quantity_text(v) for k, v in h.consumed.items()}}
                    for h in row.holders],
    }


def _amount_json(amount: Amount) -> JSON:
    return {"name": amount.name, "used": quantity_text(amount.used),
            "total": quantity_text(amount.total)}
