"""The node plugin process: devices -> publisher, claims -> preparer, both behind the
kubelet's sockets, plus health, metrics and fault injection. `simdra._driver.startup.run_plugin`
(what `simdra run` executes) serves the kubelet's sockets first, then builds a `Plugin`
over them.

The Kubernetes client (the heaviest import) is loaded on a thread of its own once the
plugin is up; the publisher starts as soon as the client is there, and a prepare that
comes first waits for it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING

from simdra._driver.atomicfile import own_directory, remove_stale_temps
from simdra._driver.claims.plan.config import rules_for
from simdra._driver.claims.prepare.batch import CallSerializer
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.reconcile.plan import ReconcilePolicy
from simdra._driver.claims.reconcile.reconciler import (
    ApiClaimEvents,
    ClaimReconciler,
    ReconcileReports,
)
from simdra._driver.claims.source import DeferredClaimSource
from simdra._driver.claims.status.worker import BackgroundStatusWriter, DeferredStatusWriter
from simdra._driver.config import Config
from simdra._driver.devices.backend import BackendContext, DeviceBackend
from simdra._driver.devices.catalog import Catalog
from simdra._driver.devices.faults import FaultFile, PrepareFaults, fault_file_path
from simdra._driver.devices.kind_registry import KindSet
from simdra._driver.devices.live import DeviceKey, LiveDevices, NodeView
from simdra._driver.devices.model import Inventory
from simdra._driver.devices.standard_attributes import scalar_attributes
from simdra._driver.kube import ApiClientLoader
from simdra._driver.kubelet.early import DATA_DIR_MODE, EarlyKubelet
from simdra._driver.kubelet.healthcheck import start_healthcheck_server
from simdra._driver.kubelet.pod_resources import PodResourcesUsage

if TYPE_CHECKING:
    from simdra._driver.claims.types import ClaimPreparer
    from simdra._driver.observability.metrics import PluginMetrics
    from simdra._driver.slices.publisher import Publisher
    from simdra._driver.slices.stats import PublisherStats

log = logging.getLogger(__name__)

SERIALIZE_LOCK_FILE = "serialize.lock"
STATUS_RETRY_SECONDS = 10.0


def make_backend(config: Config, catalog: Catalog | None = None,
                 ) -> tuple[DeviceBackend, KindSet]:
    """The device backend `--device-backend` names (a name `catalog` knows or
    `package.module:Class`), constructed from a BackendContext (see
    `simdra._driver.devices.loader`), and the kinds registered with it: the catalog's,
    `--kind`'s and the backend's own."""
    from simdra._driver.devices.kind_registry import plugin_kinds

    catalog = catalog or Catalog()
    backend_class = catalog.backend_class(config.device_backend)
    kinds = plugin_kinds(catalog.kinds, config.kinds, backend_class)
    factory: Callable[[BackendContext], DeviceBackend]  # the class, or its from_context
    factory = getattr(backend_class, "from_context", backend_class)
    return factory(BackendContext.from_config(config, kinds)), kinds


class Plugin:
    """One plugin instance: `start()` brings the parts up in dependency order, `stop()`
    takes them down in reverse.

    The sockets serve first, publishing starts when the API client is loaded (see the
    module docstring); the sockets go first on the way down too, so the kubelet stops
    calling before anything else ends.
    """

    def __init__(self, config: Config, api: ApiClientLoader,
                 backend: tuple[DeviceBackend, KindSet], early: EarlyKubelet) -> None:
        """backend: what `make_backend` returns; early: the kubelet's sockets, already
        serving (`simdra._driver.kubelet.early`)."""
        self.config = config
        self._early = early
        self._api = api
        self._backend, self._kinds = backend
        self._publisher: Publisher | None = None
        self._publisher_lock = threading.Lock()
        self._stopping = False
        self._stops: list[Callable[[], None]] = []
        self._status: BackgroundStatusWriter | None = None
        # Only with --metrics-port: prometheus_client is imported (a tenth of a second
        # at start) and every call timed only for someone who reads the figures.
        self.metrics: PluginMetrics | None = None
        if config.metrics_port >= 0:
            from simdra._driver.observability.metrics import PluginMetrics

            self.metrics = PluginMetrics()
        self.metrics_port: int | None = None
        self.healthcheck_port: int | None = None

    @property
    def inventory(self) -> Inventory:
        """The inventory currently published and used for prepare."""
        return self._live.view.published

    def start(self) -> None:
        """Discover devices, start publishing, then serve the kubelet."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        log.info("plugin %s on node %s started: %d devices in %d pools",
                 self.config.driver_name, self.config.node_name,
                 sum(len(p.devices) for p in self.inventory.pools), len(self.inventory.pools))

    def stop(self) -> None:
        """Stop every part that was started, newest first."""
        while self._stops:
            stop = self._stops.pop()
            try:
                stop()
            except Exception:
                log.exception("error while stopping the plugin")

    # -- start, part by part -------------------------------------------------------------

    def _start(self) -> None:
        cfg = self.config
        own_directory(cfg.data_dir, DATA_DIR_MODE)
        # Temp files of atomic writes a crash interrupted (fault state); the age bound
        # spares a write another instance or `simdra fault` is making right now.
        for path in remove_stale_temps(cfg.data_dir):
            log.info("removed stale temp file %s", path)
        faults = self._fault_file()
        self._live = LiveDevices(
            self._backend, cfg.driver_name, on_change=self._on_devices_changed,
            prepared=self._prepared_devices, faults=faults,
            watched_file=getattr(self._backend, "inventory_path", None),
            rescan_interval=cfg.rescan_interval,
            shape=None if cfg.list_attributes else scalar_attributes)
        self._board = self._early.board
        self._board.update(self._live.view.health)
        prepare_faults = PrepareFaults(faults) if faults is not None else None
        self.preparer = self._make_preparer(prepare_faults)
        self._live.start()
        self._stops.append(self._live.stop)
        self._start_kubelet()
        if prepare_faults is not None:
            self._stops.append(prepare_faults.close)  # cut short injected delays first
        self._start_observability()
        self._start_reconciler()
        self._stops.append(self._stop_publisher)
        threading.Thread(target=self._start_publisher, name="publisher-start",
                         daemon=True).start()

    def _start_publisher(self) -> None:
        """Once the API client is loaded: publish the current view, and every later one."""
        try:
            api_client = self._api.get()
        except Exception as err:  # run_plugin reports it and exits
            log.error("no API client, nothing is published: %s", err)
            return
        # Imported only now: two threads importing the client at once can deadlock.
        from simdra._driver.slices.publisher import Publisher

        cfg = self.config
        with self._publisher_lock:
            if self._stopping:
                return
            self._publisher = Publisher(api_client, cfg.driver_name, cfg.node_name,
                                        self._live.view.published)
            self._publisher.start()
        log.info("publishing ResourceSlices of node %s", cfg.node_name)

    def _stop_publisher(self) -> None:
        with self._publisher_lock:
            self._stopping = True
            publisher = self._publisher
        if publisher is not None:
            publisher.stop()

    def _publisher_stats(self) -> PublisherStats | None:
        publisher = self._publisher
        return publisher.stats() if publisher is not None else None

    def _fault_file(self) -> FaultFile | None:
        """Fault injection is for fake devices only: real hardware fails on its own."""
        if self.config.device_backend != "fake":
            return None
        return FaultFile(fault_file_path(self.config.data_dir))

    def _make_preparer(self, prepare_faults: PrepareFaults | None) -> Preparer:
        cfg = self.config
        if cfg.claim_status:
            self._status = BackgroundStatusWriter(
                DeferredStatusWriter(self._api.get, cfg.driver_name),
                retry_seconds=STATUS_RETRY_SECONDS)
            self._stops.append(self._status.stop)
        # One prepare/unprepare at a time, across instances during a rolling update (the
        # Go helper's serialize.lock). The preparer takes it after reading the claims.
        serializer = CallSerializer(str(cfg.data_dir / SERIALIZE_LOCK_FILE))
        # The view the live devices publish now, read at each use by a getter of the
        # interpreter's own: a prepare's path runs through the claim lane, not back here.
        published = partial(attrgetter("view.published"), self._live)
        return Preparer(
            cfg.driver_name, DeferredClaimSource(self._api.get), published,
            cfg.cdi_root, cfg.data_dir, serialize=serializer,
            status_writer=self._status,
            device_hook=prepare_faults.before_device if prepare_faults else None,
            rules=rules_for(self._kinds), device_metadata=cfg.device_metadata)

    def _start_reconciler(self) -> None:
        """Check the prepared claims against the API server now and every
        `--reconcile-interval` seconds (the first check waits for the API client);
        report leaked ones, or free them when the kubelet agrees (`--reconcile-mode`)."""
        cfg = self.config
        if cfg.reconcile_interval <= 0:
            return
        reports = self.metrics.reconcile_reports() if self.metrics else ReconcileReports()
        reconciler = ClaimReconciler(
            self.preparer, DeferredClaimSource(self._api.get),
            driver=cfg.driver_name, node=cfg.node_name,
            policy=ReconcilePolicy(grace=cfg.reconcile_grace, interval=cfg.reconcile_interval),
            mode=cfg.reconcile_mode,
            kubelet=PodResourcesUsage(str(cfg.pod_resources_socket), cfg.driver_name),
            own_pod=(cfg.pod_namespace, cfg.pod_name) if cfg.pod_namespace and cfg.pod_name
            else None,
            reports=dataclasses.replace(reports, events=ApiClaimEvents(
                self._api.get, cfg.driver_name, cfg.node_name)))
        reconciler.start()
        self._stops.append(reconciler.stop)

    def _start_kubelet(self) -> None:
        """Connect the preparer to the sockets that serve already; they are stopped
        with the plugin, first of all its parts but the ones started after them."""
        kubelet = self._early.kubelet
        self._early.preparer.set(self._served_preparer())
        self._stops.append(kubelet.stop)
        self._kubelet = kubelet
        self._sockets = [kubelet.dra_socket, kubelet.registration_socket]

    def _served_preparer(self) -> ClaimPreparer:
        """The preparer the DRA socket calls: timed and counted when metrics are on."""
        if self.metrics is None:
            return self.preparer
        from simdra._driver.observability.metrics import InstrumentedPreparer

        return InstrumentedPreparer(self.preparer, self.metrics)

    def ready(self) -> bool:
        """Ready (the readinessProbe's `readiness` service): the kubelet's latest report
        says it registered this instance, and the node's slices have been published."""
        publisher = self._publisher
        return (self._kubelet.registration_status.registered is True
                and publisher is not None and publisher.has_synced())

    def _start_observability(self) -> None:
        cfg = self.config
        if cfg.healthcheck_port >= 0:
            health = start_healthcheck_server(cfg.healthcheck_port, self._sockets,
                                              service_names=("", cfg.driver_name),
                                              readiness=self.ready)
            self._stops.append(health.stop)
            self.healthcheck_port = health.port
            log.info("gRPC health service on port %d", health.port)
        if self.metrics is not None:
            from simdra._driver.observability.server import start_metrics_server
            from simdra._driver.observability.state import StateCollector

            self.metrics.registry.register(StateCollector(
                prepared=self.preparer.prepared, corrupt_records=self.preparer.corrupt_records,
                inventory=lambda: self.inventory, publisher_stats=self._publisher_stats,
                health=lambda: self._live.view.health))
            server, port = start_metrics_server(self.metrics.registry, cfg.metrics_port)
            self._stops.append(server.stop)
            self.metrics_port = port
            log.info("Prometheus metrics on port %d", port)

    # -- reactions -----------------------------------------------------------------------

    def _on_devices_changed(self, view: NodeView) -> None:
        publisher = self._publisher  # None until the client is loaded: it starts current
        if publisher is not None:
            publisher.update(view.published)
        self._board.update(view.health)

    def _prepared_devices(self) -> frozenset[DeviceKey]:
        """The devices prepared claims (and unreadable records) hold, from the ledger."""
        preparer = getattr(self, "preparer", None)  # None during the first discovery
        return frozenset() if preparer is None else preparer.ledger.devices_in_use()
