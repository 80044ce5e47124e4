"""Capacity ledger: which claims hold which devices and shares on this node (pure).

Defence in depth (facts 2.3): the scheduler should never hand out an exclusive device
twice or overbook a shared one, but the node checks before it prepares. Admin access
results are monitoring access (facts 5.2): they consume nothing and block nobody.
The ledger holds no state of its own that the checkpoint lacks; after a restart it is
rebuilt from the checkpoint records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from driver.claims.errors import quantity_text
from driver.claims.plan import PreparedClaim, PreparedUnit

DeviceKey = tuple[str, str]  # (pool, device)


@dataclass(frozen=True)
class LedgerEntry:
    """One prepared unit as the ledger sees it."""

    claim_uid: str
    share_id: str | None
    exclusive: bool
    admin_access: bool
    consumed: Mapping[str, Fraction]

    @property
    def counts(self) -> bool:
        """Admin access entries neither consume capacity nor hold exclusivity."""
        return not self.admin_access


class CapacityLedger:
    """Per device, the prepared units of all claims; checks new claims against them."""

    def __init__(self) -> None:
        self._by_device: dict[DeviceKey, list[LedgerEntry]] = {}
        self._devices_of_claim: dict[str, set[DeviceKey]] = {}

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

    def used(self, pool: str, device: str) -> dict[str, Fraction]:
        """Capacity name -> amount consumed on a device by all counting shares."""
        return _sum(e.consumed for e in self.entries(pool, device) if e.counts)

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
            )
            self._by_device.setdefault((unit.pool, unit.device), []).append(entry)
            keys.add((unit.pool, unit.device))
        self._devices_of_claim[claim.claim.uid] = keys

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


def _sum(amounts: Iterable[Mapping[str, Fraction]]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for amount in amounts:
        for name, value in amount.items():
            total[name] = total.get(name, Fraction(0)) + value
    return total
