"""Fixtures for fleet tests: the API stand-in over real HTTP, and fleets run in this
process against it that are always stopped (threads joined) when a test ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simdra._driver.fleet.client import CountingClient
from simdra._driver.fleet.metrics import FleetMetrics
from simdra._driver.fleet.mix import parse_mix
from simdra._driver.fleet.options import FleetConfig
from simdra._driver.fleet.run import Fleet
from simdra._driver.slices.backoff import Backoff
from simdra._driver.testing.apiserver import APIServer

DRIVER = "dra.example.com"
# Short backoff so that recovery tests take fractions of a second.
FAST = Backoff(initial=0.05, factor=2.0, cap=0.4, jitter=0.5)

StartFleet = Callable[..., Fleet]


@pytest.fixture
def server() -> Iterator[APIServer]:
    with APIServer() as srv:
        yield srv


@pytest.fixture
def start_fleet(server: APIServer) -> Iterator[StartFleet]:
    """Start a fleet (FleetConfig fields as keywords, `mix` as text) and wait until its
    nodes' slices are published; stopped at the end of the test."""
    started: list[Fleet] = []

    def _start(server: APIServer = server, *, mix: str = "gpu8:100", wait: bool = True,
               **fields: Any) -> Fleet:
        fields.setdefault("nodes", 3)
        config = FleetConfig(driver_name=DRIVER, mix=parse_mix(mix), **fields)
        metrics = FleetMetrics()
        client = CountingClient(server.rest_client(), metrics, connections=8)
        fleet = Fleet(config, client, metrics, backoff=FAST)
        started.append(fleet)
        fleet.start()
        if wait:
            assert fleet.publishers.wait_synced(fleet.stop_event, timeout=30)
        return fleet

    yield _start
    for fleet in started:
        fleet.stop()
    leftover = [t.name for t in threading.enumerate()
                if t.name.startswith(("slices-", "fleet-"))]
    assert leftover == [], "fleet threads outlived stop()"


def fleet_slices(server: APIServer, node: str | None = None) -> list[dict[str, Any]]:
    """The driver's slices (of `node`), sorted by name."""
    return sorted((s for s in server.objects("resourceslices")
                   if s["spec"]["driver"] == DRIVER
                   and (node is None or s["spec"].get("nodeName") == node)),
                  key=lambda s: s["metadata"]["name"])
