"""The Node's UID, which every slice we publish names as its owner.

Read before the first write, and re-read before recreating slices when it is more than
`max_age` (10 s) old, so that a re-created Node (new UID) does not make the garbage
collector delete every slice we publish (api-facts 6.3). While the Node cannot be read,
the work queue holds every pass back with backoff.

A UID the caller gave (`simdra fleet`, which just created or listed the Node) owns the
first publication of every pool however late it comes: a fleet starting 1,000 nodes
plans their pools more than 10 s after it created the Nodes (1,000 publisher threads
share one interpreter), and a re-read there would be one more GET per node. Once every
pool has been published, it is as old as it is (a later recreate re-reads it).
"""

from __future__ import annotations

import logging
import time

from simdra._driver.slices.api import ApiError, SliceApi
from simdra._driver.slices.backoff import Backoff
from simdra._driver.slices.stats import PublisherCounters
from simdra._driver.slices.workqueue import WorkQueue

# One logger for all of the publisher's lines, as before it was split by role.
log = logging.getLogger("simdra._driver.slices.publisher")


class NodeUid:
    """The owner UID for our slices, as last read (worker-only, but for `uid`, which
    `Publisher.stats()` reads)."""

    def __init__(
        self,
        api: SliceApi,
        queue: WorkQueue,
        counters: PublisherCounters,
        backoff: Backoff,
        node: str,
        max_age: float,
        known: str | None = None,
    ) -> None:
        self._api, self._queue, self._counters = api, queue, counters
        self._backoff, self._node, self._max_age = backoff, node, max_age
        # `known`: the caller just created or listed the Node, so the first writes need
        # no read of their own (a fleet starting 1,000 nodes saves 1,000 GETs).
        self.uid: str | None = known
        self._read_at = time.monotonic() if known else 0.0
        self._attempts = 0
        # The caller's UID, until every pool has been published once: never stale.
        self.given = known is not None

    @property
    def stale(self) -> bool:
        """Older than `max_age`: re-read it before creating slices (not while the
        caller's UID owns the first publication)."""
        return not self.given and time.monotonic() - self._read_at > self._max_age

    def ensure(self, pools: set[str], refresh: bool = False) -> bool:
        """Know the Node's UID (re-read it when `refresh`); on failure retry `pools` later
        and return False. A changed UID makes every pool be looked at again."""
        if self.uid is not None and not refresh:
            return True
        try:
            uid = self._api.node_uid()
        except ApiError as err:
            self._counters.count_error("node_missing" if err.kind == "not_found" else err.kind)
            delay = self._backoff.delay(self._attempts, err.retry_after)
            self._attempts += 1
            log.warning("cannot publish slices yet: %s; retrying in %.1fs", err, delay)
            self._queue.wait_for_node(pools, delay)
            return False
        if self.uid not in (None, uid):
            log.warning("Node %s has a new UID %s (was %s); re-owning slices",
                        self._node, uid, self.uid)
            self._queue.signal()
        self.uid, self._read_at, self._attempts = uid, time.monotonic(), 0
        return True
