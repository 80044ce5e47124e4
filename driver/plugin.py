"""The node plugin process: devices -> publisher, claims -> preparer, both behind the
kubelet's sockets. `run_plugin` is what `simdra run` executes."""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass
from types import FrameType

from kubernetes.client import ApiClient

from driver.claims.api_source import ApiClaimSource
from driver.claims.preparer import Preparer
from driver.config import Config
from driver.devices.backend import DeviceBackend, FakeBackend
from driver.devices.model import Inventory
from driver.devices.sysfs import SysfsBackend
from driver.kube import load_api_client
from driver.kubelet.plugin import KubeletPlugin, start_kubelet_plugin
from driver.kubelet.sockets import dra_socket_path, registration_socket_path
from driver.slices.publisher import Publisher

log = logging.getLogger(__name__)

SERIALIZE_LOCK_FILE = "serialize.lock"


def make_backend(config: Config) -> DeviceBackend:
    """The device backend `--device-backend` names."""
    if config.device_backend == "sysfs":
        return SysfsBackend(config.sysfs_root, node_name=config.node_name,
                            driver_name=config.driver_name)
    return FakeBackend(config.device_profile, config.driver_name, config.node_name,
                       config.num_devices)


@dataclass
class _Running:
    publisher: Publisher
    kubelet: KubeletPlugin


class Plugin:
    """One plugin instance: start() brings it up in dependency order, stop() tears it down.

    Publishing starts before the sockets so that by the time the kubelet calls, the
    scheduler can already see this node's devices.
    """

    def __init__(self, config: Config, api_client: ApiClient, backend: DeviceBackend) -> None:
        self.config = config
        self._api_client = api_client
        self._backend = backend
        self._inventory = Inventory(pools=())
        self._running: _Running | None = None
        self.preparer: Preparer | None = None

    @property
    def inventory(self) -> Inventory:
        """The inventory currently published and used for prepare."""
        return self._inventory

    def start(self) -> None:
        """Discover devices, start publishing, then serve the kubelet."""
        cfg = self.config
        self._inventory = self._backend.discover()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.preparer = Preparer(cfg.driver_name, ApiClaimSource(self._api_client),
                                 lambda: self._inventory, cfg.cdi_root, cfg.data_dir)
        publisher = Publisher(self._api_client, cfg.driver_name, cfg.node_name, self._inventory)
        publisher.start()
        try:
            kubelet = start_kubelet_plugin(
                cfg.driver_name,
                str(dra_socket_path(str(cfg.data_dir), cfg.pod_uid or "")),
                str(registration_socket_path(str(cfg.registrar_dir), cfg.driver_name,
                                             cfg.pod_uid or "")),
                self.preparer,
                lock_file=str(cfg.data_dir / SERIALIZE_LOCK_FILE),
            )
        except BaseException:
            publisher.stop()
            raise
        self._running = _Running(publisher, kubelet)
        log.info("plugin %s on node %s started: %d devices in %d pools", cfg.driver_name,
                 cfg.node_name, sum(len(p.devices) for p in self._inventory.pools),
                 len(self._inventory.pools))

    def stop(self) -> None:
        """Remove our sockets first (the kubelet stops calling), then stop publishing."""
        running, self._running = self._running, None
        if running is None:
            return
        running.kubelet.stop()
        running.publisher.stop()


def run_plugin(config: Config) -> int:
    """Run until SIGTERM or SIGINT; returns the process exit code."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    api_client = load_api_client(config.kubeconfig)
    plugin = Plugin(config, api_client, make_backend(config))
    try:
        plugin.start()
    except Exception as err:
        log.error("plugin failed to start: %s", err)
        return 1
    try:
        while not stop.wait(1.0):
            pass
    finally:
        plugin.stop()
        api_client.close()
    return 0
