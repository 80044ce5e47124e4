"""The panels of simdra's Grafana dashboard (deploy/grafana/simdra-dra.json), as data:
hack/gen_dashboard.py turns them into Grafana's JSON.

Every query names only metrics that exist: the plugin's own
(simdra/_driver/observability/metrics.py) and the kubelet's DRA metrics
(`dra_operations_duration_seconds`, `dra_grpc_operations_duration_seconds`,
`dra_resource_claims_in_use`); tests/deploy/test_grafana_dashboard.py checks that, and the
e2e (tests/e2e/node_scenarios/test_dashboard.py) evaluates every query on a real
Prometheus scraping the plugin and a real kubelet.

`$__rate_interval` is Grafana's own window for rate(); `$driver` is the dashboard's
DRA driver name variable (the plugin's DRIVER_NAME).
"""

from __future__ import annotations

from dataclasses import dataclass

RATE = "$__rate_interval"
DRIVER = 'driver_name="$driver"'


@dataclass(frozen=True)
class Query:
    """One target of a panel: its PromQL and its legend (Grafana's `{{label}}` form)."""

    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    """One time-series panel: its title, what it tells an operator, the unit of its
    values (a Grafana unit id) and its queries."""

    title: str
    description: str
    unit: str
    queries: tuple[Query, ...]


def _quantiles(histogram: str, matchers: str = "") -> tuple[Query, ...]:
    """p50 and p99 of `histogram` (its `_bucket` series), over all its series."""
    return tuple(
        Query(f"histogram_quantile({q}, sum by (le) "
              f"(rate({histogram}_bucket{matchers}[{RATE}])))", f"p{round(q * 100)}")
        for q in (0.5, 0.99))


def _mean_and_p99(histogram: str, by: str, matchers: str = "") -> tuple[Query, ...]:
    """The mean and p99 of `histogram` per value of label `by`. The kubelet's DRA
    histograms start at 0.1 s: a p99 inside that first bucket is an interpolation
    (99 ms for any faster call), so the mean, from `_sum` and `_count`, says how fast."""
    def rate(suffix: str) -> str:
        return f"sum by ({by}) (rate({histogram}_{suffix}{matchers}[{RATE}]))"
    return (Query(f"{rate('sum')} / {rate('count')}", f"mean {{{{{by}}}}}"),
            Query(f"histogram_quantile(0.99, sum by (le, {by}) "
                  f"(rate({histogram}_bucket{matchers}[{RATE}])))", f"p99 {{{{{by}}}}}"))


CLAIMS = (
    Panel("Claims prepared per second",
          "Claims the plugin prepared (NodePrepareResources), by result. Errors keep pods "
          "from starting: the kubelet retries, and the pod's events name the reason.",
          "ops", (Query(f"sum by (result) (rate(simdra_prepare_total[{RATE}]))", "{{result}}"),)),
    Panel("Claims unprepared per second",
          "Claims the plugin unprepared (NodeUnprepareResources), by result. An error "
          "leaves the device held until the kubelet's retry succeeds.",
          "ops",
          (Query(f"sum by (result) (rate(simdra_unprepare_total[{RATE}]))", "{{result}}"),)),
    Panel("Claims in use, per kubelet",
          "ResourceClaims of this driver that each kubelet holds prepared for its pods "
          "(the kubelet's dra_resource_claims_in_use).",
          "short",
          (Query(f"sum by (instance) (dra_resource_claims_in_use{{{DRIVER}}})",
                 "{{instance}}"),)),
)

LATENCY = (
    Panel("Prepare call latency, in the plugin",
          "Time the plugin took per NodePrepareResources call (a batch of claims): reading "
          "the claims, the checkpoint's fsync and the CDI spec writes.",
          "s", _quantiles("simdra_prepare_seconds")),
    Panel("Unprepare call latency, in the plugin",
          "Time the plugin took per NodeUnprepareResources call (a batch of claims).",
          "s", _quantiles("simdra_unprepare_seconds")),
    Panel("gRPC call latency, as the kubelet sees it",
          "The kubelet's own timing of its calls to this driver, by method: the plugin's "
          "time plus the socket. Far above the plugin's own figures, the time goes to "
          "the kubelet or the node, not the plugin. The kubelet's buckets start at 0.1 s: "
          "below that the p99 reads 99 ms whatever the calls took; the mean is exact.",
          "s", _mean_and_p99("dra_grpc_operations_duration_seconds", "method_name",
                             f"{{{DRIVER}}}")),
    Panel("Pod start and stop: the kubelet's DRA step",
          "The kubelet's time to prepare (pod start) or unprepare (pod stop) all the "
          "claims of a pod, every driver together, by operation. As above, a p99 under "
          "0.1 s is the first bucket's interpolation; the mean is exact.",
          "s", _mean_and_p99("dra_operations_duration_seconds", "operation_name")),
)

KUBELET_CALLS = (
    Panel("Kubelet calls on the plugin's sockets",
          "Every call the kubelet made on the plugin's sockets, by method and gRPC code: "
          "registration, prepares, unprepares and the health stream. A code other than "
          "OK names what went wrong.",
          "ops",
          (Query(f"sum by (method, code) (rate(simdra_kubelet_calls_total[{RATE}]))",
                 "{{method}} {{code}}"),)),
)

RECONCILIATION = (
    Panel("Claims that look leaked",
          "Prepared claims the kubelet will never unprepare, as of reconciliation's last "
          "check (docs/operator.md, Reconciliation). Above zero for long: read the "
          "plugin's log lines `reconcile: kept claim`.",
          "short", (Query("sum(simdra_reconcile_leaked_claims)", "leaked"),)),
    Panel("Reconciliation: claims freed and kept",
          "Claims reconciliation unprepared (by reason), those it kept although they "
          "look leaked (by why), and checks that found too many leaked at once and freed "
          "none (brakes).",
          "short",
          (Query(f"sum by (reason) (increase(simdra_reconciled_claims_total[{RATE}]))",
                 "freed: {{reason}}"),
           Query(f"sum by (why) (increase(simdra_reconcile_kept_claims_total[{RATE}]))",
                 "kept: {{why}}"),
           Query(f"sum(increase(simdra_reconcile_brakes_total[{RATE}]))", "brakes"))),
    Panel("Reconciliation: claim reads from the API server",
          "Claims reconciliation read from the API server (one GET each), by result: found, "
          "gone or failed.",
          "ops",
          (Query(f"sum by (result) (rate(simdra_reconcile_claim_reads_total[{RATE}]))",
                 "{{result}}"),)),
)

# (row title, its panels), top to bottom.
ROWS: tuple[tuple[str, tuple[Panel, ...]], ...] = (
    ("Claims", CLAIMS),
    ("Latency", LATENCY),
    ("Kubelet calls", KUBELET_CALLS),
    ("Reconciliation", RECONCILIATION),
)
