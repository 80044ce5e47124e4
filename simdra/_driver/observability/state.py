"""Gauges and counters read from the live plugin objects when Prometheus scrapes.

No background thread and no copies kept: every scrape asks the providers for a snapshot
and turns it into metric families. A provider may return None ("not there yet", e.g. the
publisher before start) and its families are left out; a provider that raises is logged
and counted in `simdra_metrics_collect_errors_total{section}`, and the rest of the scrape
still answers.

    simdra_prepared_claims                             claims prepared on this node
    simdra_corrupt_records                             unreadable checkpoint records
    simdra_pool_devices{pool}                          devices in the inventory
    simdra_pool_slices{pool}                           ResourceSlices stored now
    simdra_pool_generation{pool}                       published generation
    simdra_pool_validation_problems{pool}              reasons a pool is not published
    simdra_api_writes_total{verb}                      successful slice writes
    simdra_publish_errors_total{kind}                  publishing errors
    simdra_publisher_synced                            1 when every valid pool is published
    simdra_publisher_last_sync_timestamp_seconds       when it last became synced
    simdra_publisher_relists_total, simdra_publisher_reconciles_total
    simdra_device_capacity{pool,device,capacity}       a device's capacity
    simdra_device_capacity_consumed{pool,device,capacity}
    simdra_device_prepared_units{pool,device}          claims/shares prepared on it
    simdra_pool_counter{pool,counter_set,counter}      a shared counter's total
    simdra_pool_counter_consumed{pool,counter_set,counter}
    simdra_device_healthy{pool,device}                 1 healthy, 0 unhealthy or unknown

Consumption follows `simdra usage`: a share consumes its consumedCapacity, an exclusive
device all of its capacity while a claim holds it, admin access nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan.prepared import PreparedClaim
from simdra._driver.core.quantity import QuantityError, parse_quantity
from simdra._driver.devices.model import Inventory, Pool
from simdra._driver.kubelet.health import DeviceHealth, HealthStatus
from simdra._driver.slices.stats import PublisherStats

log = logging.getLogger(__name__)

T = TypeVar("T")
Provider = Callable[[], T | None]
Amounts = dict[str, Fraction]
DeviceKey = tuple[str, str]


@dataclass(frozen=True)
class DeviceUse:
    """What the prepared claims hold of one device."""

    capacity: Amounts  # as recorded when the claims were prepared
    consumed: Amounts
    units: int


def device_use(records: Iterable[PreparedClaim]) -> dict[DeviceKey, DeviceUse]:
    """Per (pool, device) with prepared units: recorded capacity, consumption (the
    ledger's rule, as `simdra usage` shows it) and unit count."""
    claims = list(records)
    ledger = CapacityLedger.rebuild(claims)
    capacity: dict[DeviceKey, Amounts] = {}
    units: dict[DeviceKey, int] = {}
    for claim in claims:
        for unit in claim.units:
            key = (unit.pool, unit.device)
            capacity[key] = dict(unit.device_capacity)
            units[key] = units.get(key, 0) + 1
    return {key: DeviceUse(capacity[key], ledger.consumed(*key, capacity[key]), units[key])
            for key in capacity}


def pool_counters(pool: Pool) -> dict[str, Amounts]:
    """Counter set -> counter -> total, from the pool's published sharedCounters."""
    totals: dict[str, Amounts] = {}
    for entry in pool.shared_counters:
        try:
            totals[str(entry["name"])] = {
                str(name): parse_quantity(c["value"])
                for name, c in (entry.get("counters") or {}).items()
            }
        except (KeyError, TypeError, AttributeError, QuantityError):
            continue  # the publisher reports malformed pools; metrics show what is usable
    return totals


def _gauge(name: str, doc: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


def _counter(name: str, doc: str, labels: Iterable[str] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=list(labels))


class StateCollector(Collector):
    """A prometheus_client collector over live plugin state (see the module doc).

    prepared: the prepared claims by UID (`Preparer.prepared`, which copies its map, so
        a scrape never iterates a dict the preparer is changing);
    corrupt_records: `Preparer.corrupt_records`;
    inventory: the inventory being published and prepared;
    publisher_stats: `Publisher.stats`;
    health: the current health of every device.
    """

    def __init__(
        self,
        *,
        prepared: Provider[Mapping[str, PreparedClaim]] | None = None,
        corrupt_records: Provider[Sized] | None = None,
        inventory: Provider[Inventory] | None = None,
        publisher_stats: Provider[PublisherStats] | None = None,
        health: Provider[Iterable[DeviceHealth]] | None = None,
    ) -> None:
        self._prepared = prepared
        self._corrupt = corrupt_records
        self._inventory = inventory
        self._publisher_stats = publisher_stats
        self._health = health
        self._errors: dict[str, int] = {}
        self._errors_lock = threading.Lock()  # scrapes may run concurrently

    def describe(self) -> list[Metric]:
        """Nothing up front: the families depend on what the providers return."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Read every provider once and yield the families (see the module doc)."""
        inventory = self._read("inventory", self._inventory)
        records = self._read("prepared", self._prepared)
        yield from self._section("claims", lambda: self._claim_families(records))
        yield from self._section("inventory", lambda: self._inventory_families(inventory))
        yield from self._section("capacity", lambda: _capacity_families(inventory, records))
        stats = self._read("publisher", self._publisher_stats)
        yield from self._section("publisher", lambda: _publisher_families(stats))
        health = self._read("health", self._health)
        yield from self._section("health", lambda: _health_families(health))
        errors = _counter("simdra_metrics_collect_errors",
                          "Scrape-time reads of plugin state that failed", ["section"])
        with self._errors_lock:
            counts = sorted(self._errors.items())
        for section, count in counts:
            errors.add_metric([section], count)
        yield errors

    def _read(self, section: str, provider: Provider[T] | None) -> T | None:
        if provider is None:
            return None
        try:
            return provider()
        except Exception as exc:
            self._failed(section, exc)
            return None

    def _section(self, section: str, build: Callable[[], list[Metric]]) -> list[Metric]:
        """Build a section's families completely before yielding any, so a failure
        leaves no half-filled family in the scrape."""
        try:
            return build()
        except Exception as exc:
            self._failed(section, exc)
            return []

    def _failed(self, section: str, exc: Exception) -> None:
        with self._errors_lock:
            self._errors[section] = self._errors.get(section, 0) + 1
        log.warning("metrics: reading %s failed: %s: %s", section, type(exc).__name__, exc)

    def _claim_families(self, records: Mapping[str, PreparedClaim] | None) -> list[Metric]:
        families: list[Metric] = []
        if records is not None:
            families.append(GaugeMetricFamily(
                "simdra_prepared_claims", "Claims prepared on this node", value=len(records)))
        corrupt = self._read("corrupt_records", self._corrupt)
        if corrupt is not None:
            families.append(GaugeMetricFamily(
                "simdra_corrupt_records",
                "Checkpoint records that cannot be read (their claims cannot be prepared)",
                value=len(corrupt)))
        return families

    @staticmethod
    def _inventory_families(inventory: Inventory | None) -> list[Metric]:
        if inventory is None:
            return []
        devices = _gauge("simdra_pool_devices", "Devices in the inventory, per pool", ["pool"])
        for pool in inventory.pools:
            devices.add_metric([pool.name], len(pool.devices))
        return [devices]


def _capacity_families(
    inventory: Inventory | None, records: Mapping[str, PreparedClaim] | None
) -> list[Metric]:
    if inventory is None and records is None:
        return []
    use = device_use(records.values()) if records is not None else {}
    total = _gauge("simdra_device_capacity", "A device's capacity",
                   ["pool", "device", "capacity"])
    consumed = _gauge("simdra_device_capacity_consumed",
                      "Capacity held by prepared claims (an exclusive device: all of it)",
                      ["pool", "device", "capacity"])
    units = _gauge("simdra_device_prepared_units",
                   "Prepared claims and shares on a device", ["pool", "device"])
    capacities: dict[DeviceKey, Amounts] = {key: u.capacity for key, u in use.items()}
    if inventory is not None:
        # The inventory is the truth for devices it has; records cover removed devices.
        capacities.update({(p.name, d.name): d.capacity() for p, d in inventory.devices()})
    for key in sorted(capacities):
        held = use.get(key)
        for name, amount in sorted(capacities[key].items()):
            total.add_metric([*key, name], float(amount))
            used = held.consumed.get(name, Fraction(0)) if held else Fraction(0)
            consumed.add_metric([*key, name], float(used))
        units.add_metric(list(key), held.units if held else 0)
    return [total, consumed, units, *_counter_families(inventory, records)]


def _counter_families(
    inventory: Inventory | None, records: Mapping[str, PreparedClaim] | None
) -> list[Metric]:
    if inventory is None:
        return []
    ledger = CapacityLedger.rebuild(records.values() if records is not None else ())
    total = _gauge("simdra_pool_counter", "A shared counter's total",
                   ["pool", "counter_set", "counter"])
    consumed = _gauge("simdra_pool_counter_consumed",
                      "A shared counter consumed by the devices in use",
                      ["pool", "counter_set", "counter"])
    for pool in inventory.pools:
        sets = pool_counters(pool)
        if not sets:
            continue
        in_use = ledger.counters_used(pool.name).amounts
        for set_name, counters in sorted(sets.items()):
            for counter, amount in sorted(counters.items()):
                labels = [pool.name, set_name, counter]
                total.add_metric(labels, float(amount))
                used = in_use.get(set_name, {}).get(counter, Fraction(0))
                consumed.add_metric(labels, float(used))
    return [total, consumed]


def _publisher_families(stats: PublisherStats | None) -> list[Metric]:
    if stats is None:
        return []
    per_pool = [
        ("simdra_pool_slices", "ResourceSlices of a pool stored in the API server",
         stats.slices),
        ("simdra_pool_generation", "Published generation of a pool", stats.generations),
        ("simdra_pool_validation_problems", "Reasons a pool cannot be published",
         {p: len(v) for p, v in stats.validation_problems.items()}),
    ]
    families: list[Metric] = []
    for name, doc, values in per_pool:
        family = _gauge(name, doc, ["pool"])
        for pool, value in sorted(values.items()):
            family.add_metric([pool], value)
        families.append(family)
    writes = _counter("simdra_api_writes", "Successful ResourceSlice writes, by verb", ["verb"])
    for verb, count in sorted(stats.writes.items()):
        writes.add_metric([verb], count)
    errors = _counter("simdra_publish_errors", "Slice publishing errors, by kind", ["kind"])
    for kind, count in sorted(stats.errors.items()):
        errors.add_metric([kind], count)
    families += [
        writes,
        errors,
        GaugeMetricFamily("simdra_publisher_synced",
                          "1 when every valid pool is published as desired",
                          value=1 if stats.synced else 0),
        CounterMetricFamily("simdra_publisher_relists", "Full lists of our ResourceSlices",
                            value=stats.relists),
        CounterMetricFamily("simdra_publisher_reconciles", "Pool reconcile passes",
                            value=stats.reconciles),
    ]
    if stats.last_sync_time is not None:
        families.append(GaugeMetricFamily(
            "simdra_publisher_last_sync_timestamp_seconds",
            "When the publisher last became synced (Unix time)", value=stats.last_sync_time))
    return families


def _health_families(health: Iterable[DeviceHealth] | None) -> list[Metric]:
    if health is None:
        return []
    family = _gauge("simdra_device_healthy", "1 when a device is healthy, 0 when it is "
                    "unhealthy or its health is unknown", ["pool", "device"])
    for device in sorted(health, key=lambda d: (d.pool_name, d.device_name)):
        healthy = 1 if device.health is HealthStatus.HEALTHY else 0
        family.add_metric([device.pool_name, device.device_name], healthy)
    return [family]
