"""The pools the publisher wants on the server, each validated before anything is written.

Invalid pools (local validation, `checks`) are reported and left as they are on the
server: their last valid slices stay published until the inventory is fixed. Each
slice's `validate_slice` result is kept and reused while that slice's content does not
change: validating 10,000 devices takes seconds, and one changed device should not.
"""

from __future__ import annotations

import logging
import threading

from simdra._driver.core.validation import FieldError, validate_slice
from simdra._driver.devices.model import Inventory
from simdra._driver.slices import naming
from simdra._driver.slices.checks import PoolProblem, pool_problems
from simdra._driver.slices.desired import DesiredPool, DesiredSlice, SliceLayout, desired_pools
from simdra._driver.slices.diff import SliceTarget, slice_object

# One logger for all of the publisher's lines, as before it was split by role.
# Logged once per change of a pool's problems (simdra.testing waits for it too).
INVALID_POOL = "is invalid and will not be published"
log = logging.getLogger("simdra._driver.slices.publisher")

_LOGGED_PROBLEMS = 20


class ValidatedPools:
    """The desired pools of the inventory being published and their validation problems.

    Worker-only, except that `problems` is changed holding `lock` (the publisher's
    condition), since `Publisher.stats()` reads it from other threads.
    """

    def __init__(self, driver: str, node: str, lock: threading.Condition) -> None:
        self._driver, self._node, self._lock = driver, node, lock
        self.desired: dict[str, DesiredPool] = {}
        self.layout = SliceLayout.SEPARATE  # set from the server's release before adopting
        self._inventory: Inventory | None = None
        self.problems: dict[str, list[PoolProblem]] = {}
        self._checked: dict[str, list[tuple[DesiredSlice, list[FieldError]]]] = {}

    def adopt(self, inventory: Inventory, node_uid: str | None) -> set[str]:
        """Adopt a new inventory; returns the pools whose desired slices changed (new,
        changed or gone), each validated again."""
        self._inventory = inventory
        new = desired_pools(inventory, self.layout)
        changed = {name for name, pool in new.items() if self.desired.get(name) != pool}
        changed |= set(self.desired) - set(new)
        for name in changed:
            if name in new:
                self._validate(new[name], node_uid)
            else:
                self._checked.pop(name, None)
                with self._lock:
                    self.problems.pop(name, None)
        self.desired = new
        return changed

    def relayout(self, layout: SliceLayout, node_uid: str | None) -> set[str]:
        """Place counter sets as `layout` says from now on; returns the pools whose
        desired slices changed with it."""
        self.layout = layout
        return set() if self._inventory is None else self.adopt(self._inventory, node_uid)

    def _validate(self, pool: DesiredPool, node_uid: str | None) -> None:
        problems = pool_problems(pool, self._slice_errors(pool, node_uid), self._driver)
        with self._lock:
            before = self.problems.pop(pool.name, [])
            if problems:
                self.problems[pool.name] = problems
        if problems and problems != before:
            log.error("pool %r %s (%d problems)", pool.name, INVALID_POOL, len(problems))
            for problem in problems[:_LOGGED_PROBLEMS]:
                log.error("  %s", problem)
        elif before and not problems:
            log.info("pool %r is valid again", pool.name)

    def _slice_errors(self, pool: DesiredPool, node_uid: str | None) -> list[list[FieldError]]:
        """`validate_slice` errors per slice, reusing those of slices that did not change."""
        count = len(pool.slices)
        width = naming.index_width(count)
        target = SliceTarget(self._driver, self._node, node_uid or "")
        previous = self._checked.get(pool.name, [])
        checked = []
        for i, desired in enumerate(pool.slices):
            if i < len(previous) and previous[i][0] == desired:
                errors = previous[i][1]
            else:
                name = naming.slice_name(i, width, self._driver, self._node, pool.name)
                errors = [error for part in desired.parts() for error in validate_slice(
                    slice_object(part, pool.name, 0, count, target, name))]
            checked.append((desired, errors))
        self._checked[pool.name] = checked
        return [errors for _, errors in checked]
