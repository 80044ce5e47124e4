"""The plugin's parts a driver composes when it assembles its own: the configuration, the
plugin and its run loop, the device backend, and the ResourceSlice publisher with its
shared feed. Each is what `simdra run` uses, with the same guarantees (crash-safe files,
one-line errors, bounded texts).

The plugin as a whole::

    from simdra.runtime import Config, run_plugin
    raise SystemExit(run_plugin(config))   # registration, DRA + health services,
                                           # slice publishing, prepare/unprepare, metrics

Publishing alone (a node's devices, or many nodes' on one connection)::

    client = load_api_client(None)                      # kubeconfig or in-cluster
    Publisher(client, driver_name, node_name, inventory).start()
    feed = SliceFeed(client, driver_name)               # many nodes: one list + watch
    Publisher(client, driver_name, node, inventory, feed=feed).start(); feed.start()

Their own docstrings give the arguments; `simdra._driver` holds the rest, which is
private. The names in `__deprecated__` (the prepare machinery, the ledger, the
checkpoint, CDI rendering, atomic files) still work and warn: they go in simdra 0.3.
"""

from __future__ import annotations

import warnings
from typing import Any

from simdra._driver.atomicfile import remove_durable as _remove_durable
from simdra._driver.atomicfile import safe_child as _safe_child
from simdra._driver.atomicfile import write_atomic as _write_atomic
from simdra._driver.builtins import BUILTIN
from simdra._driver.claims.ledger import CapacityLedger as _CapacityLedger
from simdra._driver.claims.plan.allocation import parse_claim as _parse_claim
from simdra._driver.claims.plan.cdi import encode_spec as _encode_spec
from simdra._driver.claims.plan.cdi import render_spec as _render_spec
from simdra._driver.claims.plan.cdi import spec_file_name as _spec_file_name
from simdra._driver.claims.plan.prepared import plan_prepare as _plan_prepare
from simdra._driver.claims.prepare.transaction import Preparer as _Preparer
from simdra._driver.claims.status.writer import ClaimStatusWriter as _ClaimStatusWriter
from simdra._driver.claims.store.checkpoint import Checkpoint as _Checkpoint
from simdra._driver.claims.types import ClaimError as _ClaimError
from simdra._driver.claims.types import ClaimRef as _ClaimRef
from simdra._driver.config import Config
from simdra._driver.core.health import DeviceHealth, HealthStatus
from simdra._driver.devices.backend import DeviceBackend
from simdra._driver.devices.kind_registry import KindSet
from simdra._driver.kube import load_api_client
from simdra._driver.kubeapi.client import RestClient
from simdra._driver.kubeapi.errors import ApiStatusError
from simdra._driver.kubelet.health import HealthBoard as _HealthBoard
from simdra._driver.kubelet.registration import RegistrationServicer as _RegistrationServicer
from simdra._driver.observability.metrics import PluginMetrics as _PluginMetrics
from simdra._driver.plugin import Plugin
from simdra._driver.plugin import make_backend as _make_backend
from simdra._driver.slices.backoff import Backoff
from simdra._driver.slices.desired import desired_pool as _desired_pool
from simdra._driver.slices.feed import SliceFeed
from simdra._driver.slices.publisher import Publisher
from simdra._driver.startup import run_plugin as _run_plugin

__all__ = [
    "ApiStatusError",
    "Backoff",
    "Config",
    "DeviceHealth",
    "HealthStatus",
    "Plugin",
    "Publisher",
    "RestClient",
    "SliceFeed",
    "load_api_client",
    "make_backend",
    "run_plugin",
]

# Internals this module once offered; each still works for one minor release, with a
# DeprecationWarning naming what to use instead.
_REPLACED_BY = "compose the plugin from Plugin or run_plugin, which do this themselves"
_DEPRECATED: dict[str, tuple[object, str]] = {
    "CapacityLedger": (_CapacityLedger, _REPLACED_BY),
    "Checkpoint": (_Checkpoint, _REPLACED_BY),
    "ClaimError": (_ClaimError, _REPLACED_BY),
    "ClaimRef": (_ClaimRef, _REPLACED_BY),
    "ClaimStatusWriter": (_ClaimStatusWriter, _REPLACED_BY),
    "HealthBoard": (_HealthBoard, _REPLACED_BY),
    "PluginMetrics": (_PluginMetrics, "Plugin.metrics, with Config.metrics_port set"),
    "Preparer": (_Preparer, _REPLACED_BY),
    "RegistrationServicer": (_RegistrationServicer, _REPLACED_BY),
    "desired_pool": (_desired_pool, "Publisher, which renders its pools itself"),
    "encode_spec": (_encode_spec, _REPLACED_BY),
    "parse_claim": (_parse_claim, _REPLACED_BY),
    "plan_prepare": (_plan_prepare, _REPLACED_BY),
    "remove_durable": (_remove_durable, "os.remove and an fsync of the directory"),
    "render_spec": (_render_spec, _REPLACED_BY),
    "safe_child": (_safe_child, "pathlib with a check that the name has no separator"),
    "spec_file_name": (_spec_file_name, _REPLACED_BY),
    "write_atomic": (_write_atomic, "a temporary file, fsync and os.replace"),
}
__deprecated__ = tuple(sorted(_DEPRECATED))


def run_plugin(config: Config) -> int:
    """Run the plugin `config` describes until SIGTERM or SIGINT, with simdra's kinds and
    backends and those `config.kinds` names (as `simdra run` does); the exit code.

    Raises ClusterConfigError when there is no usable cluster configuration.
    """
    return _run_plugin(config, BUILTIN)


def make_backend(config: Config) -> tuple[DeviceBackend, KindSet]:
    """The device backend `config.device_backend` names (simdra's `fake`, `sysfs`, `fpga`
    or `package.module:Class`), built as `simdra run` builds it, and the kinds registered
    with it (simdra's, `config.kinds`' and the backend's own)."""
    return _make_backend(config, BUILTIN)


def __getattr__(name: str) -> Any:
    found = _DEPRECATED.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value, instead = found
    warnings.warn(f"simdra.runtime.{name} is deprecated and goes in simdra 0.3: it is the "
                  f"plugin's internals; instead: {instead}", DeprecationWarning, stacklevel=2)
    return value
