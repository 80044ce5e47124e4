"""What an operator (and later the metrics endpoint) can read about slice publishing:
the live counters the publisher's threads bump, and the snapshot `Publisher.stats()`
returns."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from simdra._driver.slices.dropped import DroppedFields


@dataclass(frozen=True)
class PublisherStats:
    """A consistent snapshot of the publisher's counters and state."""

    writes: dict[str, int] = field(default_factory=dict)  # verb -> successful writes
    errors: dict[str, int] = field(default_factory=dict)  # error kind -> count
    synced: bool = False  # every valid pool is published as desired right now
    last_sync_time: float | None = None  # time.time() when `synced` last became true
    generations: dict[str, int] = field(default_factory=dict)  # pool -> published generation
    slices: dict[str, int] = field(default_factory=dict)  # pool -> slices stored now
    dropped_fields: tuple[DroppedFields, ...] = ()  # each distinct report once
    validation_problems: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pool ->
    node_uid: str | None = None
    relists: int = 0  # full lists of our slices (start, watch expiry, watch errors)
    reconciles: int = 0  # pool reconcile passes (most of them write nothing)

    @property
    def total_writes(self) -> int:
        """All successful API writes (create + update + delete)."""
        return sum(self.writes.values())


class PublisherCounters:
    """The publisher's counters, bumped by its threads under the publisher's condition
    (`lock`), which `Publisher.stats()` holds while it copies them."""

    def __init__(self, lock: threading.Condition) -> None:
        self._lock = lock
        self.writes = {"create": 0, "update": 0, "delete": 0}
        self.errors: dict[str, int] = {}
        self.relists = 0
        self.reconciles = 0

    def count_write(self, verb: str) -> None:
        """One successful write (create, update or delete)."""
        with self._lock:
            self.writes[verb] += 1

    def count_error(self, kind: str) -> None:
        """One failure of `kind` (an `ApiError.kind`, or internal, watch_closed...)."""
        with self._lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def count_relist(self) -> None:
        """One full list of our slices."""
        with self._lock:
            self.relists += 1

    def count_reconcile(self) -> None:
        """One pool reconcile pass."""
        with self._lock:
            self.reconciles += 1
