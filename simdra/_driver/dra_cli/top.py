"""`kubectl dra top`: allocated against total devices, and capacity used against total,
per node, driver or DeviceClass (pure: from device rows), with a line for all of them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from simdra._driver.dra_cli.view import Amount, DeviceRow, natural, quantity_text

JSON = dict[str, Any]
TOTAL = "(all)"


@dataclass(frozen=True)
class GroupTotal:
    """The totals of one group of devices."""

    group: str
    devices: int
    allocated: int
    unhealthy: int
    capacity: tuple[Amount, ...]  # summed per capacity name

    @property
    def percent(self) -> int:
        """Allocated devices in percent, rounded down."""
        return 100 * self.allocated // self.devices if self.devices else 0


def group_totals(rows: Iterable[DeviceRow],
                 groups_of: Callable[[DeviceRow], Sequence[str]]) -> list[GroupTotal]:
    """The totals of each group (sorted) and last of all rows (TOTAL); a row may be in
    several groups (a device several classes match) and counts once in TOTAL."""
    members: dict[str, list[DeviceRow]] = {}
    every: list[DeviceRow] = []
    for row in rows:
        every.append(row)
        for group in groups_of(row):
            members.setdefault(group, []).append(row)
    found = [_total(group, members[group]) for group in sorted(members, key=natural)]
    return [*found, _total(TOTAL, every)]


def _total(group: str, rows: list[DeviceRow]) -> GroupTotal:
    used: dict[str, Fraction] = {}
    total: dict[str, Fraction] = {}
    for row in rows:
        for amount in row.capacity:
            used[amount.name] = used.get(amount.name, Fraction(0)) + amount.used
            total[amount.name] = total.get(amount.name, Fraction(0)) + amount.total
    return GroupTotal(
        group=group, devices=len(rows), allocated=sum(1 for r in rows if r.allocated),
        unhealthy=sum(1 for r in rows if r.health == "Unhealthy"),
        capacity=tuple(Amount(n, used[n], total[n]) for n in sorted(total)))


def headers(by: str) -> list[str]:
    """The table's header line for grouping `by` node, driver or class."""
    return [by.upper(), "DEVICES", "ALLOCATED", "%", "UNHEALTHY", "CAPACITY USED/TOTAL"]


def cells(total: GroupTotal) -> list[str]:
    """One table line."""
    return [total.group, str(total.devices), str(total.allocated), f"{total.percent}%",
            str(total.unhealthy), ", ".join(a.text() for a in total.capacity) or "-"]


def total_json(total: GroupTotal) -> JSON:
    """One group for `-o json`/`-o yaml`."""
    return {"group": total.group, "devices": total.devices, "allocated": total.allocated,
            "unhealthy": total.unhealthy,
            "capacity": [{"name": a.name, "used": quantity_text(a.used),
                          "total": quantity_text(a.total)} for a in total.capacity]}
