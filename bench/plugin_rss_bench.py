"""Memory and CPU of the plugin process, to size the DaemonSet's requests and limits.

Starts the real plugin (`simdra run`) against the API stand-in for several inventory
sizes, prepares claims, and prints its RSS (psutil) idle after publishing and after the
prepares, plus the CPU it used while idle. The floor is a bare Python interpreter that
imports the same dependencies (kubernetes, grpc, protobuf), measured in the same run.

    python bench/plugin_rss_bench.py [--idle-seconds 5]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

from driver.testing.allocation.builders import exactly
from driver.testing.cluster import LocalCluster

MIB = 1024 * 1024


def _floor_rss() -> int:
    code = ("import kubernetes.client, grpc, google.protobuf, yaml, prometheus_client;"
            "import sys; sys.stdout.write('ready'); sys.stdout.flush(); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.read(5)
    rss = psutil.Process(proc.pid).memory_info().rss
    proc.communicate(b"")
    return rss


def _inventory(workdir: Path, devices: int) -> str:
    path = workdir / "inventory.yaml"
    items = [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, "index": {"int": i}},
              "capacity": {"memory": {"value": "80Gi"}}} for i in range(devices)]
    path.write_text(yaml.safe_dump({"pools": [{"name": "{node}", "devices": items}]}))
    return str(path)


def _measure(devices: int, claims: int, idle: float) -> tuple[float, float, float]:
    workdir = Path(tempfile.mkdtemp(prefix="sdr-", dir="/tmp"))
    try:
        with LocalCluster(workdir) as cluster:
            plugin = cluster.start_plugin(profile=_inventory(workdir, devices), timeout=120)
            process = psutil.Process(plugin.pid)
            time.sleep(1.0)
            cpu_before = process.cpu_times()
            time.sleep(idle)
            cpu_after = process.cpu_times()
            idle_rss = process.memory_info().rss
            for i in range(claims):
                cluster.create_claim(f"c{i}", exactly("gpu", "gpu.dra.example.com"))
                cluster.allocate(f"c{i}")
                cluster.prepare(f"c{i}")
            busy_rss = process.memory_info().rss
            cpu = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
            return idle_rss / MIB, busy_rss / MIB, cpu / idle
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    """Run and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    args = parser.parse_args()
    floor = _floor_rss() / MIB
    print(f"floor: python + dependencies imported: {floor:.1f} MiB RSS")
    print(f"{'devices':>8} {'claims':>7} {'idle RSS':>10} {'RSS after':>10} "
          f"{'x floor':>8} {'idle CPU':>9}")
    for devices, claims in ((8, 8), (128, 100), (1000, 100)):
        idle_rss, busy_rss, cpu = _measure(devices, claims, args.idle_seconds)
        print(f"{devices:>8} {claims:>7} {idle_rss:>8.1f}Mi {busy_rss:>8.1f}Mi "
              f"{busy_rss / floor:>7.2f}x {cpu * 100:>8.2f}%")


if __name__ == "__main__":
    main()
