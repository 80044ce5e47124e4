"""Prepare/unprepare instruments and the preparer wrapper that feeds them.

Everything lives in one `CollectorRegistry` per `PluginMetrics` (not prometheus_client's
global one), so a process, or a test, can build as many independent sets as it likes.

    simdra_prepare_seconds / simdra_unprepare_seconds     histogram, one observation per
                                                          kubelet call (a batch of claims)
    simdra_prepare_total / simdra_unprepare_total         counter per claim, {result}:
                                                          "success" or "error"
    simdra_reconciled_claims_total                        counter per claim unprepared by
                                                          reconciliation, {reason}
    simdra_reconcile_claim_reads_total                    counter per claim reconciliation
                                                          read from the API server, {result}:
                                                          "found", "gone" or "failed"
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram

from driver.claims.reconcile_plan import READ_RESULTS, REASONS
from driver.claims.types import ClaimPreparer, ClaimRef, PrepareResult, UnprepareResult

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
        self.reconciled_total = self._counter(
            "simdra_reconciled_claims",
            "Claims the kubelet would never unprepare, unprepared by reconciliation, by "
            "reason (see driver.claims.reconcile_plan)",
            "reason", REASONS)
        self.reconcile_reads_total = self._counter(
            "simdra_reconcile_claim_reads",
            "Claims reconciliation read from the API server (one GET each), by result "
            "(found, gone or failed)",
            "result", READ_RESULTS)

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
