"""`simdra fleet` publishing many nodes: time, API requests, memory, threads, idle CPU.

Usage: python bench/fleet_publish_bench.py [--sizes 100 300 1000] [--quiet-seconds 20]

For each size the API stand-in runs in a child process and the fleet in another
(`python -m simdra fleet --nodes N --mix gpu8:100`, 8 exclusive GPUs a node), so the
figures are the fleet's own. Printed per size:
- publish: seconds from start to the fleet's "published" line, and the same slices
  POSTed by a bare loop (one client, one thread) into the same stand-in: the floor;
- requests at start per node, and per node per hour while nothing changes (quiet
  window; the targets: slices per node at start, 0 when quiet);
- RSS and threads of the fleet, against a floor process that only imports simdra and
  plans the same inventories; per node;
- CPU of the fleet while quiet, in % of one core (target at 1,000 nodes: <= 2 %).
No assertions: this prints numbers.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from stand_in_process import StandIn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere

DRIVER = "dra.example.com"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def _requests(server: Any) -> int:
    return sum(server.request_log.counts().values())


def _slices(server: Any) -> Any:
    return server.objects("resourceslices")


def _wipe(server: Any) -> None:
    for kind in ("resourceslices", "nodes"):
        for obj in server.objects(kind):
            server.delete_object(kind, obj["metadata"]["name"])


COMMANDS = {"requests": _requests, "slices": _slices, "wipe": _wipe}


def run_fleet(stand_in: StandIn, kubeconfig: Path, nodes: int, quiet: float,
              log_path: Path) -> dict[str, float]:
    """Start the fleet, wait for its published line, measure, stop it."""
    before = stand_in.ask("requests")
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "simdra", "fleet", "--kubeconfig", str(kubeconfig),
             "--nodes", str(nodes), "--mix", "gpu8:100", "--seed", "1"],
            stderr=log, cwd=ROOT)
    published = _wait_line(log_path, r"fleet: published (\d+) nodes, (\d+) slices in ([\d.]+) s",
                           process)
    time.sleep(2)  # the last watches start
    started = stand_in.ask("requests") - before
    proc = psutil.Process(process.pid)
    cpu0, quiet0 = sum(proc.cpu_times()[:2]), stand_in.ask("requests")
    time.sleep(quiet)
    cpu1, quiet1 = sum(proc.cpu_times()[:2]), stand_in.ask("requests")
    figures = {"publish_s": float(published[3]), "slices": float(published[2]),
               "start_requests": float(started), "quiet_requests": float(quiet1 - quiet0),
               "quiet_cpu_pct": 100 * (cpu1 - cpu0) / quiet,
               "rss_mib": proc.memory_info().rss / 2**20, "threads": proc.num_threads()}
    process.send_signal(signal.SIGTERM)
    process.wait(120)
    return figures


def _wait_line(path: Path, pattern: str, process: subprocess.Popen[bytes]) -> re.Match[str]:
    while True:
        found = re.search(pattern, path.read_text())
        if found:
            return found
        if process.poll() is not None:
            raise SystemExit(f"the fleet exited: {path.read_text()[-2000:]}")
        time.sleep(0.2)


def bare_loop(kubeconfig: Path, slices: list[dict[str, Any]]) -> float:
    """Seconds to POST `slices` (server-set fields dropped) one after another."""
    from simdra._driver.kube import load_api_client

    client = load_api_client(str(kubeconfig))
    bodies = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": s["metadata"]["name"]}, "spec": s["spec"]} for s in slices]
    started = time.monotonic()
    for body in bodies:
        client.request("POST", SLICES, body=body)
    return time.monotonic() - started


FLOOR_SCRIPT = """
import sys, psutil
from simdra._driver.fleet.mix import SHAPES, node_names
from simdra._driver.fleet.pool_plan import plan_inventory
plans = [plan_inventory(n, "dra.example.com", SHAPES["gpu8"]) for n in node_names("f", {n})]
print(psutil.Process().memory_info().rss)
"""


def floor_rss(nodes: int) -> float:
    """RSS (MiB) of a process that imports simdra and plans the same inventories."""
    out = subprocess.run([sys.executable, "-c", FLOOR_SCRIPT.replace("{n}", str(nodes))],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    return int(out.strip()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--quiet-seconds", type=float, default=20.0)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    print(f"{'nodes':>6} {'publish s':>9} {'floor s':>8} {'ratio':>6} {'req/node start':>14} "
          f"{'req/node/h quiet':>16} {'RSS MiB':>8} {'floor MiB':>9} {'KiB/node':>8} "
          f"{'threads':>7} {'quiet CPU %':>11}")
    for nodes in args.sizes:
        stand_in = StandIn(COMMANDS)
        try:
            from simdra._driver.testing.kubeconfig import write_kubeconfig

            kubeconfig = write_kubeconfig(workdir / f"kc-{nodes}", stand_in.url)
            fig = run_fleet(stand_in, kubeconfig, nodes, args.quiet_seconds,
                            workdir / f"fleet-{nodes}.log")
            slices = stand_in.ask("slices")
            stand_in.ask("wipe")
            floor_s = bare_loop(kubeconfig, slices)
        finally:
            stand_in.stop()
        base = floor_rss(nodes)
        per_hour = fig["quiet_requests"] / nodes * 3600 / args.quiet_seconds
        print(f"{nodes:>6} {fig['publish_s']:>9.2f} {floor_s:>8.2f} "
              f"{fig['publish_s'] / floor_s:>6.1f} {fig['start_requests'] / nodes:>14.1f} "
              f"{per_hour:>16.1f} {fig['rss_mib']:>8.0f} {base:>9.0f} "
              f"{(fig['rss_mib'] - base) * 1024 / nodes:>8.0f} {fig['threads']:>7.0f} "
              f"{fig['quiet_cpu_pct']:>11.2f}", flush=True)
    print(f"(logs: {workdir}; machine: {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
