"""The Grafana dashboard simdra ships (deploy/grafana/simdra-dra.json) on real data: a
real Prometheus (Debian's package) scrapes our DaemonSet's plugin and the real kubelet
while pods with claims start and stop on the real node. Then every panel's query, with
the dashboard's variables filled in as Grafana fills them, must return data through
Prometheus' HTTP API, and each panel's data over the scenario is drawn as an SVG in the
logs directory (`dashboard/<panel>.svg`): the pictures of docs/operator.md."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.deploy.dashboard import PanelQueries, load, panels, slug, substitute, variable_defaults

from ..conftest import logs_dir
from ..controlplane import ControlPlane, record_pid
from ..prometheus import Job, Prometheus, PrometheusError, install
from ..realnode import REAL_NODE, Kube, PluginDeployment
from ..svgplot import Series, chart

SCRAPE_SECONDS = 2.0
# Grafana's $__rate_interval at Prometheus' default 15 s scrape interval (4 of them): the
# window an operator's panels use.
RATE_INTERVAL = "1m"
ROUNDS = 6  # pods started and stopped one after another
# Each pod runs alone this long before the next starts: the pictures show the calls
# spread out, as a node's pods come and go, rather than one burst.
PAUSE_SECONDS = 5.0


@pytest.fixture(scope="module")
def prometheus() -> Iterator[Prometheus]:
    """Prometheus scraping the jobs `simdra` (the plugin) and `kubelet`; no target yet."""
    try:
        prom = Prometheus(install(), logs_dir() / "prometheus",
                          [Job("simdra"), Job("kubelet", https=True)], SCRAPE_SECONDS,
                          on_spawn=record_pid)  # hack/e2e.sh ends it even if pytest is killed
        prom.start()
    except PrometheusError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield prom
    finally:
        prom.stop()


def scrape_node(prom: Prometheus, cp: ControlPlane, plugin: PluginDeployment) -> None:
    """Point Prometheus at the plugin pod's metrics port and the node's kubelet, found as
    Kubernetes service discovery would: the pod's IP, the Node's InternalIP and
    kubelet endpoint port."""
    [pod] = plugin.ready_pods()
    node = client.CoreV1Api(cp.api_client()).read_node(REAL_NODE)
    address = next(a.address for a in node.status.addresses if a.type == "InternalIP")
    port = node.status.daemon_endpoints.kubelet_endpoint.port
    prom.set_targets("simdra", [f"{pod['status']['podIP']}:9400"],
                     {"node": REAL_NODE, "pod": pod["metadata"]["name"]})
    prom.set_targets("kubelet", [f"{address}:{port}"], {"node": REAL_NODE})
    try:
        prom.wait_up(["simdra", "kubelet"])
    except PrometheusError as err:
        pytest.fail(str(err), pytrace=False)


def start_and_stop_pods(kube: Kube) -> None:
    """ROUNDS pods with one GPU claim each, each deleted once the next runs: prepares and
    unprepares through the real kubelet, and at the end one claim in use (the kubelet
    lists in dra_resource_claims_in_use only claims it holds prepared)."""
    kube.template("dashboard-gpu", "gpu.dra.example.com")
    previous = None
    for i in range(ROUNDS):
        name = f"dashboard-{i}"
        kube.pod(name, "dashboard-gpu")
        kube.wait_running(name)
        if previous:
            kube.delete_pod(previous)
        previous = name
        time.sleep(PAUSE_SECONDS)


def has_data(prom: Prometheus, expr: str) -> bool:
    """Whether `expr` gives a finite value now (a NaN draws nothing in Grafana); a query
    Prometheus refuses raises PrometheusError, which names it."""
    return any(math.isfinite(float(s["value"][1])) for s in prom.query(expr, time.time()))


def without_data(prom: Prometheus, queries: list[tuple[str, str]], timeout: float = 30
                 ) -> list[str]:
    """`'panel': query` for each (panel, PromQL) with no finite value now, after waiting
    up to `timeout` for the last scrapes to land; a refused query with its error."""
    waiting = list(queries)
    refused: list[str] = []
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        time.sleep(SCRAPE_SECONDS)
        still = []
        for title, expr in waiting:
            try:
                if not has_data(prom, expr):
                    still.append((title, expr))
            except PrometheusError as err:
                refused.append(f"{title!r}: {err}")
        waiting = still
    return refused + [f"{title!r}: {expr}" for title, expr in waiting]


def legend(template: str, labels: dict[str, str]) -> str:
    """Grafana's legend: `{{label}}` replaced by the series' label value."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), template).strip()


def draw(prom: Prometheus, panel: PanelQueries, values: dict[str, str], unit: str,
         span: tuple[float, float]) -> str:
    """The panel's picture: each query's series over `span`, sampled every scrape."""
    start, end = span
    steps = [start + SCRAPE_SECONDS * k for k in range(int((end - start) / SCRAPE_SECONDS) + 1)]
    series = []
    for expr, template in panel.queries:
        for s in prom.query_range(substitute(expr, values), start, end, SCRAPE_SECONDS):
            got = {round(float(t), 3): float(v) for t, v in s["values"]}
            points = tuple((t - start, got.get(round(t, 3), math.nan)) for t in steps)
            series.append(Series(legend(template, s["metric"]) or expr, points))
    return chart(panel.title, unit, series, end - start)


def test_every_dashboard_panel_shows_data_after_real_prepares(
    prometheus: Prometheus, control_plane: ControlPlane, plugin: PluginDeployment, kube: Kube
) -> None:
    dashboard = load()
    values = {"__rate_interval": RATE_INTERVAL, **variable_defaults(dashboard)}
    scrape_node(prometheus, control_plane, plugin)
    began = time.time()

    start_and_stop_pods(kube)

    queries = [(p.title, substitute(expr, values)) for p in panels(dashboard)
               for expr, _ in p.queries]
    empty = without_data(prometheus, queries)
    pictures: Path = logs_dir() / "dashboard"
    pictures.mkdir(exist_ok=True)
    units = {p["title"]: p["fieldConfig"]["defaults"]["unit"] for p in dashboard["panels"]
             if p.get("targets")}
    # From the first scrapes (wait_up saw one) to the last.
    span = (math.floor(began) - 2 * SCRAPE_SECONDS, math.floor(time.time()))
    for panel in panels(dashboard):
        svg = draw(prometheus, panel, values, units[panel.title], span)
        (pictures / f"{slug(panel.title)}.svg").write_text(svg)
    assert not empty, (f"dashboard panels with no data from Prometheus (log: "
                       f"{prometheus.log}): " + "; ".join(empty))
