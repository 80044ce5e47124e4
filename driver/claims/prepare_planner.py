"""Everything a prepare does before its first side effect: read the claim from the API
server, parse its allocation, plan it against the inventory (`driver.claims.plan`),
check it against the capacity ledger and give its devices to the device hook."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
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
from driver.core.textlimits import clip
from driver.devices.model import Inventory

InventoryProvider = Callable[[], Inventory]
# Called with (pool, device) for every device of a claim about to be prepared.
DeviceHook = Callable[[str, str], None]
# A claim as read from the API server, or the exception reading it raised.
Fetched = dict[str, Any] | Exception
# The claims of one call are read at once, so that a pod's N claims cost one read's time,
# not N (each read may take the API source's 20 s timeout): at most this many at once...
MAX_PARALLEL_FETCHES = 16
# ...and whatever is not read by then is its claim's error, so that even a call of more
# claims than that answers well inside the kubelet's 45 s deadline (facts: the kubelet
# cancels NodePrepareResources after 45 s), leaving the rest of it to the writes.
FETCH_DEADLINE_S = 25.0


@dataclass(frozen=True)
class PreparePlanner:
    """Reads and plans claims for the preparer; writes nothing."""

    driver_name: str
    source: ClaimSource
    inventory: InventoryProvider
    rules: ClaimRules
    device_hook: DeviceHook | None

    def fetch(
        self, claims: list[ClaimRef], deadline_s: float = FETCH_DEADLINE_S
    ) -> dict[str, Fetched]:
        """Each claim's JSON, or the exception reading it raised (reported later, as that
        claim's error). Read in parallel (MAX_PARALLEL_FETCHES at once); a claim not read
        within `deadline_s` gets a ClaimError saying so."""
        if len(claims) <= 1:
            return {ref.uid: self._fetch_one(ref) for ref in claims}
        pool = ThreadPoolExecutor(
            min(len(claims), MAX_PARALLEL_FETCHES), thread_name_prefix="fetch-claim"
        )
        try:
            futures = {ref.uid: (ref, pool.submit(self._fetch_one, ref)) for ref in claims}
            done, _ = wait([f for _, f in futures.values()], timeout=deadline_s)
            return {
                uid: future.result() if future in done else _late(ref, deadline_s)
                for uid, (ref, future) in futures.items()
            }
        finally:
            # a read still running ends by its own timeout; nobody waits for it
            pool.shutdown(wait=False, cancel_futures=True)

    def _fetch_one(self, ref: ClaimRef) -> Fetched:
        try:
            return self.source.get(ref.namespace, ref.name)
        except Exception as exc:  # becomes this claim's error, at step "fetch claim"
            return exc

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


def _late(ref: ClaimRef, deadline_s: float) -> ClaimError:
    return ClaimError(
        f"claim {clip(ref.namespace)}/{clip(ref.name)}: not read from the API server within "
        f"{deadline_s:g} s (with the call's other claims); the kubelet retries"
    )
