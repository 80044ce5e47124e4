"""The kubelet's sockets, served before the rest of the plugin is loaded.

`simdra run` starts them as soon as its flags are checked, with nothing but gRPC and
this package imported: the kubelet can register the plugin while the claims, devices
and Kubernetes client modules are still loading. A prepare or unprepare that comes
before the plugin's preparer exists waits for it (`dra_service.DeferredPreparer`); the
health stream starts with an empty list and gets the devices' as soon as they are
discovered.
With `count_calls`, every call on both sockets is counted from the first one on
(`simdra._driver.kubelet.call_counts`), for the metrics that come later.

The caller checks the plugin's files first (`simdra._driver.kubelet.state_check`): a plugin
whose state is damaged must never show the kubelet a registration socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simdra._driver.atomicfile import own_directory
from simdra._driver.kubelet.call_counts import CallCounter, KubeletCalls
from simdra._driver.kubelet.dra_service import DeferredPreparer, dra_methods
from simdra._driver.kubelet.endpoints import KubeletPlugin, start_kubelet_plugin
from simdra._driver.kubelet.health import HealthBoard
from simdra._driver.kubelet.state_check import (
    DATA_DIR_MODE as DATA_DIR_MODE,  # for simdra._driver.plugin
)

# The health stream re-sends the full list this often; the kubelet's device timeout is
# three times as long (simdra._driver.devices.live.HEALTH_TIMEOUT_SECONDS).
HEALTH_RESEND_SECONDS = 10.0


@dataclass
class EarlyKubelet:
    """Both sockets serving, and what the plugin connects to them once it is up."""

    kubelet: KubeletPlugin
    preparer: DeferredPreparer
    board: HealthBoard
    calls: KubeletCalls | None = None  # None: calls are not counted


def serve_kubelet_early(driver_name: str, data_dir: Path, dra_socket: str,
                        registration_socket: str, *,
                        count_calls: bool = False) -> EarlyKubelet:
    """Serve the DRA socket (DRA and health services) in `data_dir` (made ours first),
    then the registration socket, over a preparer and a health list still to come (see
    the module docstring). The plugin serializes its calls itself, after reading the
    claims. count_calls: count every call (for the metrics)."""
    own_directory(data_dir, DATA_DIR_MODE)
    preparer, board = DeferredPreparer(), HealthBoard(resend_seconds=HEALTH_RESEND_SECONDS)
    calls = KubeletCalls(dra_methods()) if count_calls else None
    kubelet = start_kubelet_plugin(driver_name, dra_socket, registration_socket, preparer,
                                   health=board,
                                   interceptors=[CallCounter(calls)] if calls is not None else ())
    return EarlyKubelet(kubelet, preparer, board, calls)
