"""What an operator (and later the metrics endpoint) can read about slice publishing."""

from __future__ import annotations

from dataclasses import dataclass, field

from driver.slices.dropped import DroppedFields


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
