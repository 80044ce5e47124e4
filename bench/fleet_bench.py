"""`simdra fleet` against a real control plane: the cost of simulating N DRA nodes, and what
the real scheduler does with them, against floors measured in the same run.

For each --nodes size (default 100; e.g. `--nodes 100,300,1000`) on a fresh cluster (the
e2e's etcd, kube-apiserver, kube-controller-manager, kube-scheduler from
~/.cache/simdra-e2e, and kwok's controller for the fake nodes, tests/e2e/build-kwok.sh):

- time to publish: the fleet's own `published` line, and from its exec as seen here;
  floor: a bare loop creating the same number of Nodes and the very same slices (read
  back, renamed), one request each on one connection (bench/fleet_floor.py);
- API requests per node at start, as the API server counted them (the fleet runs as a
  service account of its own in FlowSchemas of its own, one per verb and resource:
  bench/fleet_requests.py), and what they were; target and floor: what the bare loop
  needed (one Node and its slices per node);
- the same over an idle window (--idle, 60 s), per node per hour; target 0;
- the fleet's RSS and CPU over that window, per simulated node; targets at 1,000 nodes x
  8 GPUs: RSS <= 200 MiB, CPU <= 2 % of a core;
- pods with a claim from a ResourceClaimTemplate (one GPU), --pods-per-node each (5:
  5,000 pods at 1,000 nodes), created in a burst: the real scheduler's pods/s (creation
  to spec.nodeName set) next to scheduler_perf's DRA thresholds, and pod start
  (creation to Ready, kwok playing the kubelet) p50/p90/p99, which in a burst is mostly
  the wait in the scheduler's queue;
- then --paced-per-node more (0.5) at --paced-qps (5/s, as ClusterLoader2's DRA steady
  state creates them): pod start p50/p90/p99 next to ClusterLoader2's DRA thresholds
  (see THRESHOLDS); how many claims got status.devices from the fleet. `--pods-per-node
  0` skips both (publishing only).

With `--shards n`, n fleet processes (`--shard i/n`, as n replicas of deploy/fleet) split
the nodes on the same control plane: published when the last one is, requests and CPU
summed, RSS summed and of the largest shard.
It ends with one table: every figure per size and its growth from the smallest size to
the largest (per node where the figure is per node: 1.00 is flat).

    flock /tmp/e2e.lock python bench/fleet_bench.py --nodes 100,300 [--idle 60]
    flock /tmp/e2e.lock python bench/fleet_bench.py --nodes 5000 --shards 2 --pods-per-node 0

Run it where no other cluster runs (it starts one per size on loopback ports).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from fleet_api import Api
from fleet_cluster import DRIVER_NAME, Cluster, fleet_available
from fleet_floor import SLICES, remove_floor, run_floor
from fleet_group import FleetGroup
from fleet_pods import claims_with_status, percentile, prepare, run_pods
from fleet_requests import delta, line, writes

MIX = "gpu8:70,nic2:20,partitioned:10"
PREFIX = "bench"
# Where the thresholds we print come from (looked up, not invented):
# - scheduler_perf, kubernetes/kubernetes test/integration/scheduler_perf/dra/
#   performance-config.yaml: SchedulingWithResourceClaimTemplate 5000pods_500nodes
#   threshold 40 pods/s (56 with queueing hints), SteadyStateClusterResourceClaimTemplate
#   64-70 pods/s; 500 nodes, 10 claims each, fake slices written by the test itself.
# - ClusterLoader2, kubernetes/perf-tests clusterloader2/testing/dra/config.yaml
#   (dra-steady-state, 8 GPUs per node, the reference driver on real nodes): the fill
#   phase's PodStartupLatency threshold 20 s; the churn phase's p50/p90/p99 40/60/80 s.
THRESHOLDS = (
    "scheduler_perf DRA CI thresholds: 40-70 pods/s (SchedulingWithResourceClaimTemplate "
    "5000pods_500nodes: 40, 56 with queueing hints; SteadyState*: 60-70) "
    "[kubernetes/kubernetes test/integration/scheduler_perf/dra/performance-config.yaml]",
    "ClusterLoader2 DRA pod startup thresholds: fill 20 s; churn p50 40 s, p90 60 s, "
    "p99 80 s [kubernetes/perf-tests clusterloader2/testing/dra/config.yaml]",
)
Figures = dict[str, float]
Counts = tuple[dict[str, float], dict[str, float]]


def _publish(cluster: Cluster, fleet: FleetGroup, nodes: int, before: Counts,
             out: Figures) -> None:
    said, seen, _, slices = fleet.wait_published(timeout=1800)
    cpu, _ = fleet.usage()
    time.sleep(5)  # anything the fleet does right after its line still counts as start
    requests = cluster.fleet_requests()
    out.update({"publish_s": said, "publish_seen_s": seen, "slices": slices,
                "slices_per_node": slices / nodes, "start_requests": requests,
                "start_requests_per_node": requests / nodes,
                "fleet_own_start_requests": fleet.own_requests(),
                "watches_at_publish": fleet.own_requests(verb="watch"),
                "published_at": time.monotonic(), "start_cpu_s": cpu})
    print(f"  published {nodes} nodes, {slices} slices: {said:.1f} s by its line, "
          f"{seen:.1f} s from exec, {cpu:.1f} s of CPU; API requests {requests:.0f} "
          f"({requests / nodes:.2f}/node; the fleet counts {out['fleet_own_start_requests']:.0f})",
          flush=True)
    schemas, answers = cluster.request_counts()
    print(f"  the fleet's requests at start: {line(delta(schemas, before[0]), nodes)}",
          flush=True)
    answered = delta(answers, before[1])
    failed = {k: v for k, v in answered.items() if not k.endswith((" 200", " 201"))}
    print(f"  answers other than 200/201 (all clients): {line(failed, nodes)}", flush=True)
    print(f"  writes of all clients meanwhile: {line(writes(answered), nodes)}", flush=True)


def _idle(cluster: Cluster, fleet: FleetGroup, nodes: int, window: float,
          out: Figures) -> None:
    cpu0, _ = fleet.usage()
    req0, t0 = cluster.fleet_requests(), time.monotonic()
    time.sleep(window)
    cpu1, shards = fleet.usage()
    req1, t1 = cluster.fleet_requests(), time.monotonic()
    per_hour = (req1 - req0) / (t1 - t0) * 3600
    cpu_pct = (cpu1 - cpu0) / (t1 - t0) * 100
    rss = sum(shards)
    out.update({"idle_requests_per_node_hour": per_hour / nodes,
                "rss_mib": rss / 2**20, "rss_kib_per_node": rss / 1024 / nodes,
                "rss_mib_largest_shard": max(shards) / 2**20,
                "idle_cpu_pct": cpu_pct, "idle_cpu_pct_per_node": cpu_pct / nodes})
    each = " + ".join(f"{r / 2**20:.1f}" for r in shards)
    print(f"  idle {t1 - t0:.0f} s: {req1 - req0:.0f} requests ({per_hour / nodes:.2f}/node/h); "
          f"RSS {rss / 2**20:.1f} MiB" + (f" ({each})" if len(shards) > 1 else "") +
          f"; CPU {cpu_pct:.2f} % of a core", flush=True)


def _floor(api: Api, nodes: int, out: Figures) -> None:
    slices = api.items(f"{SLICES}?fieldSelector=spec.driver%3D{DRIVER_NAME}")
    names = [n["metadata"]["name"] for n in
             api.items(f"/api/v1/nodes?labelSelector=simdra.dev%2Ffleet%3D{PREFIX}")]
    floor = run_floor(api, names, slices)
    remove_floor(api)
    out.update({"floor_s": floor.seconds, "floor_nodes_s": floor.nodes_seconds,
                "floor_cpu_s": floor.cpu_seconds,
                "floor_requests_per_node": floor.requests / nodes,
                "publish_vs_floor": out["publish_s"] / floor.seconds,
                "requests_vs_floor": out["start_requests"] / floor.requests})
    print(f"  floor: {len(names)} nodes + {len(slices)} slices by a bare loop in "
          f"{floor.seconds:.1f} s (the nodes {floor.nodes_seconds:.1f} s; its CPU "
          f"{floor.cpu_seconds:.1f} s; {floor.requests} requests)", flush=True)


def _pods(api: Api, count: int, out: Figures) -> None:
    prepare(api)
    times = run_pods(api, count, timeout=max(300.0, count / 5))
    latencies = times.start_latencies()
    out.update({"pods": count, "pods_bound": len(times.bound), "pods_ready": len(latencies),
                "created_per_s": times.created_per_second(),
                "scheduled_per_s": times.scheduled_per_second(),
                "start_p50_s": percentile(latencies, 50), "start_p90_s": percentile(latencies, 90),
                "start_p99_s": percentile(latencies, 99)})
    print(f"  burst: {count} pods created at {out['created_per_s']:.0f}/s, {len(times.bound)} "
          f"bound at {out['scheduled_per_s']:.1f}/s, {len(latencies)} Ready; start "
          f"p50/p90/p99 {out['start_p50_s']:.2f}/{out['start_p90_s']:.2f}/"
          f"{out['start_p99_s']:.2f} s", flush=True)


def _paced(api: Api, count: int, qps: float, out: Figures) -> None:
    times = run_pods(api, count, timeout=max(120.0, count / qps * 2), qps=qps, prefix="paced-")
    latencies = times.start_latencies()
    total, written = claims_with_status(api)
    out.update({"paced_pods": count, "paced_ready": len(latencies),
                "paced_p50_s": percentile(latencies, 50), "paced_p90_s": percentile(latencies, 90),
                "paced_p99_s": percentile(latencies, 99),
                "claims_with_status": written, "claims": total})
    print(f"  paced: {count} pods at {qps:g}/s, {len(latencies)} Ready; start p50/p90/p99 "
          f"{out['paced_p50_s']:.2f}/{out['paced_p90_s']:.2f}/{out['paced_p99_s']:.2f} s; "
          f"claims with status.devices {written}/{total}", flush=True)


def _rewatches(fleet: FleetGroup, nodes: int, out: Figures) -> None:
    """Watches the fleet (re)started since its publish, per node per hour: a short idle
    window can fall between two renewals of its watches; the whole run cannot."""
    hours = (time.monotonic() - out["published_at"]) / 3600
    renewed = fleet.own_requests(verb="watch") - out["watches_at_publish"]
    out["rewatch_per_node_hour"] = renewed / nodes / hours
    print(f"  watches renewed since publish: {renewed:.0f} in {hours * 60:.1f} min "
          f"({out['rewatch_per_node_hour']:.2f}/node/h)", flush=True)


def measure(nodes: int, args: argparse.Namespace, workdir: Path) -> Figures:
    """Every figure for one fleet size, on a fresh cluster."""
    out: Figures = {"nodes": nodes, "shards": args.shards}
    started = time.monotonic()
    with Cluster(args.bin, workdir, args.client_qps or None) as cluster:
        print(f"  control plane and kwok up in {time.monotonic() - started:.1f} s", flush=True)
        fleet = FleetGroup(cluster, nodes, args.shards, workdir,
                           ["--mix", MIX, "--seed", "1", "--node-prefix", PREFIX])
        before = cluster.request_counts()
        fleet.start()
        try:
            _publish(cluster, fleet, nodes, before, out)
            _idle(cluster, fleet, nodes, args.idle, out)
            _floor(cluster.admin(), nodes, out)
            if args.pods_per_node > 0:
                _pods(cluster.admin(), nodes * args.pods_per_node, out)
                _paced(cluster.admin(), max(1, round(nodes * args.paced_per_node)),
                       args.paced_qps, out)
            else:
                print("  pods: skipped (--pods-per-node 0)", flush=True)
            _rewatches(fleet, nodes, out)
        finally:
            fleet.stop()
    return out


# (key, label, unit, growth per node): growth divides by the node count where the figure is
# a total that should grow with the fleet (so 1.00 is flat per node), not where it is a
# per-node figure already or a rate of the scheduler.
ROWS = (
    ("publish_s", "time to publish (fleet's line)", "s", True),
    ("publish_seen_s", "time to publish (from exec)", "s", True),
    ("floor_s", "floor: bare loop, same nodes and slices", "s", True),
    ("publish_vs_floor", "publish / floor", "x", False),
    ("floor_nodes_s", "floor: of which the Nodes", "s", True),
    ("start_cpu_s", "fleet CPU until published", "s", True),
    ("floor_cpu_s", "floor: its client's CPU", "s", True),
    ("slices_per_node", "slices per node", "", False),
    ("start_requests_per_node", "API requests per node at start", "", False),
    ("floor_requests_per_node", "floor: requests per node (Node + slices)", "", False),
    ("requests_vs_floor", "start requests / floor", "x", False),
    ("idle_requests_per_node_hour", "API requests per node per hour, idle", "", False),
    ("rewatch_per_node_hour", "watch renewals per node per hour (whole run)", "", False),
    ("rss_mib", "fleet RSS", "MiB", True),
    ("rss_kib_per_node", "fleet RSS per node", "KiB", False),
    ("rss_mib_largest_shard", "fleet RSS, largest shard", "MiB", True),
    ("idle_cpu_pct", "fleet CPU, idle (% of a core)", "%", True),
    ("created_per_s", "pods created per second (the burst)", "/s", False),
    ("scheduled_per_s", "scheduler: pods per second", "/s", False),
    ("start_p50_s", "pod start p50 (creation to Ready)", "s", False),
    ("start_p90_s", "pod start p90", "s", False),
    ("start_p99_s", "pod start p99", "s", False),
    ("paced_p50_s", "paced pods: start p50", "s", False),
    ("paced_p90_s", "paced pods: start p90", "s", False),
    ("paced_p99_s", "paced pods: start p99", "s", False),
    ("claims_with_status", "claims with status.devices (all pods)", "", True),
)


def targets(f: Figures) -> list[str]:
    """The issue's targets (RSS and CPU are stated at 1,000 nodes: checked as they stand
    at any size; see projection() for smaller runs)."""
    n = f["nodes"]
    checks = [
        (f"start requests/node {f['start_requests_per_node']:.2f} <= floor "
         f"{f['floor_requests_per_node']:.2f} + 10/N",
         f["start_requests_per_node"] <= f["floor_requests_per_node"] + 10 / n),
        (f"idle requests/node/h {f['idle_requests_per_node_hour']:.2f} == 0",
         f["idle_requests_per_node_hour"] == 0),
        (f"RSS {f['rss_mib']:.1f} MiB <= 200 MiB (at 1,000 nodes x 8 GPUs)",
         f["rss_mib"] <= 200),
        (f"idle CPU {f['idle_cpu_pct']:.3f} % <= 2 % of a core (at 1,000 nodes)",
         f["idle_cpu_pct"] <= 2),
    ]
    if "claims_with_status" in f:  # not with --pods-per-node 0
        checks.append((f"claims with status.devices {f['claims_with_status']:.0f} == pods "
                       f"Ready {f['pods_ready'] + f['paced_ready']:.0f}",
                       f["claims_with_status"] >= f["pods_ready"] + f["paced_ready"] > 0))
    return [f"  {'PASS' if ok else 'MISS'}  {text}" for text, ok in checks]


def projection(results: list[Figures]) -> str:
    """RSS and idle CPU at 1,000 nodes, on the line through the two largest sizes."""
    if len(results) < 2 or results[-1]["nodes"] >= 1000:
        return ""
    a, b = results[-2], results[-1]
    out = []
    for key, cap, unit in (("rss_mib", 200.0, "MiB"), ("idle_cpu_pct", 2.0, "%")):
        slope = (b[key] - a[key]) / (b["nodes"] - a["nodes"])
        at = b[key] + slope * (1000 - b["nodes"])
        out.append(f"  {'PASS' if at <= cap else 'MISS'}  projected {key} at 1,000 nodes: "
                   f"{at:.1f} {unit} (target {cap:g})")
    return "\n".join(out)


def table(results: list[Figures]) -> str:
    """Every figure per size, and its growth from the smallest size to the largest."""
    sizes = [int(r["nodes"]) for r in results]
    head = f"{'figure':<46} {'unit':<5}" + "".join(f"{s:>10}" for s in sizes) + "    growth"
    lines = [head]
    for key, label, unit, per_node in ROWS:
        values = [r.get(key, float("nan")) for r in results]
        if all(v != v for v in values):  # no size measured it (pods skipped)
            continue
        cells = "".join(f"{v:>10.2f}" if v == v else f"{'-':>10}" for v in values)
        growth = ""
        if len(results) > 1 and values[0] and values[0] == values[0]:
            ratio = values[-1] / values[0]
            if per_node:
                ratio /= sizes[-1] / sizes[0]
            growth = f"{ratio:>8.2f}{' /node' if per_node else ''}"
        lines.append(f"{label:<46} {unit:<5}{cells}  {growth}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100", help="fleet sizes, comma-separated")
    parser.add_argument("--idle", type=float, default=60.0, help="idle window, seconds")
    parser.add_argument("--pods-per-node", type=int, default=5,
                        help="the burst's pods (0: no pods at all, burst and paced skipped)")
    parser.add_argument("--shards", type=int, default=1,
                        help="fleet processes splitting the nodes (--shard i/n each)")
    parser.add_argument("--paced-per-node", type=float, default=0.5,
                        help="pods created after the burst at --paced-qps")
    parser.add_argument("--paced-qps", type=float, default=5.0,
                        help="their creation rate (ClusterLoader2's DRA steady state: 5)")
    parser.add_argument("--bin", type=Path,
                        default=Path.home() / ".cache/simdra-e2e/k8s-v1.37.2/bin",
                        help="the control plane's binaries (tests/e2e/build.sh)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--client-qps", type=float, default=100.0,
                        help="kube-controller-manager's and kube-scheduler's API client rate "
                        "(0: their defaults, 20 and 50, which cap pods with claims at about "
                        "10/s: the controller-manager makes each claim and patches each pod)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.nodes.split(",")]
    except ValueError:
        parser.error(f"--nodes: not a list of numbers: {args.nodes!r}")
    if args.shards < 1 or args.pods_per_node < 0:
        parser.error("--shards must be 1 or more, --pods-per-node 0 or more")
    if missing := fleet_available():
        print(f"fleet bench: `simdra fleet` is not available here: {missing}", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="simdra-fleet-bench-"))
    results = []
    for n in sizes:
        qps = f"{args.client_qps:g} QPS" if args.client_qps else "default QPS"
        shards = f" in {args.shards} shards" if args.shards > 1 else ""
        print(f"== {n} nodes{shards} ({MIX}), {n * args.pods_per_node} pods; "
              f"controller-manager and scheduler clients at {qps}; work in {workdir}/n{n}",
              flush=True)
        results.append(measure(n, args, workdir / f"n{n}"))
        print("\n".join(targets(results[-1])), flush=True)
    print()
    print(table(results))
    if extra := projection(results):
        print(extra)
    print()
    print("\n".join(THRESHOLDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
