"""`kubectl dra` on a large cluster: time and peak RSS of `devices`, `top` and `why`.

Usage: python bench/kubectl_dra_bench.py [--nodes 1000] [--gpus 8] [--claims 2000]

The API stand-in runs in a child process holding N nodes x G GPUs (one slice a node,
published straight into its store), one DeviceClass, `--claims` claims allocated one GPU
each and reserved for a pod each, and two pending claims (`want-a100`: a selector that
matches nothing; `want-one`: allocatable). Each command then runs in a fresh process
(`kubectl-dra` as installed would, minus the interpreter's start, which is timed too):
printed are its wall seconds (whole process, and main() alone), the API requests it
made, and its peak RSS (resource.getrusage). No assertions: this prints numbers.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stand_in_process import StandIn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere

DRIVER = "gpu.example.com"
SIZE = {"nodes": 1000, "gpus": 8, "claims": 2000}
CHILD = """
import json, resource, sys, time
start = time.perf_counter()
from simdra._driver.dra_cli.main import main
import io
out = io.StringIO()
code = main(sys.argv[1:], out=out)
took = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
try:  # Linux: the peak of this program's own memory (ru_maxrss may keep the forking parent's)
    hwm = [int(line.split()[1]) / 1024 for line in open("/proc/self/status")
           if line.startswith("VmHWM:")][0]
except OSError:
    hwm = rss
print(json.dumps({"code": code, "main_s": took, "rss_mib": rss, "hwm_mib": hwm,
                  "bytes": len(out.getvalue()),
                  "tail": out.getvalue()[-300:]}))
"""


def _slice(node: int, gpus: int) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": "H100"},
                                                   "index": {"int": i}},
                "capacity": {"memory": {"value": "80Gi"}}} for i in range(gpus)]
    return {"metadata": {"name": f"node-{node:04d}-gpu"},
            "spec": {"driver": DRIVER, "nodeName": f"node-{node:04d}", "devices": devices,
                     "pool": {"name": f"node-{node:04d}", "generation": 1,
                              "resourceSliceCount": 1}}}


def _claim(name: str, **exactly: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu", **exactly}}]}}}


def populate(server: Any, nodes: int, gpus: int, claims: int) -> int:
    """Fill the stand-in's store; returns the object count."""
    for node in range(nodes):
        server.put_object("resourceslices", _slice(node, gpus))
    server.put_object("deviceclasses", {"metadata": {"name": "gpu"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    for n in range(claims):
        node, gpu = divmod(n, gpus)
        claim = _claim(f"c-{n}")
        claim["status"] = {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": f"node-{node:04d}",
                 "device": f"gpu-{gpu}"}]}},
            "reservedFor": [{"resource": "pods", "name": f"p-{n}", "uid": f"uid-{n}"}]}
        server.put_object("resourceclaims", claim)
        server.put_object("pods", {
            "metadata": {"name": f"p-{n}", "namespace": "default"},
            "spec": {"nodeName": f"node-{node:04d}", "containers": [{"name": "a"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": f"c-{n}"}]},
            "status": {"phase": "Running"}})
    server.put_object("resourceclaims", _claim("want-a100", selectors=[{"cel": {
        "expression": 'device.attributes["gpu.example.com"].model == "A100"'}}]))
    server.put_object("resourceclaims", _claim("want-one"))
    return nodes + 2 * claims + 3


def _requests(server: Any) -> int:
    return sum(server.request_log.counts().values())


def _clear_log(server: Any) -> None:
    server.request_log.clear()


def run_command(args: list[str], kubeconfig: Path) -> dict[str, Any]:
    """One command in a fresh process: its figures."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1]) \
        if done.returncode == 0 else {"error": done.stderr[-500:]}
    figures["process_s"] = time.perf_counter() - start
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in SIZE.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()
    size = {k: getattr(args, k) for k in SIZE}
    # A partial of a module-level function: picklable into the spawned child.
    commands = {"fill": functools.partial(populate, **size), "requests": _requests,
                "clear": _clear_log}
    stand_in = StandIn(commands)
    try:
        started = time.perf_counter()
        stand_in.ask("fill")
        print(f"filled the stand-in in {time.perf_counter() - started:.1f} s")
        with tempfile.TemporaryDirectory() as tmp:
            # Written here rather than with simdra._driver.testing.kubeconfig: this process stays
            # small, as getrusage's peak of a forked child may start at its parent's.
            kubeconfig = Path(tmp) / "config"
            kubeconfig.write_text(json.dumps({  # JSON is YAML
                "apiVersion": "v1", "kind": "Config", "current-context": "b",
                "clusters": [{"name": "b", "cluster": {"server": stand_in.url}}],
                "users": [{"name": "b", "user": {}}],
                "contexts": [{"name": "b", "context": {"cluster": "b", "user": "b"}}]}))
            print(f"cluster: {size['nodes']} nodes x {size['gpus']} GPUs, {size['claims']} "
                  "allocated claims and pods, 2 pending claims")
            for command in (["devices"], ["devices", "-o", "json"], ["top"],
                            ["top", "--by", "class"], ["devices", "--class", "gpu"],
                            ["why", "want-a100"], ["why", "want-one"], ["why", "p-0"]):
                stand_in.ask("clear")
                f = run_command(command, kubeconfig)
                requests = stand_in.ask("requests")
                if "error" in f:
                    print(f"{' '.join(command):24} FAILED: {f['error']}")
                    continue
                print(f"{' '.join(command):24} process {f['process_s']:6.2f} s  main "
                      f"{f['main_s']:6.2f} s  peak RSS {f['rss_mib']:6.1f} MiB (VmHWM "
                      f"{f['hwm_mib']:6.1f})  "
                      f"requests {requests:3}  output {f['bytes']:>9,} bytes")
    finally:
        stand_in.stop()


if __name__ == "__main__":
    main()
