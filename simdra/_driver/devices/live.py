"""The node's devices as they are now, kept current while the plugin runs.

`node_view` (pure) turns what the backend discovered, the injected faults and the claims
prepared on the node into what the scheduler and the kubelet must see: the inventory to
publish (removed devices dropped, unhealthy ones tainted) and the full health list.
`LiveDevices` (side effects) re-runs it when something changed: a rescan found a
different inventory, the fault file changed, or a prepared device vanished.

Idle is meant to cost nothing: a rescan first compares the backend's change stamp
(`change_stamp()`, see `simdra._driver.devices.stamps`) with the one of the last discover and
skips the discover while it is equal, except once every `full_rescan_interval` (what
a stamp cannot see, such as a NIC's link speed, is found then). Between rescans the
thread sleeps until the inventory or fault file changes (inotify, `file_events`), not
on a timer; it polls every `tick` only where files cannot be watched, or while prepared
devices are missing (an unprepare then changes the health list).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path

from simdra._driver.core.health import DeviceHealth, HealthStatus
from simdra._driver.devices.backend import DeviceBackend
from simdra._driver.devices.faults import FaultFile, FaultState, apply_removals, health_of
from simdra._driver.devices.file_events import FileEvents
from simdra._driver.devices.model import Device, Inventory, compact
from simdra._driver.devices.stamps import FileStamp, file_stamp

log = logging.getLogger(__name__)

DeviceKey = tuple[str, str]  # (pool, device)

# The kubelet marks a device Unknown when not reported for this long; the health stream
# re-sends the full list three times as often.
HEALTH_TIMEOUT_SECONDS = 30
VANISHED_MESSAGE = "device disappeared from the node while prepared for a claim"
# A full discover at least this often even when the backend's stamp says unchanged.
FULL_RESCAN_SECONDS = 300.0


@dataclass(frozen=True)
class NodeView:
    """What to publish and what to report as health."""

    published: Inventory
    health: tuple[DeviceHealth, ...]


def unhealthy_taint(driver_name: str) -> dict[str, str]:
    """The taint an unhealthy device carries in its ResourceSlice."""
    return {"key": f"{driver_name}/unhealthy", "value": "true", "effect": "NoSchedule"}


def node_view(discovered: Inventory, faults: FaultState, prepared: Iterable[DeviceKey],
              driver_name: str) -> NodeView:
    """Published inventory and health list for this moment (pure)."""
    present = apply_removals(discovered, faults)
    health = [_with_timeout(h) for h in health_of(present, faults)]
    unhealthy = {(h.pool_name, h.device_name) for h in health
                 if h.health == HealthStatus.UNHEALTHY}
    known = {(p.name, d.name) for p, d in present.devices()}
    for pool, device in sorted(set(prepared) - known):
        health.append(_with_timeout(DeviceHealth(pool, device, HealthStatus.UNHEALTHY,
                                                 message=VANISHED_MESSAGE)))
    return NodeView(_tainted(present, unhealthy, unhealthy_taint(driver_name)), tuple(health))


def _with_timeout(health: DeviceHealth) -> DeviceHealth:
    return DeviceHealth(health.pool_name, health.device_name, health.health,
                        timeout_seconds=HEALTH_TIMEOUT_SECONDS, message=health.message)


def _tainted(inventory: Inventory, unhealthy: set[DeviceKey], taint: dict[str, str]) -> Inventory:
    if not unhealthy:
        return inventory
    return Inventory(pools=tuple(
        dataclasses.replace(pool, devices=tuple(
            _taint(d, taint) if (pool.name, d.name) in unhealthy else d
            for d in pool.devices))
        for pool in inventory.pools))


def _taint(device: Device, taint: dict[str, str]) -> Device:
    spec = device.to_json()
    taints = [t for t in spec.get("taints", []) if t.get("key") != taint["key"]]
    spec["taints"] = [*taints, dict(taint)]
    return dataclasses.replace(device, spec=spec)


class LiveDevices:
    """Keeps a NodeView current and hands every new one to `on_change`.

    `poll()` does one round (the background thread calls it every `tick` seconds):
    rescan when the interval elapsed or the inventory file changed, re-read injected
    faults, notice prepared devices that vanished, and recompute only when one of these
    changed. A rescan whose change stamp equals the last discover's skips the discover
    (see the module docstring). A failed rescan keeps the last good inventory.
    """

    def __init__(self, backend: DeviceBackend, driver_name: str, *,
                 on_change: Callable[[NodeView], None],
                 prepared: Callable[[], Iterable[DeviceKey]] = tuple,
                 faults: FaultFile | None = None, watched_file: Path | None = None,
                 rescan_interval: float = 10.0, tick: float = 0.5,
                 full_rescan_interval: float = FULL_RESCAN_SECONDS,
                 shape: Callable[[Inventory], Inventory] | None = None) -> None:
        self._backend = backend
        # What the plugin makes of each discover before anyone sees it (list attributes
        # folded to scalars without --list-attributes): the published and prepared view.
        self._shape = shape or (lambda inventory: inventory)
        self._driver = driver_name
        self._on_change = on_change
        self._prepared = prepared
        self._faults = faults
        self._watched = watched_file
        self._interval = rescan_interval
        self._tick = tick
        self._full_interval = full_rescan_interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._events: FileEvents | None = None
        self._stamp = self._change_stamp()  # before the discover: a change in between shows
        self._discovered = compact(self._discover())  # errors here stop the plugin
        self._scanned_at = self._discovered_at = time.monotonic()
        self._file_identity = self._identity()
        self._set_view(self._compute())
        self._missing = self._vanished()
        self._pending = False  # a change noticed but not yet handed to `on_change`

    def start(self) -> None:
        """Poll in a background thread until `stop()`."""
        self._events = self._file_events()
        self._thread = threading.Thread(target=self._loop, name="live-devices", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the background thread."""
        self._stop.set()
        if self._events is not None:
            self._events.interrupt()
        if self._thread is not None:
            self._thread.join()
        if self._events is not None:
            self._events.close()

    def _file_events(self) -> FileEvents | None:
        """Wake-ups for the watched files; None when there are none or inotify fails
        (then the thread polls every tick)."""
        files = [f for f in (self._watched, self._faults.path if self._faults else None) if f]
        if not files:
            return None
        try:
            return FileEvents(files)
        except OSError as err:
            log.info("cannot watch %s for changes (%s); polling every %.1f s",
                     ", ".join(map(str, files)), err, self._tick)
            return None

    def poll(self) -> bool:
        """One round; True when a new view was handed to `on_change`.

        A change stays pending until `on_change` took it: a round that fails after
        noticing a change (or whose `on_change` fails) leaves it to the next round.
        """
        if self._rescan_if_due():
            self._pending = True
        if self._faults is not None and self._faults.load_if_changed() is not None:
            self._pending = True
        missing = self._vanished()
        if missing != self._missing:
            self._missing, self._pending = missing, True
        if not self._pending:
            return False
        view = self._compute()
        changed = view != self.view
        if changed:
            self._on_change(view)
            self._set_view(view)
        self._pending = False
        return changed

    def _loop(self) -> None:
        while not self._sleep():
            try:
                self.poll()
            except Exception:  # the plugin keeps serving with the last good view
                log.exception("device rescan failed; keeping the last good inventory")

    def _sleep(self) -> bool:
        """Until the next rescan is due (a tick at least) or a watched file changed;
        True once stopped. Ticks while files cannot be watched or devices are missing."""
        due = self._interval - (time.monotonic() - self._scanned_at) + 0.005  # then due
        timeout = max(self._tick, due)
        watched = self._watched is not None or self._faults is not None
        if self._missing or (watched and self._events is None):
            timeout = self._tick
        if self._events is not None:
            self._events.wait(timeout)
            return self._stop.is_set()
        return self._stop.wait(timeout)

    def _rescan_if_due(self) -> bool:
        identity = self._identity()
        now = time.monotonic()
        if now - self._scanned_at < self._interval and identity == self._file_identity:
            return False
        self._scanned_at, self._file_identity = now, identity
        stamp = self._change_stamp()
        if (stamp is not None and stamp == self._stamp
                and now - self._discovered_at < self._full_interval):
            return False
        try:
            discovered = self._discover()
        except Exception as err:  # a bad edit must not take devices away
            log.error("device rescan failed, keeping the last good inventory: %s", err)
            return False
        self._stamp, self._discovered_at = stamp, now
        if discovered == self._discovered:
            return False
        log.info("device inventory changed: %d devices now",
                 sum(len(p.devices) for p in discovered.pools))
        self._discovered = compact(discovered)
        return True

    def _set_view(self, view: NodeView) -> None:
        self.view = view
        self._present = {pool.name: pool.device_names() for pool in view.published.pools}

    def _vanished(self) -> frozenset[DeviceKey]:
        # Every tick: one lookup per prepared device (the ledger keeps them as a set),
        # where walking every prepared claim's units cost a millisecond per 1,000 claims.
        present, nothing = self._present, frozenset[str]()
        return frozenset((pool, device) for pool, device in self._prepared()
                         if device not in present.get(pool, nothing))

    def _discover(self) -> Inventory:
        return self._shape(self._backend.discover())

    def _compute(self) -> NodeView:
        faults = self._faults.current() if self._faults is not None else FaultState()
        return node_view(self._discovered, faults, self._prepared(), self._driver)

    def _change_stamp(self) -> Hashable | None:
        """The backend's stamp; None (always discover) when it has none or it failed."""
        change_stamp = getattr(self._backend, "change_stamp", None)
        if change_stamp is None:
            return None
        try:
            stamp: Hashable | None = change_stamp()
        except Exception as err:  # a stamp is an optimisation: discover instead
            log.debug("change stamp failed, discovering: %s", err)
            return None
        return stamp

    def _identity(self) -> FileStamp | None:
        return file_stamp(self._watched) if self._watched is not None else None
