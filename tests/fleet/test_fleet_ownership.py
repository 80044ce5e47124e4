"""The fleet never touches a Node it did not create: a Node named like one of its own but
without its label (a real node, another fleet's) is refused at start and at a churn join,
left alone by churn and prune, and attach mode writes no Node at all."""

from __future__ import annotations

import logging

import pytest

from simdra._driver.fleet.churn import ChurnEvent
from simdra._driver.fleet.churn_loop import ChurnLoop
from simdra._driver.fleet.nodes import NotOurs
from simdra._driver.testing.apiserver import APIServer

from .conftest import StartFleet, fleet_slices

REAL = "prod-0001"


def _real_node(server: APIServer, labels: dict[str, str]) -> dict[str, object]:
    """A Node someone else made, named like the fleet's second node."""
    return server.put_object("nodes", {"metadata": {"name": REAL, "labels": labels}})


@pytest.mark.parametrize("labels", [{"role": "db"}, {"simdra.dev/fleet": "other"}],
                         ids=["unlabelled", "another-fleets"])
def test_a_start_refuses_a_node_it_did_not_create_and_publishes_nothing(
        server: APIServer, start_fleet: StartFleet, labels: dict[str, str]) -> None:
    before = _real_node(server, labels)
    with pytest.raises(NotOurs, match=f"node {REAL} exists and is not this fleet's"):
        start_fleet(nodes=3, node_prefix="prod", wait=False)
    assert fleet_slices(server) == []
    assert server.get_object("nodes", REAL) == before


def test_a_churn_join_refuses_a_node_that_took_the_name_and_churn_leaves_it_alone(
        server: APIServer, start_fleet: StartFleet, caplog: pytest.LogCaptureFixture) -> None:
    fleet = start_fleet(nodes=2, node_prefix="prod")
    loop = ChurnLoop(fleet)
    loop.play(ChurnEvent(0, "nodes", "leave", REAL))
    before = _real_node(server, {"role": "db"})  # a real node joins under that name
    with caplog.at_level(logging.ERROR, logger="simdra._driver.fleet"):
        loop.play(ChurnEvent(1, "nodes", "join", REAL))
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert f"node {REAL} exists and is not this fleet's" in line and "\n" not in line
    loop.play(ChurnEvent(2, "health", "taint", REAL, "gpu-0", "NoSchedule"))
    loop.play(ChurnEvent(3, "nodes", "leave", REAL))
    assert fleet_slices(server, REAL) == []
    assert server.get_object("nodes", REAL) == before
    assert REAL not in fleet.publishers.nodes()


def test_a_leave_spares_a_node_replaced_by_someone_else(server: APIServer,
                                                         start_fleet: StartFleet) -> None:
    fleet = start_fleet(nodes=2, node_prefix="prod")
    server.delete_object("nodes", REAL)
    before = _real_node(server, {"role": "db"})
    ChurnLoop(fleet).play(ChurnEvent(0, "nodes", "leave", REAL))
    assert server.get_object("nodes", REAL) == before


def test_prune_removes_only_labelled_nodes(server: APIServer, start_fleet: StartFleet) -> None:
    start_fleet(nodes=4, node_prefix="prod").stop()
    stranger = server.put_object("nodes", {"metadata": {"name": "prod-0009"}})
    start_fleet(nodes=2, node_prefix="prod", prune=True)
    names = sorted(n["metadata"]["name"] for n in server.objects("nodes"))
    assert names == ["prod-0000", "prod-0001", "prod-0009"]
    assert server.get_object("nodes", "prod-0009") == stranger


def test_attach_mode_writes_no_node_even_when_churn_takes_one_away_and_back(
        server: APIServer, start_fleet: StartFleet) -> None:
    for name in ("kwok-a", "kwok-b"):
        server.put_object("nodes", {"metadata": {"name": name, "labels": {"role": "sim"}}})
    before = server.objects("nodes")
    fleet = start_fleet(nodes=0, attach_selector="role=sim")
    loop = ChurnLoop(fleet)
    loop.play(ChurnEvent(0, "nodes", "leave", "kwok-a"))
    assert fleet_slices(server, "kwok-a") == []
    loop.play(ChurnEvent(1, "nodes", "join", "kwok-a"))
    assert fleet.publishers.wait_synced(fleet.stop_event, timeout=10)
    assert len(fleet_slices(server, "kwok-a")) == 1
    assert server.writes("nodes") == 0
    assert server.objects("nodes") == before
