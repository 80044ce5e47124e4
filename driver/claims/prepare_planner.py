"""Everything a prepare does before its first side effect: read the claim from the API
server, parse its allocation, plan it against the inventory (`driver.claims.plan`),
check it against the capacity ledger and give its devices to the device hook."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from driver.claims.allocation import parse_claim
from driver.claims.errors import ClaimError
from driver.claims.ledger import CapacityLedger
from driver.claims.plan import PreparedClaim, plan_prepare
from driver.claims.prepare_items import Progress
from driver.claims.rules import ClaimRules
from driver.claims.source import ClaimSource
from driver.claims.types import ClaimRef
from driver.devices.model import Inventory

InventoryProvider = Callable[[], Inventory]
# Called with (pool, device) for every device of a claim about to be prepared.
DeviceHook = Callable[[str, str], None]
# A claim as read from the API server, or the exception reading it raised.
Fetched = dict[str, Any] | Exception


@dataclass(frozen=True)
class PreparePlanner:
    """Reads and plans claims for the preparer; writes nothing."""

    driver_name: str
    source: ClaimSource
    inventory: InventoryProvider
    rules: ClaimRules
    device_hook: DeviceHook | None

    def fetch(self, claims: list[ClaimRef]) -> dict[str, Fetched]:
        """Each claim's JSON, or the exception reading it raised (reported later, as that
        claim's error)."""
        fetched: dict[str, Fetched] = {}
        for ref in claims:
            try:
                fetched[ref.uid] = self.source.get(ref.namespace, ref.name)
            except Exception as exc:  # becomes this claim's error, at step "fetch claim"
                fetched[ref.uid] = exc
        return fetched

    def plan(
        self, ref: ClaimRef, fetched: Fetched | None, progress: Progress, ledger: CapacityLedger
    ) -> PreparedClaim:
        """Fetch (unless `fetched`), parse, plan, check against `ledger`, device hook."""
        progress.step = "fetch claim"
        if fetched is None:  # recorded when prepare() looked, gone after the refresh
            fetched = self.source.get(ref.namespace, ref.name)
        if isinstance(fetched, Exception):
            raise fetched
        raw = fetched
        progress.step = "read allocation"
        allocation = parse_claim(raw, self.driver_name, ref)
        progress.step = "read inventory"
        inventory = self.inventory()
        progress.step = "plan"
        prepared = plan_prepare(allocation, inventory, self.driver_name, self.rules)
        progress.step = "check capacity"
        problems = ledger.check(prepared)
        if problems:
            raise ClaimError(f"{allocation.label}: " + "; ".join(problems))
        if self.device_hook is not None:
            progress.step = "device hook"
            self._run_device_hook(allocation.label, prepared)
        return prepared

    def _run_device_hook(self, label: str, prepared: PreparedClaim) -> None:
        """Give the hook each device once, before any side effect; its exception becomes
        this claim's error (fault injection uses this to fail or delay a prepare)."""
        assert self.device_hook is not None
        for pool, device in dict.fromkeys((u.pool, u.device) for u in prepared.units):
            try:
                self.device_hook(pool, device)
            except Exception as exc:  # reported as the claim's error
                raise ClaimError(f"{label}: {exc}") from exc
