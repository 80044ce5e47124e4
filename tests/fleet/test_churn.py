"""Churn: the event sequence is a pure function of the seed; applying it to a node."""

from __future__ import annotations

import itertools

import pytest

from simdra._driver.fleet.churn import (
    ChurnError,
    ChurnEvent,
    ChurnRates,
    churn_events,
    churned_inventory,
    parse_churn,
)
from simdra._driver.fleet.mix import SHAPES
from simdra._driver.fleet.pool_plan import plan_inventory

NODES = [f"n{i}" for i in range(10)]
DEVICES = {node: [f"gpu-{d}" for d in range(8)] for node in NODES}
RATES = ChurnRates(health=60, unplug=30, nodes=6)


def first(seed: int, count: int = 200, rates: ChurnRates = RATES) -> list[ChurnEvent]:
    return list(itertools.islice(churn_events(rates, seed, NODES, DEVICES), count))


def test_the_same_seed_gives_the_same_events_and_another_seed_others() -> None:
    assert first(5) == first(5)
    assert first(5) != first(6)


def test_events_come_in_time_order_at_about_the_asked_rates() -> None:
    # (nodes churn left out: a departed node's devices do not flap, fewer events)
    events = first(1, 2000, ChurnRates(health=60, unplug=30))
    assert [e.at for e in events] == sorted(e.at for e in events)
    minutes = events[-1].at / 60
    by_kind = {kind: sum(e.kind == kind for e in events) / minutes
               for kind in ("health", "unplug", "nodes")}
    assert by_kind["health"] == pytest.approx(60, rel=0.2)
    assert by_kind["unplug"] == pytest.approx(30, rel=0.25)


def test_each_device_and_node_flips_back_and_forth() -> None:
    seen: dict[tuple[str, str, str], str] = {}
    for event in first(3, 1000):
        key = (event.kind, event.node, event.device)
        previous = seen.get(key)
        opposite = {"taint": "untaint", "untaint": "taint", "unplug": "plug", "plug": "unplug",
                    "leave": "join", "join": "leave"}
        assert previous is None or opposite[previous] == event.action, key
        seen[key] = event.action
        if event.action == "taint":
            assert event.effect in ("NoSchedule", "NoExecute")


def test_a_device_of_a_departed_node_does_not_flap() -> None:
    gone: set[str] = set()
    for event in first(9, 2000):
        if event.kind == "nodes":
            (gone.add if event.action == "leave" else gone.discard)(event.node)
        else:
            assert event.node not in gone


def test_no_rates_no_events() -> None:
    assert first(1, rates=ChurnRates()) == []


def test_churn_taints_and_unplugs_the_planned_devices() -> None:
    planned = plan_inventory("n0", "dra.example.com", SHAPES["gpu8"])
    after = churned_inventory(planned, "dra.example.com", {"gpu-1": "NoExecute"}, {"gpu-2"})
    devices = {d.name: d for _pool, d in after.devices()}
    assert "gpu-2" not in devices and len(devices) == 7
    assert devices["gpu-1"].spec["taints"] == [
        {"key": "dra.example.com/unhealthy", "value": "true", "effect": "NoExecute"}]
    assert "taints" not in devices["gpu-0"].spec
    assert churned_inventory(planned, "dra.example.com", {}, set()) == planned


def test_the_churn_flag() -> None:
    assert parse_churn("health=6,unplug=1.5") == ChurnRates(health=6, unplug=1.5)
    assert parse_churn("") == ChurnRates()
    for bad in ("health", "flap=1", "health=x", "health=-1", "health=1,health=2"):
        with pytest.raises(ChurnError):
            parse_churn(bad)
