"""The node plugin process: devices -> publisher, claims -> preparer, both behind the
kubelet's sockets, plus health, metrics and fault injection. `run_plugin` is what
`simdra run` executes."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from kubernetes.client import ApiClient

from driver.atomicfile import own_directory, remove_stale_temps
from driver.claims.api_source import ApiClaimSource
from driver.claims.preparer import Preparer
from driver.claims.rules import rules_for
from driver.claims.status import ClaimStatusWriter
from driver.claims.status_worker import BackgroundStatusWriter
from driver.config import Config
from driver.devices.backend import BackendContext, DeviceBackend
from driver.devices.faults import FaultFile, PrepareFaults, fault_file_path
from driver.devices.live import DeviceKey, LiveDevices, NodeView
from driver.devices.model import Inventory
from driver.kube import load_api_client
from driver.kubelet.health import HealthBoard
from driver.kubelet.healthcheck import start_healthcheck_server
from driver.kubelet.plugin import start_kubelet_plugin
from driver.kubelet.serialize import CallSerializer
from driver.kubelet.sockets import dra_socket_path, registration_socket_path
from driver.observability.logs import configure_logging
from driver.observability.metrics import InstrumentedPreparer, PluginMetrics
from driver.observability.server import start_metrics_server
from driver.observability.state import StateCollector
from driver.slices.publisher import Publisher

log = logging.getLogger(__name__)

SERIALIZE_LOCK_FILE = "serialize.lock"
# The data directory holds the DRA socket, the claim records and the locks: the kubelet
# (root) reaches the socket through it; nobody else needs in.
DATA_DIR_MODE = 0o750
STATUS_RETRY_SECONDS = 10.0
# The health stream re-sends the full list this often; the kubelet's device timeout is
# three times as long (driver.devices.live.HEALTH_TIMEOUT_SECONDS).
HEALTH_RESEND_SECONDS = 10.0


def make_backend(config: Config) -> DeviceBackend:
    """The device backend `--device-backend` names (a registered name or
    `package.module:Class`), constructed from a BackendContext (see
    `driver.devices.loader`)."""
    from driver.devices.loader import load_backend_class
    from driver.devices.registry import backend_spec

    backend_class = load_backend_class(backend_spec(config.device_backend))
    factory = getattr(backend_class, "from_context", backend_class)
    return factory(BackendContext.from_config(config))


class Plugin:
    """One plugin instance: `start()` brings the parts up in dependency order, `stop()`
    takes them down in reverse.

    Publishing starts before the sockets so that by the time the kubelet calls, the
    scheduler can already see this node's devices; the sockets go first on the way down
    so the kubelet stops calling before anything else ends.
    """

    def __init__(self, config: Config, api_client: ApiClient, backend: DeviceBackend) -> None:
        self.config = config
        self._api_client = api_client
        self._backend = backend
        self._stops: list[Callable[[], None]] = []
        self._status: BackgroundStatusWriter | None = None
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
            rescan_interval=cfg.rescan_interval)
        self._board = HealthBoard(self._live.view.health, resend_seconds=HEALTH_RESEND_SECONDS)
        prepare_faults = PrepareFaults(faults) if faults is not None else None
        self.preparer = self._make_preparer(prepare_faults)
        self._publisher = Publisher(self._api_client, cfg.driver_name, cfg.node_name,
                                    self._live.view.published)
        self._publisher.start()
        self._stops.append(self._publisher.stop)
        self._live.start()
        self._stops.append(self._live.stop)
        self._start_kubelet()
        if prepare_faults is not None:
            self._stops.append(prepare_faults.close)  # cut short injected delays first
        self._start_observability()

    def _fault_file(self) -> FaultFile | None:
        """Fault injection is for fake devices only: real hardware fails on its own."""
        if self.config.device_backend != "fake":
            return None
        return FaultFile(fault_file_path(self.config.data_dir))

    def _make_preparer(self, prepare_faults: PrepareFaults | None) -> Preparer:
        cfg = self.config
        if cfg.claim_status:
            self._status = BackgroundStatusWriter(
                ClaimStatusWriter(self._api_client, cfg.driver_name),
                retry_seconds=STATUS_RETRY_SECONDS)
            self._stops.append(self._status.stop)
        # One prepare/unprepare at a time, across instances during a rolling update (the
        # Go helper's serialize.lock). The preparer takes it after reading the claims.
        serializer = CallSerializer(str(cfg.data_dir / SERIALIZE_LOCK_FILE))
        return Preparer(
            cfg.driver_name, ApiClaimSource(self._api_client), lambda: self.inventory,
            cfg.cdi_root, cfg.data_dir, serialize=lambda: serializer,
            status_writer=self._status,
            device_hook=prepare_faults.before_device if prepare_faults else None,
            rules=rules_for(self._backend))

    def _start_kubelet(self) -> None:
        cfg = self.config
        kubelet = start_kubelet_plugin(
            cfg.driver_name,
            dra_socket_path(str(cfg.data_dir), cfg.pod_uid or ""),
            registration_socket_path(str(cfg.registrar_dir), cfg.driver_name,
                                     cfg.pod_uid or ""),
            InstrumentedPreparer(self.preparer, self.metrics),
            health=self._board,
            serialize=False,  # the preparer serializes, after reading the claims
        )
        self._stops.append(kubelet.stop)
        self._kubelet = kubelet
        self._sockets = [kubelet.dra_socket, kubelet.registration_socket]

    def ready(self) -> bool:
        """Ready (the readinessProbe's `readiness` service): the kubelet's latest report
        says it registered this instance, and the node's slices have been published."""
        return (self._kubelet.registration_status.registered is True
                and self._publisher.has_synced())

    def _start_observability(self) -> None:
        cfg = self.config
        if cfg.healthcheck_port >= 0:
            health = start_healthcheck_server(cfg.healthcheck_port, self._sockets,
                                              service_names=("", cfg.driver_name),
                                              readiness=self.ready)
            self._stops.append(health.stop)
            self.healthcheck_port = health.port
            log.info("gRPC health service on port %d", health.port)
        if cfg.metrics_port >= 0:
            self.metrics.registry.register(StateCollector(
                prepared=self.preparer.prepared, corrupt_records=self.preparer.corrupt_records,
                inventory=lambda: self.inventory, publisher_stats=self._publisher.stats,
                health=lambda: self._live.view.health))
            server, port = start_metrics_server(self.metrics.registry, cfg.metrics_port)
            self._stops.append(server.stop)
            self.metrics_port = port
            log.info("Prometheus metrics on port %d", port)

    # -- reactions -----------------------------------------------------------------------

    def _on_devices_changed(self, view: NodeView) -> None:
        self._publisher.update(view.published)
        self._board.update(view.health)

    def _prepared_devices(self) -> Iterator[DeviceKey]:
        preparer = getattr(self, "preparer", None)  # None during the first discovery
        if preparer is None:
            return
        for claim in preparer.prepared().values():
            for unit in claim.units:
                yield unit.pool, unit.device
        for pool, device, _ in preparer.ledger.reserved():  # held for unreadable records
            yield pool, device


def run_plugin(config: Config) -> int:
    """Run until SIGTERM or SIGINT; returns the process exit code.

    Raises ClusterConfigError (a usage error: exit 2) before anything else is set up
    when there is no usable cluster configuration.
    """
    api_client = load_api_client(config.kubeconfig)
    configure_logging(config.log_format, config.verbosity)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        plugin = Plugin(config, api_client, make_backend(config))
        plugin.start()
    except Exception as err:  # one clear line instead of a traceback
        log.error("plugin failed to start: %s", err)
        api_client.close()
        return 1
    try:
        while not stop.wait(1.0):  # a timed wait keeps signal handling prompt
            pass
    finally:
        plugin.stop()
        api_client.close()
    return 0
