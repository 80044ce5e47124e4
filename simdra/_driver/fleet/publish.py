"""One slice publisher per played node (side effects).

Each node gets simdra's own `Publisher`, the one `simdra run` uses, over the fleet's
shared client: same slice names, splitting, generations and ownerReferences to the
Node; after a restart it adopts the node's slices (no duplicates, generations go on).
All of them share one list and watch of the driver's slices (`SliceFeed`): one
connection and one thread for the fleet instead of one per node.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

from simdra._driver.api import Inventory
from simdra._driver.fleet import retry
from simdra._driver.fleet.metrics import FleetMetrics
from simdra._driver.kubeapi.client import RestClient
from simdra._driver.kubeapi.errors import ApiStatusError
from simdra._driver.slices.backoff import Backoff
from simdra._driver.slices.feed import SliceFeed
from simdra._driver.slices.publisher import Publisher

log = logging.getLogger("simdra._driver.fleet")
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


class FleetPublishers:
    """The publishers of the played nodes, by node name."""

    def __init__(self, client: RestClient, driver: str, *, backoff: Backoff | None = None,
                 watch_timeout: int = 300) -> None:
        self._client, self._driver = client, driver
        self._backoff, self._watch_timeout = backoff, watch_timeout
        self._lock = threading.Lock()
        self._publishers: dict[str, Publisher] = {}
        self._feed = SliceFeed(client, driver, backoff=backoff, watch_timeout=watch_timeout)
        self._feed_started = False

    def start_feed(self) -> None:
        """Start the shared list and watch (after the first nodes registered, so that
        one list covers them all)."""
        if not self._feed_started:
            self._feed_started = True
            self._feed.start()

    def publish(self, node: str, inventory: Inventory, node_uid: str | None = None) -> None:
        """Publish `inventory` as `node`'s slices (starting its publisher if new, with
        the Node's UID where the caller knows it)."""
        with self._lock:
            publisher = self._publishers.get(node)
            if publisher is None:
                publisher = Publisher(self._client, self._driver, node, inventory,
                                      backoff=self._backoff, watch_timeout=self._watch_timeout,
                                      write_concurrency=1, feed=self._feed,
                                      node_uid=node_uid)
                self._publishers[node] = publisher
                publisher.start()
                return
        publisher.update(inventory)

    def remove(self, node: str) -> None:
        """Stop publishing for `node` (its slices stay: see `delete_slices`)."""
        with self._lock:
            publisher = self._publishers.pop(node, None)
        if publisher is not None:
            publisher.stop()

    def nodes(self) -> list[str]:
        """The nodes being published."""
        with self._lock:
            return sorted(self._publishers)

    def count(self) -> int:
        """How many nodes are being published (no sorting: `join` asks on every node)."""
        with self._lock:
            return len(self._publishers)

    def wait_synced(self, stop: threading.Event, timeout: float | None = None) -> bool:
        """Wait until every node's slices are published once; False on timeout or stop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            publishers = list(self._publishers.values())
        for publisher in publishers:
            while not publisher.has_synced():
                if stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                    return False
                publisher.wait_synced(0.2)
        return True

    def slice_count(self) -> int:
        """The slices of all played nodes, as their publishers last saw them."""
        with self._lock:
            publishers = list(self._publishers.values())
        return sum(sum(p.stats().slices.values()) for p in publishers)

    def stop(self) -> None:
        """Stop the shared watch and every publisher (several at a time: each stop
        joins its thread)."""
        with self._lock:
            publishers, self._publishers = list(self._publishers.values()), {}
        self._feed.stop()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(Publisher.stop, publishers))


def delete_slices(client: RestClient, driver: str, node: str, *, stop: threading.Event,
                  metrics: FleetMetrics, backoff: Backoff) -> int:
    """Delete the slices of `node` (a removed node's; a real cluster's garbage collector
    would also do it, through their ownerReference to the Node); how many went."""
    selector = f"spec.driver={driver},spec.nodeName={node}"
    answer = retry.call(f"list slices of {node}", "get",
                        lambda: client.request("GET", SLICES, query={"fieldSelector": selector}),
                        stop=stop, metrics=metrics, backoff=backoff)
    deleted = 0
    for item in answer.get("items") or []:
        path = f"{SLICES}/{quote(item['metadata']['name'])}"
        try:
            retry.call(f"delete {path}", "delete",
                       functools.partial(client.request, "DELETE", path), stop=stop,
                       metrics=metrics, backoff=backoff)
            deleted += 1
        except ApiStatusError as exc:
            if exc.status != 404:
                raise
    return deleted
