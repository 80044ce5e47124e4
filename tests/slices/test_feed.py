"""Many publishers sharing one list and watch (SliceFeed): each node's slices are
published and kept as with a watch of its own, for one list and one watch in all."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from simdra._driver.kubeapi import RestClient
from simdra._driver.slices.feed import SliceFeed
from simdra._driver.slices.publisher import Publisher
from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.cluster import wait_until

from .builders import DRIVER, gpus, inventory, pool
from .conftest import FAST

NODES = ("node-a", "node-b", "node-c")


@pytest.fixture
def feed(server: APIServer, client: RestClient) -> Iterator[tuple[SliceFeed, list[Publisher]]]:
    for node in (*NODES, "node-z"):
        server.put_object("nodes", {"metadata": {"name": node}})
    shared = SliceFeed(client, DRIVER, backoff=FAST)
    publishers = [Publisher(client, DRIVER, node, inventory(pool(node, gpus(2))),
                            backoff=FAST, feed=shared) for node in NODES]
    for publisher in publishers:
        publisher.start()
    shared.start()
    yield shared, publishers
    shared.stop()
    for publisher in publishers:
        publisher.stop()
    assert [t.name for t in threading.enumerate() if t.name.startswith("slices-")] == []


def _slices(server: APIServer, node: str) -> list[dict[str, Any]]:
    return [s for s in server.objects("resourceslices") if s["spec"]["nodeName"] == node]


def test_one_list_and_one_watch_publish_every_node(
        server: APIServer, feed: tuple[SliceFeed, list[Publisher]]) -> None:
    _shared, publishers = feed
    for publisher in publishers:
        assert publisher.wait_synced(10)
    assert all(len(_slices(server, node)) == 1 for node in NODES)
    assert server.request_log.count("list", "resourceslices") == 1
    assert server.request_log.count("watch", "resourceslices") == 1
    assert sum(t.name == "slices-watch" for t in threading.enumerate()) == 0


def test_a_deleted_slice_comes_back_through_the_shared_watch(
        server: APIServer, feed: tuple[SliceFeed, list[Publisher]]) -> None:
    _shared, publishers = feed
    for publisher in publishers:
        assert publisher.wait_synced(10)
    (gone,) = _slices(server, "node-b")
    server.delete_object("resourceslices", gone["metadata"]["name"])
    back = wait_until(lambda: _slices(server, "node-b"), timeout=10)
    assert back[0]["spec"]["devices"] == gone["spec"]["devices"]


def test_other_nodes_slices_are_left_alone_and_a_late_node_adopts_its_own(
        server: APIServer, client: RestClient, feed: tuple[SliceFeed, list[Publisher]]
        ) -> None:
    shared, publishers = feed
    for publisher in publishers:
        assert publisher.wait_synced(10)
    late = Publisher(client, DRIVER, "node-z", inventory(pool("node-z", gpus(3))),
                     backoff=FAST)
    late.start()  # with a watch of its own, as `simdra run` on that node
    assert late.wait_synced(10)
    late.stop()
    writes = server.writes("resourceslices")
    joined = Publisher(client, DRIVER, "node-z", inventory(pool("node-z", gpus(3))),
                       backoff=FAST, feed=shared)
    joined.start()  # registered after the feed listed: listed on its own, then adopted
    try:
        assert joined.wait_synced(10)
        assert server.writes("resourceslices") == writes  # adopted, nothing rewritten
    finally:
        joined.stop()
