"""`kubectl dra` on the real control plane: `devices`, `top` and `why` against 1,000 nodes x
8 GPUs that `simdra fleet` publishes and a few thousand claims the real scheduler allocated.

    flock /tmp/e2e.lock python bench/kubectl_dra_real_bench.py [--nodes 1000] [--pods 3000]

The cluster is fleet_bench's (bench/fleet_cluster.py: the e2e's etcd, kube-apiserver,
kube-controller-manager and kube-scheduler from ~/.cache/simdra-e2e, kwok for the fake
nodes) with `simdra fleet --mix gpu8:100`. `--pods` pods, each with a claim from a
ResourceClaimTemplate for one GPU (bench/fleet_pods.py), are scheduled by the real
scheduler, made Running by kwok, their claims' status written by the fleet. Then, in
namespace `bench`: pod `pending-a100`, whose claim `want-a100` selects a model no GPU
has (unschedulable), and claim `want-one`, no pod's, allocatable.

Each command runs `--repeat` times, each in a fresh process (the console script's
`main()`, its interpreter start included), with a kubeconfig of a service account of its
own: the API server counts its requests under a FlowSchema of its own. Printed per
command: wall seconds (the fastest and the median), the requests the server counted, peak
RSS (VmHWM), next to the target. The floors, measured in the same run, are independent
of our code: `python -c pass`, and a fresh process that lists resourceslices,
resourceclaims and pods with one plain HTTPS GET each (side by side, as `kubectl dra`
lists; read only, then decoded with json.loads). `--code DIR` (repeatable) runs the
commands from other source trees too (e.g. `git archive` of an older commit), on the
same cluster. No assertions: this prints numbers and ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from fleet_cluster import Cluster, Fleet, fleet_available
from fleet_pods import FLEET_TAINT, GPU_CLASS, NAMESPACE, prepare, run_pods
from kubectl_dra_bench import CHILD

from tests.e2e.controlplane import ADMIN_TOKEN

ROOT = Path(__file__).resolve().parents[1]
ACCOUNT = ("kube-system", "kubectl-dra")
SCHEMA = "kubectl-dra"
NOTHING = 'device.attributes["dra.example.com"].model == "A100"'  # no fleet GPU is one
# (command, target wall seconds), each also at most RSS_TARGET MiB: issue 41's "fast at
# scale" (None: no target stated).
COMMANDS: tuple[tuple[list[str], float | None], ...] = (
    (["devices"], 2.0),
    (["devices", "-o", "json"], 2.0),
    (["top"], 2.0),
    (["top", "--by", "node"], 2.0),
    (["why", "pending-a100", "-n", NAMESPACE], 3.0),
    (["why", "claim/want-one", "-n", NAMESPACE], 3.0),
    # No target stated for these; shown for what the class selectors cost.
    (["top", "--by", "class"], None),
    (["devices", "--class", GPU_CLASS], None),
    (["why", "claim/want-a100", "-n", NAMESPACE], None),
)
RSS_TARGET = 200.0
FLOOR = """
import http.client, json, ssl, sys, threading, time
start = time.perf_counter()
host, port, token, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
decode = sys.argv[5] == "1"
paths = ["/apis/resource.k8s.io/v1/resourceslices", "/apis/resource.k8s.io/v1/resourceclaims",
         "/api/v1/pods"]
context = ssl.create_default_context(cafile=ca)
got = {}
def get(path):
    conn = http.client.HTTPSConnection(host, port, context=context)
    conn.request("GET", path, headers={"Authorization": "Bearer " + token,
                                       "Accept": "application/json"})
    body = conn.getresponse().read()
    got[path] = (len(body), len(json.loads(body)["items"]) if decode else 0)
threads = [threading.Thread(target=get, args=(p,)) for p in paths]
[t.start() for t in threads]; [t.join() for t in threads]
hwm = [int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"main_s": time.perf_counter() - start, "hwm_mib": hwm, "code": 0,
                  "bytes": sum(b for b, _ in got.values()),
                  "items": sum(n for _, n in got.values())}))
"""


def fresh(args: list[str], code: Path) -> dict[str, Any]:
    """A fresh interpreter running `args` (after `-c`) from source tree `code`: what the
    script printed last (JSON), and the process's wall seconds."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=code,
                          timeout=600, env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"})
    wall = time.perf_counter() - start
    if done.returncode != 0 or not done.stdout.strip():
        return {"error": (done.stderr or done.stdout)[-500:], "process_s": wall}
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["process_s"] = wall
    return figures


def pending(cluster: Cluster) -> None:
    """Claim want-a100 (a selector nothing matches) and its pod; claim want-one (no pod's:
    stays unallocated, though it could be allocated)."""
    api = cluster.admin()
    claims = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
    for name, selectors in (("want-a100", [{"cel": {"expression": NOTHING}}]),
                            ("want-one", [])):
        exactly: dict[str, Any] = {"deviceClassName": GPU_CLASS}
        if selectors:
            exactly["selectors"] = selectors
        api.call("POST", claims, {"metadata": {"name": name}, "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": exactly}]}}})
    api.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", {
        "metadata": {"name": "pending-a100"},
        "spec": {"tolerations": [{"key": FLEET_TAINT, "operator": "Exists"}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "want-a100"}],
                 "containers": [{"name": "main", "image": "bench/none:never-pulled",
                                 "resources": {"claims": [{"name": "gpu"}]}}]}})
    deadline = time.monotonic() + 60  # the scheduler's verdict, so the pod reads as real
    while time.monotonic() < deadline:
        pod = api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/pending-a100")
        if any(c.get("reason") == "Unschedulable" for c in pod["status"].get("conditions", [])):
            print("  pending-a100: the scheduler says Unschedulable", flush=True)
            return
        time.sleep(1)
    print("  pending-a100: no Unschedulable condition within 60 s", flush=True)


def floors(cluster: Cluster, repeat: int) -> dict[str, list[dict[str, Any]]]:
    """The floors' runs: `python -c pass`, three GETs read, three GETs decoded."""
    cp = cluster.cp
    host, port = cp.server.removeprefix("https://").rsplit(":", 1)
    base = ["-c", FLOOR, host, port, ADMIN_TOKEN, str(cp.certs.ca_cert)]
    hwm = ("import time; s = time.perf_counter(); import json; print(json.dumps({'code': 0, "
           "'main_s': time.perf_counter() - s, 'hwm_mib': [int(l.split()[1]) / 1024 for l "
           "in open('/proc/self/status') if l.startswith('VmHWM:')][0]}))")
    return {name: [fresh(args, ROOT) for _ in range(repeat)] for name, args in (
        ("python -c pass", ["-c", hwm]),
        ("floor: 3 GETs, read", [*base, "0"]),
        ("floor: 3 GETs, json.loads", [*base, "1"]))}


def commands(cluster: Cluster, kubeconfig: Path, code: Path,
             repeat: int) -> dict[str, list[dict[str, Any]]]:
    """Every command's runs from source tree `code`, each with the requests counted."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for command, _ in COMMANDS:
        for _ in range(repeat):
            before = cluster.counted_requests(SCHEMA)
            figures = fresh(["-c", CHILD, *command, "--kubeconfig", str(kubeconfig)], code)
            figures["requests"] = cluster.counted_requests(SCHEMA) - before
            runs.setdefault(" ".join(command), []).append(figures)
        last = runs[" ".join(command)][-1]
        said = last.get("error") or (last["tail"].strip().splitlines() or [""])[-1]
        print(f"  {' '.join(command):40} {last['process_s']:6.2f} s  "
              f"{last.get('hwm_mib', 0):6.1f} MiB  {said[-160:]}", flush=True)
    return runs


def row(name: str, runs: list[dict[str, Any]], target: float | None, floor: float) -> str:
    """One line of the table: fastest and median wall, requests, peak RSS, verdicts."""
    good = [r for r in runs if "error" not in r and r.get("code") == 0]
    if not good:
        return f"{name:44} FAILED: {runs[-1].get('error', 'exit ' + str(runs[-1].get('code')))}"
    walls = sorted(r["process_s"] for r in good)
    hwm = max(r["hwm_mib"] for r in good)
    requests = max(r.get("requests", 0) for r in good)
    verdict = ""
    if target is not None:
        ok = statistics.median(walls) <= target and hwm <= RSS_TARGET
        verdict = f"{'PASS' if ok else 'MISS'} (<= {target:g} s, <= {RSS_TARGET:g} MiB)"
    return (f"{name:44} {walls[0]:6.2f} {statistics.median(walls):6.2f} "
            f"{statistics.median(walls) / floor:6.1f}x {requests:5.0f} {hwm:7.1f} "
            f"{good[-1].get('bytes', 0):>10,}  {verdict}")


def table(floor_runs: dict[str, list[dict[str, Any]]],
          trees: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """The figures: floors first, then each tree's commands against the decoded floor."""
    decoded = floor_runs["floor: 3 GETs, json.loads"]
    floor = statistics.median(r["process_s"] for r in decoded if "error" not in r) or 1.0
    lines = [f"{'command (process wall: fastest, median)':44} {'min s':>6} {'med s':>6} "
             f"{'/floor':>7} {'reqs':>5} {'RSS MiB':>7} {'out bytes':>10}  target"]
    lines += [row(name, runs, None, floor) for name, runs in floor_runs.items()]
    for label, runs in trees.items():
        lines.append(f"-- {label}")
        lines += [row(" ".join(c), runs[" ".join(c)], t, floor) for c, t in COMMANDS]
    return lines


def save_lists(cluster: Cluster, where: Path) -> None:
    """Every list `kubectl dra` reads, as the server sent it, one file per resource."""
    where.mkdir(parents=True, exist_ok=True)
    for name, path in (("resourceslices", "/apis/resource.k8s.io/v1/resourceslices"),
                       ("resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims"),
                       ("deviceclasses", "/apis/resource.k8s.io/v1/deviceclasses"),
                       ("pods", "/api/v1/pods"), ("nodes", "/api/v1/nodes")):
        (where / f"{name}.json").write_bytes(cluster.admin().raw("GET", path))


def build(cluster: Cluster, args: argparse.Namespace) -> Fleet:
    """The fleet published, the pods Running, the pending claims and pod created."""
    fleet = Fleet(["--kubeconfig", str(cluster.fleet_kubeconfig()), "--nodes",
                   str(args.nodes), "--mix", "gpu8:100", "--seed", "1", "--node-prefix",
                   "bench"], args.workdir / "fleet.log")
    fleet.start()
    said, _, nodes, slices = fleet.wait_published(timeout=900)
    print(f"  fleet: {nodes} nodes, {slices} slices published in {said:.1f} s", flush=True)
    prepare(cluster.admin())
    times = run_pods(cluster.admin(), args.pods, timeout=max(600.0, args.pods / 2))
    print(f"  {args.pods} pods: {len(times.bound)} bound at {times.scheduled_per_second():.1f}"
          f"/s, {len(times.ready)} Ready", flush=True)
    pending(cluster)
    return fleet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000, help="pods with a one-GPU claim")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each command")
    parser.add_argument("--code", type=Path, action="append", default=[],
                        help="another source tree to run the commands from (repeatable)")
    parser.add_argument("--save-lists", type=Path, default=None, metavar="DIR",
                        help="write the cluster's lists there as JSON (to profile offline)")
    parser.add_argument("--bin", type=Path,
                        default=Path.home() / ".cache/simdra-e2e/k8s-v1.37.2/bin")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    if missing := fleet_available():
        print(f"`simdra fleet` is not available here: {missing}", file=sys.stderr)
        return 2
    args.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="simdra-kubectl-dra-"))
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"== {args.nodes} nodes x 8 GPUs, {args.pods} pods; work in {args.workdir}",
          flush=True)
    with Cluster(args.bin, args.workdir, client_qps=100.0) as cluster:
        fleet = build(cluster, args)
        try:
            kubeconfig = cluster.counted_kubeconfig(ACCOUNT, SCHEMA,
                                                    args.workdir / "kubectl-dra.kubeconfig")
            if args.save_lists:
                save_lists(cluster, args.save_lists)
            floor_runs = floors(cluster, args.repeat)
            trees = {str(tree): commands(cluster, kubeconfig, tree, args.repeat)
                     for tree in [ROOT, *args.code]}
            for name, runs in floors(cluster, args.repeat).items():  # before and after:
                floor_runs[name] += runs  # the machine's load may change in between
        finally:
            fleet.stop()
    print("\n".join(table(floor_runs, trees)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
