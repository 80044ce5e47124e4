"""What the fleet's background parts (churn, claim tracking) use of the fleet: named here
as a Protocol, so that they depend on this and `run.Fleet` on them, never the reverse."""

from __future__ import annotations

import threading
from typing import Protocol

from simdra._driver.fleet.metrics import FleetMetrics
from simdra._driver.fleet.options import FleetConfig
from simdra._driver.fleet.publish import FleetPublishers
from simdra._driver.fleet.state import FleetState
from simdra._driver.kubeapi.client import RestClient
from simdra._driver.slices.backoff import Backoff


class FleetParts(Protocol):
    """One fleet replica as its churn loop and claim tracker see it."""

    config: FleetConfig
    client: RestClient
    metrics: FleetMetrics
    stop_event: threading.Event
    backoff: Backoff
    state: FleetState
    publishers: FleetPublishers

    def join(self, name: str) -> None:
        """Bring node `name` (of the fleet's plan) up and publish it."""

    def leave(self, name: str) -> None:
        """Delete node `name` and its slices."""
