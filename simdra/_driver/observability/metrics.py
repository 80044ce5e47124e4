"""Prepare/unprepare instruments and the preparer wrapper that feeds them.

Everything lives in one `CollectorRegistry` per `PluginMetrics` (not prometheus_client's
global one), so a process, or a test, can build as many independent sets as it likes.

    simdra_prepare_seconds / simdra_unprepare_seconds     histogram, one observation per
                                                          kubelet call (a batch of claims)
    simdra_prepare_total / simdra_unprepare_total         counter per claim, {result}:
                                                          "success" or "error"
    simdra_kubelet_calls_total                            counter per call the kubelet made
                                                          on the plugin's sockets, {service,
                                                          method, code}: "v1.DRAPlugin",
                                                          "NodePrepareResources", "OK" (see
                                                          simdra._driver.kubelet.call_counts); the
                                                          DRAPlugin methods at 0 from start
    simdra_reconciled_claims_total                        counter per claim unprepared by
                                                          reconciliation, {reason}
    simdra_reconcile_claim_reads_total                    counter per claim reconciliation
                                                          read from the API server, {result}:
                                                          "found", "gone" or "failed"
    simdra_reconcile_kept_claims_total                    counter per claim that looked
                                                          leaked long enough to be freed and
                                                          was kept, {why}: "in_use" (the
                                                          kubelet lists a pod using it),
                                                          "kubelet_unknown", "report_only";
                                                          once per claim and why
    simdra_reconcile_leaked_claims                        gauge: records that look leaked as
                                                          of the last check
    simdra_reconcile_brakes_total                         counter per check that found too
                                                          many records leaked at once and
                                                          freed none
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from simdra._driver.claims.reconcile.plan import READ_RESULTS, REASONS
from simdra._driver.claims.reconcile.reconciler import KEPT_WHY, ReconcileReports
from simdra._driver.claims.types import ClaimPreparer, ClaimRef, PrepareResult, UnprepareResult
from simdra._driver.kubelet.call_counts import KubeletCalls

SUCCESS, ERROR = "success", "error"
# Prepare spans an API read, fsyncs and CDI writes: milliseconds to tens of seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)


class PluginMetrics:
    """The registry the metrics endpoint serves, and the prepare/unprepare instruments."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """registry: where to register (default: a new, private one)."""
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.prepare_seconds = Histogram(
            "simdra_prepare_seconds",
            "Duration of NodePrepareResources calls (each a batch of claims)",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.unprepare_seconds = Histogram(
            "simdra_unprepare_seconds",
            "Duration of NodeUnprepareResources calls (each a batch of claims)",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.prepare_total = self._counter(
            "simdra_prepare", "Claims prepared, by result (success or error)",
            "result", (SUCCESS, ERROR))
        self.unprepare_total = self._counter(
            "simdra_unprepare", "Claims unprepared, by result (success or error)",
            "result", (SUCCESS, ERROR))
        self._reconcile_instruments()

    def _reconcile_instruments(self) -> None:
        """Reconciliation's: claims freed, reads, claims kept, leaked records, brakes."""
        self.reconciled_total = self._counter(
            "simdra_reconciled_claims",
            "Claims the kubelet would never unprepare, unprepared by reconciliation, by "
            "reason (see simdra._driver.claims.reconcile.plan)",
            "reason", REASONS)
        self.reconcile_reads_total = self._counter(
            "simdra_reconcile_claim_reads",
            "Claims reconciliation read from the API server (one GET each), by result "
            "(found, gone or failed)",
            "result", READ_RESULTS)
        self.reconcile_kept_total = self._counter(
            "simdra_reconcile_kept_claims",
            "Claims that looked leaked long enough to be freed and were kept, by why "
            "(in_use, kubelet_unknown, report_only); once per claim and why",
            "why", KEPT_WHY)
        self.reconcile_leaked = Gauge(
            "simdra_reconcile_leaked_claims",
            "Prepared claims that look leaked (the kubelet will never unprepare them) as "
            "of the last reconciliation check", registry=self.registry)
        self.reconcile_brakes_total = Counter(
            "simdra_reconcile_brakes",
            "Reconciliation checks that found too many claims leaked at once and freed none",
            registry=self.registry)

    def add_kubelet_calls(self, calls: KubeletCalls) -> None:
        """Serve simdra_kubelet_calls_total from `calls`, which the kubelet's sockets have
        counted into since before these metrics existed."""
        self.registry.register(KubeletCallsCollector(calls))

    def _counter(self, name: str, doc: str, label: str, values: Iterable[str]) -> Counter:
        """A counter with one label, each of `values` present at 0 before its first count."""
        counter = Counter(name, doc, [label], registry=self.registry)
        for value in values:
            counter.labels(**{label: value})
        return counter

    def reconciled(self, _claim: ClaimRef, reason: str) -> None:
        """Count one claim unprepared by reconciliation."""
        self.reconciled_total.labels(reason=reason).inc()

    def reconcile_read(self, result: str) -> None:
        """Count one claim read by reconciliation."""
        self.reconcile_reads_total.labels(result=result).inc()

    def reconcile_reports(self) -> ReconcileReports:
        """The reconciler's reports that these metrics count (no Events)."""
        return ReconcileReports(
            freed=self.reconciled, read=self.reconcile_read,
            kept=lambda _ref, _reason, why: self.reconcile_kept_total.labels(why=why).inc(),
            braked=lambda _leaked: self.reconcile_brakes_total.inc(),
            leaked=self.reconcile_leaked.set)


class KubeletCallsCollector(Collector):
    """simdra_kubelet_calls_total, read from a `KubeletCalls` at each scrape."""

    def __init__(self, calls: KubeletCalls) -> None:
        self._calls = calls

    def collect(self) -> Iterator[Metric]:
        """One sample per (service, method, code) counted so far."""
        family = CounterMetricFamily(
            "simdra_kubelet_calls",
            "Calls the kubelet made on the plugin's sockets, by service, method and gRPC "
            "status code", labels=("service", "method", "code"))
        for (service, method, code), count in sorted(self._calls.snapshot().items()):
            family.add_metric((service, method, code), count)
        yield family


def count_results(
    counter: Counter, claims: list[ClaimRef], answers: Mapping[str, PrepareResult | UnprepareResult]
) -> None:
    """One count per requested claim; a claim the answer lacks counts as an error (the
    kubelet treats it as one)."""
    failed = sum(1 for ref in claims if ref.uid not in answers or answers[ref.uid].error)
    if failed:
        counter.labels(result=ERROR).inc(failed)
    if len(claims) - failed:
        counter.labels(result=SUCCESS).inc(len(claims) - failed)


class InstrumentedPreparer:
    """A ClaimPreparer that times and counts the calls it passes on to `preparer`.

    An exception from the wrapped preparer (the protocol says there should be none)
    counts every claim of the call as an error and is re-raised unchanged.
    """

    def __init__(
        self,
        preparer: ClaimPreparer,
        metrics: PluginMetrics,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._preparer = preparer
        self._metrics = metrics
        self._clock = clock

    @property
    def wrapped(self) -> ClaimPreparer:
        """The preparer doing the work."""
        return self._preparer

    def prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        """Prepare through the wrapped preparer, recording duration and per-claim results."""
        m = self._metrics
        start = self._clock()
        answers: dict[str, PrepareResult] = {}
        try:
            answers = self._preparer.prepare(claims)
            return answers
        finally:
            m.prepare_seconds.observe(max(0.0, self._clock() - start))
            count_results(m.prepare_total, claims, answers)

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        """Unprepare through the wrapped preparer, recording duration and results."""
        m = self._metrics
        start = self._clock()
        answers: dict[str, UnprepareResult] = {}
        try:
            answers = self._preparer.unprepare(claims)
            return answers
        finally:
            m.unprepare_seconds.observe(max(0.0, self._clock() - start))
            count_results(m.unprepare_total, claims, answers)
