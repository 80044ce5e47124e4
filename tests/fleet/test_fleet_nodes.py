"""The fleet against the API stand-in: its Nodes, their slices, restarts, prune, shards."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from simdra._driver.fleet import publish
from simdra._driver.fleet.churn import ChurnEvent
from simdra._driver.fleet.churn_loop import ChurnLoop
from simdra._driver.slices.publisher import Publisher
from simdra._driver.testing.apiserver import APIServer

from .conftest import DRIVER, StartFleet, fleet_slices


def test_nodes_are_created_labelled_tainted_and_ready(server: APIServer,
                                                      start_fleet: StartFleet) -> None:
    start_fleet(nodes=3, node_prefix="scale")
    nodes = sorted(server.objects("nodes"), key=lambda n: n["metadata"]["name"])
    assert [n["metadata"]["name"] for n in nodes] == ["scale-0000", "scale-0001", "scale-0002"]
    node = nodes[0]
    assert node["metadata"]["labels"]["simdra.dev/fleet"] == "scale"
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["spec"]["taints"] == [
        {"key": "simdra.dev/fleet", "value": "true", "effect": "NoSchedule"}]
    assert node["status"]["allocatable"]["pods"] == "110"
    assert [c["type"] for c in node["status"]["conditions"]] == ["Ready"]


def test_each_node_publishes_its_pool_owned_by_its_node(server: APIServer,
                                                        start_fleet: StartFleet) -> None:
    start_fleet(nodes=4)
    uids = {n["metadata"]["name"]: n["metadata"]["uid"] for n in server.objects("nodes")}
    slices = fleet_slices(server)
    assert {s["spec"]["nodeName"] for s in slices} == set(uids)
    for piece in slices:
        (owner,) = piece["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("Node", uids[piece["spec"]["nodeName"]])
        assert len(piece["spec"]["devices"]) == 8


def test_a_start_reads_no_node_it_created_or_listed(server: APIServer,
                                                   start_fleet: StartFleet) -> None:
    """The fleet hands each publisher its Node's UID: per node, a start costs the Node's
    create and its slices, a restart nothing but the shared lists."""
    start_fleet(nodes=4).stop()
    assert server.request_log.count("get", "nodes") == 0
    assert server.request_log.count("create", "nodes") == 4
    server.request_log.clear()
    start_fleet(nodes=4)
    assert server.request_log.count("get", "nodes") == 0
    assert server.writes() == 0


def test_a_start_whose_slices_come_late_still_costs_the_floor(
        server: APIServer, start_fleet: StartFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1,000 nodes the publishers plan their pools more than the Node UID's 10 s
    max age after the fleet created the Nodes (their threads share one interpreter):
    the UID the fleet handed over must still own those first slices, or each node costs
    one more GET. Here the UID ages 50 ms and the shared list of slices takes 300 ms."""

    class Aging(Publisher):
        def __init__(self, *args: Any, **options: Any) -> None:
            super().__init__(*args, node_uid_max_age=0.05, **options)

    monkeypatch.setattr(publish, "Publisher", Aging)
    server.stall("list", "resourceslices", 0.3, together=1000)
    start_fleet(nodes=6, mix="gpu8:50,partitioned:50")
    slices = len(fleet_slices(server))
    # The floor (a bare loop creating the same Nodes and slices), and the fleet's three
    # shared requests: the list of its Nodes, the list and the watch of its slices.
    assert server.request_log.counts() == Counter({
        ("create", "nodes"): 6, ("create", "resourceslices"): slices,
        ("list", "nodes"): 1, ("list", "resourceslices"): 1, ("watch", "resourceslices"): 1})


def test_a_restarted_fleet_adopts_its_nodes_and_slices_without_writing(
        server: APIServer, start_fleet: StartFleet) -> None:
    first = start_fleet(nodes=5, mix="gpu8:60,partitioned:40", seed=4)
    before = fleet_slices(server)
    first.stop()
    writes = server.writes("resourceslices"), server.writes("nodes")
    start_fleet(nodes=5, mix="gpu8:60,partitioned:40", seed=4)
    assert (server.writes("resourceslices"), server.writes("nodes")) == writes
    assert fleet_slices(server) == before  # same objects: no duplicates, no new generation


def test_a_restart_with_a_change_continues_the_generation(server: APIServer,
                                                          start_fleet: StartFleet) -> None:
    start_fleet(nodes=1, mix="gpu8:100").stop()
    (before,) = fleet_slices(server)
    start_fleet(nodes=1, mix="partitioned:100")  # more slices: a new generation
    after = fleet_slices(server)
    assert len(after) > 1
    assert {s["spec"]["pool"]["generation"] for s in after} == {
        before["spec"]["pool"]["generation"] + 1}


def test_prune_removes_the_nodes_and_slices_the_fleet_no_longer_has(
        server: APIServer, start_fleet: StartFleet) -> None:
    start_fleet(nodes=4).stop()
    start_fleet(nodes=2, prune=True)
    assert sorted(n["metadata"]["name"] for n in server.objects("nodes")) == [
        "simdra-fleet-0000", "simdra-fleet-0001"]
    assert {s["spec"]["nodeName"] for s in fleet_slices(server)} == {
        "simdra-fleet-0000", "simdra-fleet-0001"}


def test_without_prune_fewer_nodes_leaves_the_others_alone(server: APIServer,
                                                           start_fleet: StartFleet) -> None:
    start_fleet(nodes=3).stop()
    start_fleet(nodes=1)
    assert len(server.objects("nodes")) == 3


def test_two_shards_never_publish_the_same_node_and_together_cover_the_fleet(
        server: APIServer, start_fleet: StartFleet) -> None:
    from simdra._driver.fleet.shard import Shard

    first = start_fleet(nodes=12, shard=Shard(0, 2))
    second = start_fleet(nodes=12, shard=Shard(1, 2))
    mine, theirs = set(first.publishers.nodes()), set(second.publishers.nodes())
    assert mine and theirs and not mine & theirs
    assert mine | theirs == {n["metadata"]["name"] for n in server.objects("nodes")}
    slices = fleet_slices(server)
    assert len(slices) == 12  # one slice per node: nobody published a node twice
    assert {s["spec"]["nodeName"] for s in slices} == mine | theirs


def test_attached_nodes_are_played_not_created(server: APIServer,
                                               start_fleet: StartFleet) -> None:
    for name in ("kwok-a", "kwok-b", "other"):
        role = "other" if name == "other" else "sim"
        server.put_object("nodes", {"metadata": {"name": name, "labels": {"role": role}}})
    start_fleet(nodes=0, attach_selector="role=sim")
    assert {s["spec"]["nodeName"] for s in fleet_slices(server)} == {"kwok-a", "kwok-b"}
    assert len(server.objects("nodes")) == 3


def test_churn_events_reach_the_slices(server: APIServer, start_fleet: StartFleet) -> None:
    fleet = start_fleet(nodes=2)
    loop, node = ChurnLoop(fleet), "simdra-fleet-0001"
    loop.play(ChurnEvent(0, "health", "taint", node, "gpu-3", "NoExecute"))
    loop.play(ChurnEvent(0, "unplug", "unplug", node, "gpu-5"))
    assert fleet.publishers.wait_synced(fleet.stop_event, timeout=10)
    _wait_for(lambda: len(_devices(server, node)) == 7)
    devices = _devices(server, node)
    assert devices["gpu-3"]["taints"][0]["effect"] == "NoExecute"
    assert devices["gpu-3"]["taints"][0]["key"] == f"{DRIVER}/unhealthy"
    loop.play(ChurnEvent(0, "nodes", "leave", node))
    assert node not in {n["metadata"]["name"] for n in server.objects("nodes")}
    assert fleet_slices(server, node) == []
    loop.play(ChurnEvent(0, "nodes", "join", node))
    _wait_for(lambda: len(_devices(server, node)) == 7)  # back, as it left
    assert fleet.metrics.churn.labels(kind="nodes")._value.get() == 2


def _devices(server: APIServer, node: str) -> dict[str, dict[str, object]]:
    return {d["name"]: d for s in fleet_slices(server, node) for d in s["spec"]["devices"]}


def _wait_for(condition: object, timeout: float = 10.0) -> None:
    from simdra._driver.testing.cluster import wait_until

    wait_until(condition, timeout=timeout)  # type: ignore[arg-type]


def test_node_writes_wait_out_a_throttling_or_failing_api_server(
        server: APIServer, start_fleet: StartFleet) -> None:
    server.inject_failure("create", "nodes", 429, count=2, retry_after=0)
    server.inject_failure("create", "nodes", 503, count=2)
    fleet = start_fleet(nodes=3)
    assert len(server.objects("nodes")) == 3
    assert len(fleet_slices(server)) == 3
    assert server.request_log.count("create", "nodes") == 3 + 4  # no duplicate creates
    assert fleet.metrics.errors.labels(verb="create")._value.get() == 4


def test_many_nodes_starting_at_once_keep_to_the_clients_connections(
        server: APIServer, start_fleet: StartFleet) -> None:
    stall = server.stall("create", "resourceslices", seconds=0.2, together=100)
    start_fleet(nodes=24)  # the fixture's client: 8 connections
    assert len(fleet_slices(server)) == 24
    assert 1 < stall.max_in_flight <= 8
