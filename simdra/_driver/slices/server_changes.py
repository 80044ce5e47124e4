"""What the server stored differently from what we sent, so that no write loop follows.

Fields the server drops (a disabled feature gate, an older API server) are reported
once per pool and set of fields, with the likely feature gates (`dropped`), and the
stored form is accepted: the next plan compares against what the server keeps, not
against what we would send, so it does not write the same thing again.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from simdra._driver.slices.desired import DesiredSlice
from simdra._driver.slices.diff import (
    AcceptedForm,
    SliceWrite,
    content_differences,
    normalized_content,
)
from simdra._driver.slices.dropped import DroppedFields, find_dropped, likely_gates

# One logger for all of the publisher's lines, as before it was split by role.
log = logging.getLogger("simdra._driver.slices.publisher")

JSON = dict[str, Any]


class ServerChanges:
    """Accepted stored forms per (pool, slice index) and each distinct dropped-field
    report. Worker-only, except that reports are added holding `lock` (the publisher's
    condition), since `Publisher.stats()` reads them from other threads."""

    def __init__(self, lock: threading.Condition) -> None:
        self._lock = lock
        self._accepted: dict[tuple[str, int], AcceptedForm] = {}
        self._dropped: dict[tuple[str, tuple[str, ...]], DroppedFields] = {}

    def accepted(self, pool: str) -> dict[int, AcceptedForm]:
        """Slice index -> the form the server keeps, for the slices of `pool` it changed."""
        return {i: a for (p, i), a in self._accepted.items() if p == pool}

    def forget(self, pool: str) -> None:
        """Drop the accepted forms of `pool` (its desired slices changed)."""
        self._accepted = {k: v for k, v in self._accepted.items() if k[0] != pool}

    def reports(self) -> tuple[DroppedFields, ...]:
        """Every distinct dropped-field report so far (read it holding the lock)."""
        return tuple(self._dropped.values())

    def check(self, write: SliceWrite, stored: JSON, desired: DesiredSlice) -> None:
        """Compare what the server stored with what we sent; report dropped fields once."""
        assert write.body is not None and write.index is not None
        stored_spec = stored.get("spec") or {}
        if not content_differences(stored_spec, desired):
            return
        # Whatever the server changed, compare against what it keeps from now on, so
        # that the next plan does not write the same thing again.
        self._accepted[(write.pool, write.index)] = AcceptedForm(
            sent=desired.spec_content(), stored=normalized_content(stored_spec)
        )
        paths = [p for p in find_dropped(write.body["spec"], stored_spec)
                 if not p.startswith("spec.pool")]
        key = (write.pool, tuple(paths))
        if not paths or key in self._dropped:
            log.debug("slice %r of pool %r stored with server-side changes; adopted",
                      stored["metadata"]["name"], write.pool)
            return
        report = DroppedFields(write.pool, str(stored["metadata"]["name"]), tuple(paths),
                               likely_gates(paths))
        log.warning("%s", report)
        with self._lock:
            self._dropped[key] = report
