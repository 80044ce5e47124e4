"""Latency of a sequential NodePrepareResources of a 1-GPU claim, end to end.

The plugin runs as a real process; the kubelet emulator calls it over its unix socket
and the plugin reads each claim from the API stand-in over HTTP, writes the CDI spec
and the checkpoint record with fsync. Printed against a floor measured in the same run:
a NodeUnprepareResources of an unknown claim (one gRPC round trip through the same
serialization lock, no API read, no file written).

    python bench/prepare_bench.py [--claims 200]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from driver.claims.types import ClaimRef
from driver.testing.allocation.builders import exactly
from driver.testing.cluster import LocalCluster


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": statistics.median(ordered), "p90": pick(0.9), "p99": pick(0.99)}


def _ms(values: dict[str, float]) -> str:
    return "  ".join(f"{k} {v * 1000:7.2f} ms" for k, v in values.items())


def main() -> None:
    """Run the benchmark and print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=200, help="claims prepared in sequence")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="sdb-", dir="/tmp"))
    try:
        with LocalCluster(workdir) as cluster:
            cluster.start_plugin(profile="gpu", num_devices=8)
            prepare, unprepare, floor = _measure(cluster, args.claims)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    floor_p = _percentiles(floor)
    prepare_p = _percentiles(prepare)
    print(f"sequential prepare of a 1-GPU claim, {args.claims} claims (plugin process, "
          f"unix-socket gRPC, HTTP claim read, fsync'd CDI spec + checkpoint)")
    print(f"  prepare   {_ms(prepare_p)}")
    print(f"  unprepare {_ms(_percentiles(unprepare))}")
    print(f"  floor     {_ms(floor_p)}   (unprepare of an unknown claim)")
    print(f"  prepare p50 / floor p50 = {prepare_p['p50'] / floor_p['p50']:.1f}x")


def _measure(cluster: LocalCluster, count: int) -> tuple[list[float], list[float], list[float]]:
    assert cluster.kubelet is not None
    kubelet, driver = cluster.kubelet, cluster.driver_name
    prepare, unprepare, floor = [], [], []
    for i in range(count):
        name = f"bench-{i}"
        cluster.create_claim(name, exactly("gpu", f"gpu.{driver}"))
        cluster.allocate(name)
        ref = cluster.claim_ref(name)
        unknown = ClaimRef("default", "unknown", str(uuid.uuid4()))
        start = time.perf_counter()
        kubelet.unprepare([unknown], driver_name=driver)
        floor.append(time.perf_counter() - start)
        start = time.perf_counter()
        answer = kubelet.prepare([ref], driver_name=driver)
        prepare.append(time.perf_counter() - start)
        if answer[ref.uid]["error"]:
            raise RuntimeError(answer[ref.uid]["error"])
        start = time.perf_counter()
        kubelet.unprepare([ref], driver_name=driver)
        unprepare.append(time.perf_counter() - start)
        cluster.allocator.deallocate("default", name)
    return prepare, unprepare, floor


if __name__ == "__main__":
    main()
