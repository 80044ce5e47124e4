"""The parts of the plugin, for a driver that assembles its own: each is what `simdra run`
uses, with the same guarantees (crash-safe files, one-line errors, bounded texts).

The plugin as a whole::

    from simdra.runtime import Config, run_plugin
    raise SystemExit(run_plugin(config))   # registration, DRA + health services,
                                           # slice publishing, prepare/unprepare, metrics

One part at a time::

    publisher = Publisher(load_api_client(None), driver_name, node_name, inventory)
    feed = SliceFeed(client, driver_name)   # many nodes' publishers, one list + watch:
    Publisher(client, driver_name, node, inventory, feed=feed).start(); feed.start()
    prepared = plan_prepare(allocation, inventory, driver_name, rules)  # pure
    ledger = CapacityLedger.rebuild(records); problems = ledger.check(prepared)
    Checkpoint(data_dir).save(prepared)                       # durable, fsynced
    write_atomic(path, encode_spec(render_spec(kind, devices)))  # a CDI spec
    board = HealthBoard(); board.update(device_health)         # the kubelet's health stream
    allocation = parse_claim(claim_json, driver_name)           # our part of a claim
    ClaimStatusWriter(client, driver_name).sync(allocation.ref, prepared)  # status.devices

Their own docstrings give the arguments; `simdra._driver` holds the rest, which is private.
"""

from __future__ import annotations

from simdra._driver.atomicfile import remove_durable, safe_child, write_atomic
from simdra._driver.claims.allocation import parse_claim
from simdra._driver.claims.cdi import encode_spec, render_spec, spec_file_name
from simdra._driver.claims.checkpoint import Checkpoint
from simdra._driver.claims.errors import ClaimError
from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan import plan_prepare
from simdra._driver.claims.preparer import Preparer
from simdra._driver.claims.status import ClaimStatusWriter
from simdra._driver.claims.types import ClaimRef
from simdra._driver.config import Config
from simdra._driver.core.health import DeviceHealth, HealthStatus
from simdra._driver.kube import load_api_client
from simdra._driver.kubeapi.client import RestClient
from simdra._driver.kubeapi.errors import ApiStatusError
from simdra._driver.kubelet.health import HealthBoard
from simdra._driver.kubelet.registration import RegistrationServicer
from simdra._driver.observability.metrics import PluginMetrics
from simdra._driver.plugin import Plugin, make_backend
from simdra._driver.slices.backoff import Backoff
from simdra._driver.slices.desired import desired_pool
from simdra._driver.slices.feed import SliceFeed
from simdra._driver.slices.publisher import Publisher
from simdra._driver.startup import run_plugin

__all__ = [
    "ApiStatusError",
    "Backoff",
    "CapacityLedger",
    "Checkpoint",
    "ClaimError",
    "ClaimRef",
    "ClaimStatusWriter",
    "Config",
    "DeviceHealth",
    "HealthBoard",
    "HealthStatus",
    "Plugin",
    "PluginMetrics",
    "Preparer",
    "Publisher",
    "RegistrationServicer",
    "RestClient",
    "SliceFeed",
    "desired_pool",
    "encode_spec",
    "load_api_client",
    "make_backend",
    "parse_claim",
    "plan_prepare",
    "remove_durable",
    "render_spec",
    "run_plugin",
    "safe_child",
    "spec_file_name",
    "write_atomic",
]
