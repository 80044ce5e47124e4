"""Churn, played against the fleet (side effects): each event of `churn_events` at its
offset from start, logged as one line and counted. A late event (the API server was
slow) is played at once; the sequence itself never depends on timing."""

from __future__ import annotations

import logging
import threading
import time

from simdra._driver.fleet import retry
from simdra._driver.fleet.churn import ChurnEvent, churn_events
from simdra._driver.fleet.nodes import NotOurs
from simdra._driver.fleet.parts import FleetParts

log = logging.getLogger("simdra._driver.fleet")


class ChurnLoop:
    """A thread playing churn events until the fleet stops."""

    def __init__(self, fleet: FleetParts) -> None:
        self._fleet = fleet
        self._thread = threading.Thread(target=self._run, name="fleet-churn", daemon=True)

    def start(self) -> None:
        """Start playing events."""
        self._thread.start()

    def stop(self) -> None:
        """Wait for the thread (the fleet's stop event ends it)."""
        self._thread.join(10)

    def _run(self) -> None:
        fleet, cfg = self._fleet, self._fleet.config
        stop, started = fleet.stop_event, time.monotonic()
        events = churn_events(cfg.churn, cfg.seed, fleet.state.names(),
                              fleet.state.device_names())
        for event in events:
            if stop.wait(max(0.0, started + event.at - time.monotonic())):
                return
            try:
                self.play(event)
            except retry.Stopped:
                return
            except Exception:  # a bug must not end churn silently
                log.exception("fleet: churn event failed: %s", event.line())

    def play(self, event: ChurnEvent) -> None:
        """Apply one event to the fleet. A node whose name a Node not the fleet's took
        is played no more: one error line, and later events skip it."""
        fleet = self._fleet
        if not fleet.state.plays(event.node):
            return
        log.info("fleet: %s", event.line())
        fleet.metrics.churn.labels(kind=event.kind).inc()
        inventory = fleet.state.apply(event)
        try:
            if event.action == "leave":
                fleet.leave(event.node)
            elif event.action == "join":
                fleet.join(event.node)
            elif inventory is not None:
                fleet.publishers.publish(event.node, inventory)
        except NotOurs as err:
            fleet.state.forget(event.node)
            fleet.publishers.remove(event.node)
            log.error("fleet: churn %s %s refused: %s", event.action, event.node, err)
