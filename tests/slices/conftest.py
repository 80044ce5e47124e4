"""Fixtures for publisher tests: the API stand-in over real HTTP, and publisher starters
that are always stopped (threads joined) when a test ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simdra._driver.devices.model import Inventory
from simdra._driver.kubeapi import RestClient
from simdra._driver.slices.backoff import Backoff
from simdra._driver.slices.publisher import Publisher
from simdra._driver.testing.apiserver import APIServer

from .builders import DRIVER, NODE

# Short backoff so that error-recovery tests take fractions of a second.
FAST = Backoff(initial=0.05, factor=2.0, cap=0.4, jitter=0.5)


@pytest.fixture
def server() -> Iterator[APIServer]:
    with APIServer() as srv:
        yield srv


@pytest.fixture
def node(server: APIServer) -> dict[str, Any]:
    return server.put_object("nodes", {"metadata": {"name": NODE}})


@pytest.fixture
def client(server: APIServer) -> Iterator[RestClient]:
    api_client = server.rest_client()
    yield api_client
    api_client.close()


StartPublisher = Callable[..., Publisher]


@pytest.fixture
def start(client: RestClient) -> Iterator[StartPublisher]:
    started: list[Publisher] = []

    def _start(inventory: Inventory, **options: Any) -> Publisher:
        options.setdefault("backoff", FAST)
        publisher = Publisher(client, DRIVER, NODE, inventory, **options)
        publisher.start()
        started.append(publisher)
        return publisher

    yield _start
    for publisher in started:
        publisher.stop()
    leftover = [t.name for t in threading.enumerate() if t.name.startswith("slices-")]
    assert leftover == [], "publisher threads outlived stop()"
