"""Sending a pool plan's writes: deletes, then updates, then creates, each phase in parallel.

The order within a phase does not matter to consumers, so its writes go out several at
a time (`concurrency`): a kubelet wiping the node's slices then costs round trips in
parallel, not in sequence. Deterministic slice names (`naming`) make creates idempotent,
so a lost create response cannot publish devices twice. Every stored object goes into
`SliceCache` at once, so the next plan never repeats a write. After a conflict the
slice is re-read; a name held by something not ours is avoided from then on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from simdra._driver.slices.api import ApiError, SliceApi
from simdra._driver.slices.desired import DesiredPool
from simdra._driver.slices.diff import PoolPlan, SliceWrite
from simdra._driver.slices.observed import SliceCache
from simdra._driver.slices.server_changes import ServerChanges
from simdra._driver.slices.stats import PublisherCounters

# One logger for all of the publisher's lines, as before it was split by role.
log = logging.getLogger("simdra._driver.slices.publisher")

JSON = dict[str, Any]
QUICK_RETRY_KINDS = frozenset({"conflict", "already_exists", "not_found"})


class SliceWriter:
    """Executes plans against the API and keeps the cache, counters and server-change
    records current. Runs on the worker thread; only `_send` runs on the write pool's
    threads. `taken_names` (worker-only) are names held by slices that are not ours."""

    def __init__(
        self,
        api: SliceApi,
        cache: SliceCache,
        counters: PublisherCounters,
        server_changes: ServerChanges,
        concurrency: int,
    ) -> None:
        self._api, self._cache, self._counters = api, cache, counters
        self._server_changes = server_changes
        self._concurrency = max(1, concurrency)
        self.taken_names: set[str] = set()

    def execute(self, plan: PoolPlan, desired: DesiredPool | None, stop: threading.Event) -> bool:
        """Send the plan phase by phase; False when `stop` cut it short. Raises the
        `ApiError` to handle after the first phase with a failed write."""
        for phase in _phases(plan.writes):
            if stop.is_set():
                return False
            self._execute_phase(phase, desired)
        return True

    def reread(self, err: ApiError) -> None:
        """After a conflict, refresh the slice named in the failed action from the server."""
        name = err.action.rsplit(" ", 1)[-1]
        try:
            current = self._api.get_slice(name)
        except ApiError as again:
            log.info("re-reading slice %r failed: %s", name, again)
            return
        if current is None:
            self._cache.remove(name, None)
            return
        ours = (current["spec"].get("driver") == self._api.driver
                and current["spec"].get("nodeName") == self._api.node)
        if ours and not current["metadata"].get("deletionTimestamp"):
            self._cache.put(current)
        else:
            self.taken_names.add(name)  # create the slice under a generated name instead

    def _execute_phase(self, writes: list[SliceWrite], desired: DesiredPool | None) -> None:
        """Send one phase's writes, several at a time. Bookkeeping stays on this thread;
        errors are raised after the whole phase."""
        if len(writes) == 1 or self._concurrency == 1:
            for write in writes:
                self._record(write, self._send(write, desired), desired)
            return
        errors: list[ApiError] = []
        with ThreadPoolExecutor(min(self._concurrency, len(writes)),
                                thread_name_prefix="slice-write") as sender:
            futures = [(write, sender.submit(self._send, write, desired)) for write in writes]
            for write, future in futures:
                try:
                    self._record(write, future.result(), desired)
                except ApiError as err:
                    errors.append(err)
        if errors:
            raise self._worst_of(errors)

    def _worst_of(self, errors: list[ApiError]) -> ApiError:
        """Count every failed write of a phase; the one to handle is the one asking for
        the longest wait (a 429 with Retry-After), else the first."""
        worst = max(errors, key=lambda err: err.retry_after or 0.0)
        for err in errors:
            if err is not worst:
                self._counters.count_error(err.kind)
                if err.kind in QUICK_RETRY_KINDS:
                    self.reread(err)
        return worst

    def _send(self, write: SliceWrite, desired: DesiredPool | None) -> JSON | None:
        """The API call of one write: the stored object (its devices that equal the
        desired ones are those objects), or None for a delete."""
        log.debug("%s slice %r of pool %r (%s)", write.verb, write.name, write.pool,
                  write.reason)
        if write.verb == "delete":
            try:
                self._api.delete(write.name, write.uid, write.resource_version)
            except ApiError as err:
                if err.kind != "not_found":
                    raise
            return None
        assert write.body is not None and write.index is not None
        known = None
        if desired is not None and write.index < len(desired.slices):
            known = {str(d.get("name")): d for d in desired.slices[write.index].devices}
        if write.verb == "update":
            return self._api.replace(write.body, known)
        return self._api.create(write.body, known)

    def _record(self, write: SliceWrite, stored: JSON | None, desired: DesiredPool | None) -> None:
        """Count a sent write and keep the observed cache and server changes current."""
        if write.verb == "delete":
            self._counters.count_write("delete")
            self._cache.remove(write.name, write.uid)
            return
        assert stored is not None and desired is not None and write.index is not None
        self._counters.count_write(write.verb)
        self._cache.put(stored)
        self._server_changes.check(write, stored, desired.slices[write.index])


def _phases(writes: Iterable[SliceWrite]) -> list[list[SliceWrite]]:
    """Consecutive writes of the same verb, in plan order (deletes, updates, creates)."""
    phases: list[list[SliceWrite]] = []
    for write in writes:
        if phases and phases[-1][0].verb == write.verb:
            phases[-1].append(write)
        else:
            phases.append([write])
    return phases
