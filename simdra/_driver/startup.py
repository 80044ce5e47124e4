"""`simdra run`: the plugin process from its checked flags to its exit.

The kubelet is served first: after the cheap checks of the cluster configuration and
of the plugin's files (`simdra._driver.kubelet.state_check`: damaged state refuses to start,
before any socket exists, so the kubelet never registers a plugin that cannot serve),
the DRA and registration sockets serve (`simdra._driver.kubelet.early`) with nothing but gRPC and
the kubelet package loaded, so the kubelet can register the plugin while the rest (the
claims and devices packages, the backend's discovery, then the Kubernetes client) is
still loading; calls that come meanwhile wait for the preparer. Then the `Plugin` is
built over those sockets, and the process waits for SIGTERM or SIGINT.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

from simdra._driver.config import Config
from simdra._driver.devices.catalog import Catalog
from simdra._driver.kube import ApiClientLoader, ClusterConfigError, check_cluster_config
from simdra._driver.kubelet.early import EarlyKubelet, serve_kubelet_early
from simdra._driver.kubelet.sockets import dra_socket_path, registration_socket_path
from simdra._driver.kubelet.state_check import check_state
from simdra._driver.observability.logs import configure_logging

if TYPE_CHECKING:
    from simdra._driver.plugin import Plugin

log = logging.getLogger(__name__)


def run_plugin(config: Config, catalog: Catalog | None = None) -> int:
    """Run until SIGTERM or SIGINT; returns the process exit code. `catalog`: the kinds
    always registered and the backends known by name (the command line passes simdra's).

    Raises ClusterConfigError (a usage error: exit 2) when there is no usable cluster
    configuration: at once for what can be checked without the client, else as soon as
    loading the client finds it (the plugin is stopped first).
    """
    check_cluster_config(config.kubeconfig)
    configure_logging(config.log_format, config.verbosity)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    api = ApiClientLoader(config.kubeconfig, on_error=stop.set)
    try:
        early = _serve_kubelet(config)
        plugin = _start_plugin(config, catalog or Catalog(), api, early)
    except Exception as err:  # one clear line instead of a traceback
        log.error("plugin failed to start: %s", err)
        return 1
    api.start()  # only now: the import must not slow down serving the kubelet
    try:
        return _serve_until_stopped(stop, api)
    finally:
        plugin.stop()
        api.close()


def _serve_kubelet(config: Config) -> EarlyKubelet:
    """The plugin's files checked (StateError: damaged), then the kubelet's sockets."""
    check_state(config.data_dir, config.cdi_root, fault_files=config.device_backend == "fake")
    pod_uid = config.pod_uid or ""
    return serve_kubelet_early(
        config.driver_name, config.data_dir,
        dra_socket_path(str(config.data_dir), pod_uid),
        registration_socket_path(str(config.registrar_dir), config.driver_name, pod_uid),
        count_calls=config.metrics_port >= 0)


def _start_plugin(config: Config, catalog: Catalog, api: ApiClientLoader,
                  early: EarlyKubelet) -> Plugin:
    """The plugin over the serving sockets; if it cannot start, the sockets are taken
    down (the kubelet deregisters it) and waiting calls fail with the reason."""
    try:
        from simdra._driver.plugin import Plugin, make_backend  # the heavy part, imported now

        plugin = Plugin(config, api, make_backend(config, catalog), early)
        if plugin.metrics is not None and early.calls is not None:
            # Before start(), which serves the metrics: the counts are there from the
            # first scrape, including the calls that came before the metrics existed.
            plugin.metrics.add_kubelet_calls(early.calls)
        plugin.start()
    except Exception as err:
        early.preparer.fail(f"the plugin failed to start: {err}")
        early.kubelet.stop(grace=None)
        raise
    return plugin


def _serve_until_stopped(stop: threading.Event, api: ApiClientLoader) -> int:
    # No timed wait: nothing runs here until a signal or a failed client load sets
    # `stop` (an untimed wait on the main thread still runs signal handlers at once).
    stop.wait()
    error = api.error()
    if isinstance(error, ClusterConfigError):
        raise error
    if error is not None:
        log.error("cannot build the Kubernetes API client: %s", error)
        return 1
    return 0
