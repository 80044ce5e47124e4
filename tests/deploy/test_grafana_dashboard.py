"""The Grafana dashboard simdra ships (deploy/grafana/simdra-dra.json) is generated from
hack/dashboard_panels.py, and every panel's PromQL names only metrics and labels that
exist: the plugin's, as simdra/_driver/observability/metrics.py registers them, and the
kubelet's DRA metrics. A renamed metric or label fails here, not on an operator's empty
panel. (The e2e evaluates every query on a real Prometheus: test_dashboard.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from simdra._driver.kubelet.call_counts import KubeletCalls
from simdra._driver.observability.metrics import PluginMetrics
from tests.deploy.dashboard import (
    DASHBOARD,
    JSON,
    PICTURES,
    label_names,
    load,
    metric_names,
    panels,
    slug,
)
from tests.deploy.layout import REPO

GENERATOR = REPO / "hack" / "gen_dashboard.py"
# The kubelet's DRA metrics (pkg/kubelet/metrics, Kubernetes 1.34+) and their labels.
KUBELET_HISTOGRAMS = {
    "dra_operations_duration_seconds": {"operation_name", "is_error"},
    "dra_grpc_operations_duration_seconds": {"driver_name", "method_name", "grpc_status_code"},
}
KUBELET_GAUGES = {"dra_resource_claims_in_use": {"driver_name"}}
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"instance", "job"}


def served() -> dict[str, set[str]]:
    """Every series name the plugin and the kubelet serve -> its label names."""
    metrics = PluginMetrics()
    metrics.add_kubelet_calls(KubeletCalls([("v1.DRAPlugin", "NodePrepareResources")]))
    names: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    for name, labels in KUBELET_HISTOGRAMS.items():
        names[f"{name}_bucket"] = labels | {"le"}
        names[f"{name}_sum"] = names[f"{name}_count"] = set(labels)
    names.update(KUBELET_GAUGES)
    return names


def unserved(dashboard: JSON) -> list[str]:
    """`panel: query: what` for each metric or label a query names that nobody serves."""
    known = served()
    problems = []
    for panel in panels(dashboard):
        for expr, legend in panel.queries:
            names = metric_names(expr)
            labels = set().union(TARGET_LABELS, *(known.get(n, set()) for n in names))
            for what in sorted(names - known.keys()):
                problems.append(f"{panel.title}: {expr}: no metric {what}")
            for what in sorted(label_names(expr, legend) - labels):
                problems.append(f"{panel.title}: {expr}: no label {what}")
    return problems


def _generator(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GENERATOR), "--root", str(root), *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_committed_dashboard_is_generated_from_its_panels():
    done = _generator(REPO, "--check")

    assert done.returncode == 0, done.stderr + "\nregenerate with hack/gen-dashboard.sh"


def test_a_stale_dashboard_is_named_and_regenerated(tmp_path):
    stale = tmp_path / DASHBOARD.relative_to(REPO)
    stale.parent.mkdir(parents=True)
    stale.write_text(DASHBOARD.read_text().replace("simdra_prepare_total", "simdra_old"))

    checked = _generator(tmp_path, "--check")
    written = _generator(tmp_path)

    assert checked.returncode == 1
    assert checked.stderr.strip() == ("deploy/grafana/simdra-dra.json is stale; run "
                                      "hack/gen-dashboard.sh")
    assert written.returncode == 0, written.stderr
    assert stale.read_text() == DASHBOARD.read_text()


def test_every_panel_queries_only_metrics_and_labels_that_exist():
    dashboard = load()
    queried = {n for p in panels(dashboard) for expr, _ in p.queries for n in metric_names(expr)}

    assert unserved(dashboard) == []
    # Guards the check against passing because it read nothing: the panels name the
    # plugin's metrics and each of the kubelet's three.
    assert {"simdra_prepare_total", "simdra_kubelet_calls_total",
            "dra_operations_duration_seconds_bucket",
            "dra_grpc_operations_duration_seconds_bucket",
            "dra_resource_claims_in_use"} <= queried


def test_a_panel_naming_a_metric_or_label_nobody_serves_is_named():
    dashboard = json.loads(DASHBOARD.read_text()
                           .replace("simdra_prepare_total", "simdra_prepares_total")
                           .replace("by (le, method_name)", "by (le, method)")
                           .replace('driver_name=\\"$driver\\"', 'driver=\\"$driver\\"'))

    problems = unserved(dashboard)

    assert "Claims prepared per second: sum by (result) (rate(simdra_prepares_total"\
           "[$__rate_interval])): no metric simdra_prepares_total" in problems
    assert any(p.startswith("gRPC call latency, as the kubelet sees it: ")
               and p.endswith("no label method") for p in problems)
    assert any(p.startswith("Claims in use, per kubelet: ") and p.endswith("no label driver")
               for p in problems)


def test_every_panel_has_its_picture_in_the_operator_guide():
    guide = (REPO / "docs" / "operator.md").read_text()
    titles = [p.title for p in panels(load())]

    missing = [t for t in titles if not (PICTURES / f"{slug(t)}.svg").is_file()
               or f"(dashboard/{slug(t)}.svg)" not in guide]

    assert missing == [], "copy the e2e's pictures (docs/operator.md, The dashboard)"
