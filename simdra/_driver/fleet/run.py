"""The `simdra fleet` process: plan, create or adopt the nodes, publish their slices,
then play the node side of claims and churn until told to stop (side effects)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from simdra._driver.api import Inventory
from simdra._driver.fleet import retry
from simdra._driver.fleet.churn_loop import ChurnLoop
from simdra._driver.fleet.claims import ClaimTracker
from simdra._driver.fleet.client import fleet_client
from simdra._driver.fleet.metrics import FleetMetrics
from simdra._driver.fleet.nodes import FLEET_LABEL, NodeApi, NotOurs, node_body
from simdra._driver.fleet.options import FleetConfig
from simdra._driver.fleet.plan import PlannedNode, created_fleet, fleet_nodes, owned, to_prune
from simdra._driver.fleet.pool_plan import plan_inventory
from simdra._driver.fleet.publish import FleetPublishers, delete_slices
from simdra._driver.fleet.state import FleetState
from simdra._driver.kubeapi.client import RestClient
from simdra._driver.kubeapi.errors import ApiStatusError
from simdra._driver.slices.backoff import Backoff

log = logging.getLogger("simdra._driver.fleet")
# Node creates in flight at start: enough to keep the API server busy between one
# answer and the next request, few enough not to crowd out what else it serves.
NODE_WRITERS = 4


class Fleet:
    """One fleet replica: `start()` brings its nodes up, `stop()` ends its threads
    (nodes and slices stay, to be adopted by the next start)."""

    def __init__(self, config: FleetConfig, client: RestClient, metrics: FleetMetrics,
                 *, backoff: Backoff | None = None, watch_timeout: int = 300) -> None:
        self.config, self.client, self.metrics = config, client, metrics
        self.stop_event = threading.Event()
        self.backoff = backoff or Backoff()
        self.nodes = NodeApi(client, metrics, self.stop_event, self.backoff)
        self.state = FleetState(config.driver_name)
        self.publishers = FleetPublishers(client, config.driver_name, backoff=backoff,
                                          watch_timeout=watch_timeout)
        self.claims = ClaimTracker(self, config.prepare_latency)
        self.churn: ChurnLoop | None = None

    def start(self) -> list[PlannedNode]:
        """Create or adopt the owned nodes and start publishing; the played nodes.
        NotOurs, with nothing published, when a Node not the fleet's has a name of it.

        Each node's publisher starts as soon as its Node is up, but nothing is written
        before the shared slice feed lists, which it does once every Node is up."""
        started = time.monotonic()
        played = owned(self._planned(), self.config.shard)
        ours = self._existing()  # name -> UID
        # Planning is CPU and creating Nodes mostly waiting for the API server: one
        # thread plans while others create.
        planner = ThreadPoolExecutor(1, thread_name_prefix="fleet-plan")
        try:
            plans = {node.name: planner.submit(plan_inventory, node.name,
                                               self.config.driver_name, node.shape)
                     for node in played}
            self._bring_up(played, ours, plans)
        finally:
            planner.shutdown(cancel_futures=True)
        log.info("fleet: %d nodes up (%d adopted) in %.1f s", len(played),
                 sum(node.name in ours for node in played), time.monotonic() - started)
        if self.config.prune:
            self._prune(ours, played)
        self.publishers.start_feed()
        self.metrics.nodes.set(len(played))
        return played

    def _bring_up(self, played: list[PlannedNode], ours: dict[str, str],
                  plans: dict[str, Future[Inventory]]) -> None:
        """Every played Node created or adopted, and its publisher started, before the
        feed lists: a start that meets a Node not its own stops having written no
        slice. Up to NODE_WRITERS Nodes are created at once (one after the other, each
        would wait out a whole round trip)."""

        def up(node: PlannedNode) -> None:
            if self.stop_event.is_set():
                raise retry.Stopped("start")
            uid = ours.get(node.name)
            if uid is None and not self.config.attach_selector:
                uid = self.nodes.ensure(self._node_body(node.name, node.shape.name))
            self.state.add(node.name, plans[node.name].result())
            self.join(node.name, uid=uid)

        with ThreadPoolExecutor(NODE_WRITERS, thread_name_prefix="fleet-node") as pool:
            try:
                list(pool.map(up, played))  # the first failure cancels those not begun
            except BaseException:
                self.stop_event.set()  # the creates in flight give up too
                raise

    def _node_body(self, name: str, shape: str) -> dict[str, Any]:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return node_body(name, self.config.node_prefix, shape, now)

    def _planned(self) -> list[PlannedNode]:
        cfg = self.config
        if cfg.attach_selector:
            names = sorted(n["metadata"]["name"] for n in self.nodes.list(cfg.attach_selector))
            return fleet_nodes(names, cfg.mix, cfg.seed)
        return created_fleet(cfg.node_prefix, cfg.nodes, cfg.mix, cfg.seed)

    def _existing(self) -> dict[str, str]:
        """Our nodes already on the server, by name, with their UIDs (a restart adopts
        them; none when attached)."""
        if self.config.attach_selector:
            return {}
        selector = f"{FLEET_LABEL}={self.config.node_prefix}"
        return {n["metadata"]["name"]: str(n["metadata"]["uid"])
                for n in self.nodes.list(selector)}

    def _prune(self, ours: dict[str, str], played: list[PlannedNode]) -> None:
        for name in to_prune(sorted(ours), played, self.config.shard):
            try:
                self.leave(name)
            except NotOurs as err:  # relabelled or replaced since the list
                log.error("fleet: not pruned: %s", err)
                continue
            log.info("fleet: pruned node %s", name)

    def join(self, name: str, plan_shape: PlannedNode | None = None,
             uid: str | None = None) -> None:
        """Bring `name` up (create its Node unless its `uid` says it exists) and publish
        its slices; with `plan_shape`, plan its inventory first (a node joining again
        keeps its state)."""
        cfg = self.config
        if plan_shape is not None:
            self.state.add(name, plan_inventory(name, cfg.driver_name, plan_shape.shape))
        if not cfg.attach_selector and uid is None:
            uid = self.nodes.ensure(self._node_body(
                name, plan_shape.shape.name if plan_shape else ""))
        inventory = self.state.inventory(name)
        if inventory is not None:
            self.publishers.publish(name, inventory, uid)
        self.metrics.nodes.set(self.publishers.count())

    def leave(self, name: str) -> None:
        """Take `name` down: stop publishing, delete its slices and (if the fleet made
        it) its Node. NotOurs, with nothing deleted, when a Node not the fleet's has
        taken the name (its slices may be a real plugin's)."""
        self.publishers.remove(name)
        self.metrics.nodes.set(self.publishers.count())
        uid = None
        if not self.config.attach_selector:
            uid = self.nodes.owned_uid(name, self.config.node_prefix)
        delete_slices(self.client, self.config.driver_name, name, stop=self.stop_event,
                      metrics=self.metrics, backoff=self.backoff)
        if uid is not None and not self.nodes.delete(name, uid):
            log.warning("fleet: node %s was replaced before its delete: left alone", name)

    def start_background(self) -> None:
        """The node side of claims, and churn if asked for."""
        self.claims.start()
        if self.config.churn.any():
            self.churn = ChurnLoop(self)
            self.churn.start()

    def stop(self) -> None:
        """Stop churn, claims and publishers; what is on the server stays."""
        self.stop_event.set()
        if self.churn is not None:
            self.churn.stop()
        self.claims.stop()
        self.publishers.stop()


def run_fleet(config: FleetConfig) -> int:
    """Run until SIGTERM or SIGINT; the exit status."""
    metrics = FleetMetrics()
    if config.metrics_port >= 0:
        log.info("fleet: metrics on port %d", metrics.serve(config.metrics_port))
    fleet = Fleet(config, fleet_client(config.kubeconfig, metrics), metrics)
    _on_signals(fleet.stop_event)
    started, code = time.monotonic(), 0
    try:
        played = fleet.start()
        if fleet.publishers.wait_synced(fleet.stop_event):
            slices = fleet.publishers.slice_count()
            metrics.slices.set(slices)
            log.info("fleet: published %d nodes, %d slices in %.1f s", len(played), slices,
                     time.monotonic() - started)
            fleet.start_background()
        fleet.stop_event.wait()
    except retry.Stopped:
        pass
    except (ApiStatusError, NotOurs) as err:  # refused for good (403: RBAC, 422: invalid)
        log.error("fleet: cannot start: %s", err)
        code = 1
    finally:
        fleet.stop()
    log.info("fleet: stopped; %s", summary(metrics))
    return code


def summary(metrics: FleetMetrics) -> str:
    """The counters in one line: `nodes=20, api_requests{verb=create}=48, ...`."""
    parts = []
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            name = sample.name.removeprefix("simdra_fleet_").removesuffix("_total")
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            parts.append(f"{name}{{{labels}}}={sample.value:g}" if labels
                         else f"{name}={sample.value:g}")
    return ", ".join(parts)


def _on_signals(stop: threading.Event) -> None:
    def handler(signum: int, _frame: FrameType | None) -> None:
        log.info("fleet: signal %d, stopping", signum)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
