"""Everything a prepare does before its first side effect: read the claim from the API
server, parse its allocation, plan it against the inventory (`simdra._driver.claims.plan`),
check it against the capacity ledger and give its devices to the device hook.

Only `fetch` talks to the API server, and the preparer calls it outside its serialized
section; everything else works from what `fetch` returned, so no prepare or unprepare
ever waits for the API server on another call's behalf.

A record answers only for the allocation it was made for (`record_answers`): a claim
with a record is read too, and when the API server has it allocated other devices now,
it is planned afresh for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from simdra._driver.claims.allocation import parse_claim
from simdra._driver.claims.errors import ClaimError
from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan import PreparedClaim, plan_prepare
from simdra._driver.claims.prepare_items import PREPARER_LOG as log
from simdra._driver.claims.prepare_items import Fetched, Progress, label
from simdra._driver.claims.reconcile_plan import DeviceKey, allocated_devices
from simdra._driver.claims.rules import ClaimRules
from simdra._driver.claims.source import ClaimSource
from simdra._driver.claims.types import ClaimRef
from simdra._driver.core.textlimits import clip, one_line
from simdra._driver.devices.model import Inventory

# Fetched: what `fetch` gives per claim, re-exported for the preparer.
__all__ = ["FETCH_DEADLINE_S", "MAX_PARALLEL_FETCHES", "DeviceHook", "Fetched",
           "InventoryProvider", "PreparePlanner"]

InventoryProvider = Callable[[], Inventory]
# Called with (pool, device) for every device of a claim about to be prepared.
DeviceHook = Callable[[str, str], None]
# The claims of one call are read at once, so that a pod's N claims cost one read's time,
# not N (each read may take the API source's 20 s timeout): at most this many at once...
MAX_PARALLEL_FETCHES = 16
# ...and whatever is not read by then is its claim's error, so that even a call of more
# claims than that answers well inside the kubelet's 45 s deadline (facts: the kubelet
# cancels NodePrepareResources after 45 s), leaving the rest of it to the writes. A call
# that reads some claims again (`simdra._driver.claims.preparer`) shares this time among its rounds.
FETCH_DEADLINE_S = 25.0


@dataclass(frozen=True)
class PreparePlanner:
    """Reads and plans claims for the preparer; writes nothing."""

    driver_name: str
    source: ClaimSource
    inventory: InventoryProvider
    rules: ClaimRules
    device_hook: DeviceHook | None
    metadata_root: str | None = None  # device metadata on: where its files go

    def fetch(
        self, claims: list[ClaimRef], deadline_s: float = FETCH_DEADLINE_S
    ) -> dict[str, Fetched]:
        """Each claim's JSON, or the exception reading it raised (reported later, as that
        claim's error). Read in parallel (MAX_PARALLEL_FETCHES at once); a claim not read
        within `deadline_s` gets a ClaimError saying so, and with no time left none is
        read. Call it outside the serialized section."""
        if not claims:
            return {}
        if deadline_s <= 0:
            return {ref.uid: _no_time_left(ref) for ref in claims}
        if len(claims) <= 1 and deadline_s >= FETCH_DEADLINE_S:
            # The source's own timeout is within the deadline: no thread needed. A later
            # round with less time left reads in a thread it need not wait for.
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

    def record_answers(self, ref: ClaimRef, fetched: Fetched, recorded: PreparedClaim) -> bool:
        """Whether the claim's record answers this prepare of it, given the claim as read.

        Yes when the read failed (what the API server holds now is unknown, and unknown
        is no reason to undo a prepared claim), or when the claim read is the recorded one
        (same namespace, name and UID) and this driver's allocation in it names the
        recorded (pool, device, shareID)s. Otherwise the claim is to be planned from the
        read, which refuses another claim under the name; a reallocation of the same
        claim is logged here, naming both device sets."""
        if isinstance(fetched, Exception):
            return True
        if _identity(fetched) != ref:
            return False
        status = fetched.get("status")
        allocation = status.get("allocation") if isinstance(status, Mapping) else None
        now = allocated_devices(allocation if isinstance(allocation, Mapping) else {},
                                self.driver_name)
        recorded_keys = frozenset(unit.key for unit in recorded.units)
        if now == recorded_keys:
            return True
        log.warning(
            "%s is allocated other devices than its checkpoint record: recorded %s, "
            "allocated now %s; preparing it for the allocation it has now",
            label(ref), _devices(recorded_keys), _devices(now),
        )
        return False

    def check_ready(self, recorded: PreparedClaim, progress: Progress) -> None:
        """ClaimError unless every device the record holds is on the node now.

        A prepare the record answers is the kubelet asking again after its own restart
        or, before it restarts the pods, after a reboot (helper v0.38's contract): the
        place to find that a device went away, rather than to answer with a CDI device
        that names nothing and let the container fail to start."""
        progress.step = "check devices ready"
        inventory = self.inventory()
        gone = sorted({f"{u.pool}/{u.device}" for u in recorded.units
                       if inventory.device(u.pool, u.device) is None})
        if gone:
            shown = ", ".join(one_line(name) for name in gone[:_DEVICES_SHOWN])
            more = f" and {len(gone) - _DEVICES_SHOWN} more" if len(gone) > _DEVICES_SHOWN else ""
            which = f"devices {shown}{more} are" if len(gone) > 1 else f"device {shown} is"
            raise ClaimError(f"{label(recorded.claim)}: prepared, but {which} no longer on "
                             "this node; not ready (an unprepare of the claim releases it)")

    def plan(
        self, ref: ClaimRef, fetched: Fetched, progress: Progress, ledger: CapacityLedger
    ) -> PreparedClaim:
        """Parse the claim as read, plan it, check it against `ledger` (which may hold
        an older plan of the same claim: that one is left out), device hook."""
        progress.step = "fetch claim"
        if isinstance(fetched, Exception):
            raise fetched
        raw = fetched
        progress.step = "read allocation"
        allocation = parse_claim(raw, self.driver_name, ref)
        progress.step = "read inventory"
        inventory = self.inventory()
        progress.step = "plan"
        prepared = plan_prepare(allocation, inventory, self.driver_name, self.rules,
                                self.metadata_root)
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


def _identity(raw: Any) -> ClaimRef | None:
    """The claim's namespace, name and UID as the API server gave them, if all are set."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(meta, Mapping):
        return None
    namespace, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
    if isinstance(namespace, str) and isinstance(name, str) and isinstance(uid, str):
        return ClaimRef(namespace, name, uid)
    return None


def _devices(keys: frozenset[DeviceKey]) -> str:
    """A device set as one log line shows it: `[pool/device, pool/device share S]`,
    sorted, the first few only (the names come from the API server)."""
    shown = sorted(keys, key=lambda key: (key[0], key[1], key[2] or ""))
    names = [
        f"{one_line(pool)}/{one_line(device)}" + (f" share {one_line(share)}" if share else "")
        for pool, device, share in shown[:_DEVICES_SHOWN]
    ]
    more = len(shown) - _DEVICES_SHOWN
    return "[" + ", ".join(names) + (f", and {more} more" if more > 0 else "") + "]"


_DEVICES_SHOWN = 8


def _no_time_left(ref: ClaimRef) -> ClaimError:
    return ClaimError(
        f"claim {clip(ref.namespace)}/{clip(ref.name)}: not read again from the API server: "
        f"the call's {FETCH_DEADLINE_S:g} s for reads are spent; the kubelet retries"
    )


def _late(ref: ClaimRef, deadline_s: float) -> ClaimError:
    return ClaimError(
        f"claim {clip(ref.namespace)}/{clip(ref.name)}: not read from the API server within "
        f"{deadline_s:g} s (with the call's other claims); the kubelet retries"
    )
