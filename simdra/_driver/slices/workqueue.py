"""The publisher's work queue: what is pending, when the worker runs next, when it is synced.

Work comes from `Publisher.update(inventory)`, from watch events on our slices and from
retries. Signals are debounced (`debounce`, 0.1 s by default, but never more than
`max_delay` after the first signal), so the kubelet deleting all slices at start costs
one pass, and deleted slices come back after the debounce, not after 30 s as with the
Go helper (api-facts 6.3). Retries are kept per pool (`retry`), so one pool's trouble does
not delay another; while the Node cannot be read, no pass runs at all (`wait_for_node`).
Nothing runs before the first list of our slices. A quiet node makes no API calls
besides the idle watch, and no CPU: the worker sleeps on the condition.

Every field here is guarded by the condition passed in, which the publisher shares with
its counters and reports so that `stats()` reads one consistent snapshot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from simdra._driver.devices.model import Inventory


@dataclass
class Work:
    """Work taken by the worker in one pass."""

    pools: set[str] = field(default_factory=set)
    all_pools: bool = False
    inventory: Inventory | None = None


class WorkQueue:
    """Pending work for the publisher's worker, with debounce and per-pool retry times.

    Producers (`update`, the watcher, the worker itself) call `signal`, `retry`,
    `wait_for_node` and `mark_listed`; the worker blocks in `take` and reports the end
    of each pass with `finish_pass`.
    """

    def __init__(
        self,
        cond: threading.Condition,
        stop: threading.Event,
        inventory: Inventory,
        debounce: float,
        max_delay: float,
    ) -> None:
        self._cond, self._stop = cond, stop
        self._debounce, self._max_delay = debounce, max_delay
        # All guarded by _cond.
        self._inventory_pending: Inventory | None = inventory
        self._dirty: set[str] = set()
        self._dirty_all = False
        self._first_signal: float | None = None
        self._last_signal = 0.0
        self._urgent = False
        self._retry_at: dict[str, float] = {}
        self._node_wait_until = 0.0
        self._listed = False
        self._synced = False
        self._last_sync_time: float | None = None

    @property
    def synced(self) -> bool:
        """Every valid pool published as desired (read it holding the condition)."""
        return self._synced

    @property
    def last_sync_time(self) -> float | None:
        """time.time() when `synced` last became true (read it holding the condition)."""
        return self._last_sync_time

    # --- producers ----------------------------------------------------------------

    def set_inventory(self, inventory: Inventory) -> None:
        """Make `inventory` the one to publish on the next pass."""
        with self._cond:
            self._inventory_pending = inventory
            self.signal_locked(())

    def signal(self, pools: Iterable[str] | None = None, urgent: bool = False) -> None:
        """Record work: `pools` to look at (None: every pool); `urgent` skips the debounce."""
        with self._cond:
            self.signal_locked(pools, urgent)

    def signal_locked(self, pools: Iterable[str] | None = None, urgent: bool = False) -> None:
        """`signal` for a caller that holds the condition."""
        if pools is None:
            self._dirty_all = True
        else:
            self._dirty |= set(pools)
        now = time.monotonic()
        if self._first_signal is None:
            self._first_signal = now
        self._last_signal = now
        self._urgent = self._urgent or urgent
        self._synced = False
        self._cond.notify_all()

    def retry(self, pool: str, delay: float) -> None:
        """Look at `pool` again in `delay` seconds (other pools are not held up)."""
        with self._cond:
            self._retry_at[pool] = time.monotonic() + delay
            self._cond.notify_all()

    def retry_all(self, pools: Iterable[str], delay: float) -> None:
        """Look at every one of `pools` again in `delay` seconds."""
        with self._cond:
            for pool in pools:
                self._retry_at[pool] = time.monotonic() + delay

    def wait_for_node(self, pools: Iterable[str], delay: float) -> None:
        """Run no pass for `delay` seconds (the Node is unreadable), then retry `pools`."""
        with self._cond:
            self._node_wait_until = time.monotonic() + delay
            self._dirty |= set(pools)
            self._first_signal = self._first_signal or time.monotonic()

    def mark_listed(self, changed: set[str]) -> None:
        """A list of our slices completed: the first one starts the work, a later one
        signals the pools whose slices it found changed."""
        with self._cond:
            first = not self._listed
            self._listed = True
            if first:
                self.signal_locked()
            elif changed:
                self.signal_locked(changed)

    def wake(self) -> None:
        """Wake every waiter (used when stopping)."""
        with self._cond:
            self._cond.notify_all()

    # --- the worker ---------------------------------------------------------------

    def take(self) -> Work | None:
        """Block until there is work; None once stopping."""
        with self._cond:
            while not self._stop.is_set():
                now = time.monotonic()
                ready = self._ready_at(now)
                if ready is not None and ready <= now:
                    due = {p for p, t in self._retry_at.items() if t <= now}
                    for pool in due:
                        del self._retry_at[pool]
                    work = Work(self._dirty | due, self._dirty_all, self._inventory_pending)
                    self._dirty, self._dirty_all = set(), False
                    self._inventory_pending = None
                    self._first_signal, self._urgent = None, False
                    return work
                self._cond.wait(None if ready is None else ready - now)
        return None

    def due(self, pools: set[str], now: float) -> set[str]:
        """Those of `pools` that no retry time holds back at `now`."""
        with self._cond:
            return {p for p in pools if self._retry_at.get(p, 0.0) <= now}

    def finish_pass(self, all_clean: Callable[[], bool]) -> None:
        """Mark synced when nothing is pending and `all_clean()` (every valid pool's last
        plan was empty); wakes `wait_synced` callers either way."""
        with self._cond:
            idle = not (self._dirty or self._dirty_all or self._retry_at
                        or self._inventory_pending is not None)
            synced = idle and all_clean()
            if synced and not self._synced:
                self._last_sync_time = time.time()
            self._synced = synced
            self._cond.notify_all()

    def wait_synced(self, timeout: float | None) -> bool:
        """Block until synced; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._synced, timeout)

    def _ready_at(self, now: float) -> float | None:
        """When the worker should run next (None: only when signalled)."""
        if not self._listed:
            return None
        when: float | None = None
        if self._dirty or self._dirty_all or self._inventory_pending is not None:
            first = now if self._first_signal is None else self._first_signal
            when = now if self._urgent else min(self._last_signal + self._debounce,
                                                 first + self._max_delay)
        if self._retry_at:
            first_retry = min(self._retry_at.values())
            when = first_retry if when is None else min(when, first_retry)
        if when is not None:
            when = max(when, self._node_wait_until)
        return when
