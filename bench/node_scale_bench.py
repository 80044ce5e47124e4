"""Prepare/unprepare at node scale against a floor measured in the same run.

The floor does not involve this project's code: an empty unary call to a minimal Python
gRPC server in its own process on a unix socket, and the atomic-write primitive (temp
file, fsync, rename, directory fsync) and a durable unlink in the same file system as
the plugin's directories. A prepare needs at least one call and two atomic writes (the
record, then the CDI spec), an unprepare one call and two durable unlinks.

Against it, the real plugin process (kubelet emulator over its unix socket, claims read
from the API stand-in over HTTP) with N claims, each a share of a NIC
(`--claims`, default 2,000):

- sequential prepare and unprepare (1 in flight) p50/p99 and the ratio to the floor;
- throughput at 1, 8 and 64 calls in flight, per quarter of the N claims (flatness:
  does the 2,000th prepare cost what the first did?);
- an empty call (unprepare of an unknown claim) on the fresh plugin and with N
  prepared.

    python bench/node_scale_bench.py [--claims 2000] [--floor-samples 300]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from driver.atomicfile import remove_durable, write_atomic
from driver.claims.types import ClaimRef
from driver.testing.allocation.builders import exactly
from driver.testing.cluster import LocalCluster

NICS = 8
CONCURRENCY = (1, 8, 64)
RECORD_BYTES = 3000  # about a one-share claim's record

_MINIMAL_SERVER = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
import grpc
handler = grpc.method_handlers_generic_handler("bench.Empty", {
    "Call": grpc.unary_unary_rpc_method_handler(lambda request, context: b"",
        request_deserializer=None, response_serializer=None)})
server = grpc.server(ThreadPoolExecutor(8))
server.add_generic_rpc_handlers((handler,))
server.add_insecure_port("unix:" + sys.argv[1])
server.start()
print("ready", flush=True)
sys.stdin.read()
"""


def _pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _p50(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def _time(fn: Callable[[], object], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def floor(workdir: Path, samples: int) -> dict[str, float]:
    """p50 seconds of the floor parts, measured here and now."""
    workdir.mkdir(parents=True)
    path = workdir / "floor.sock"
    server = subprocess.Popen([sys.executable, "-c", _MINIMAL_SERVER, str(path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
        with grpc.insecure_channel(f"unix:{path}") as channel:
            call = channel.unary_unary("/bench.Empty/Call")
            call(b"", timeout=10)  # connect
            rpc = _time(lambda: call(b"", timeout=10), samples)
    finally:
        server.kill()
        server.wait()
    files = workdir / "floor-files"
    files.mkdir()
    data = os.urandom(RECORD_BYTES)
    names = iter(range(10**9))
    written: list[Path] = []

    def write() -> None:
        target = files / f"f{next(names)}.json"
        write_atomic(target, data)
        written.append(target)

    writes = _time(write, samples)
    removes = _time(lambda: remove_durable(written.pop()), samples)
    return {"rpc": _p50(rpc), "write": _p50(writes), "remove": _p50(removes)}


def make_claims(cluster: LocalCluster, count: int) -> list[ClaimRef]:
    """`count` allocated claims, each one share of a NIC (written as the scheduler would,
    bypassing the allocator so that setting up 2,000 claims takes seconds)."""
    template = cluster.create_claim("template", exactly("net", f"nic.{cluster.driver_name}"))
    per_nic = -(-count // NICS)
    bandwidth = 10_000_000_000 // per_nic // 8 * 8  # within the NIC's 10G and its step
    refs = []
    for i in range(count):
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"c-{i}", "namespace": "default", "uid": str(uuid.uuid4())},
            "spec": template["spec"],
            "status": {"allocation": {"devices": {"results": [{
                "request": "net", "driver": cluster.driver_name, "pool": cluster.node_name,
                "device": f"nic-{i % NICS}", "shareID": str(uuid.uuid4()),
                "consumedCapacity": {"bandwidth": str(bandwidth)},
            }]}}},
        }
        cluster.api.put_object("resourceclaims", claim)
        refs.append(ClaimRef("default", claim["metadata"]["name"], claim["metadata"]["uid"]))
    return refs


def run_round(cluster: LocalCluster, refs: list[ClaimRef], step: str, in_flight: int
              ) -> tuple[list[float], list[float], float]:
    """Prepare (or unprepare) every claim with `in_flight` calls at a time; returns the
    latencies, the rate per quarter (in order of completion) and the overall rate."""
    kubelet, driver = cluster.kubelet, cluster.driver_name
    assert kubelet is not None
    call = kubelet.prepare if step == "prepare" else kubelet.unprepare
    done: list[float] = []
    latencies: list[float] = []
    lock = threading.Lock()

    def one(ref: ClaimRef) -> None:
        start = time.perf_counter()
        answer = call([ref], driver_name=driver)
        end = time.perf_counter()
        if answer[ref.uid]["error"]:
            raise RuntimeError(answer[ref.uid]["error"])
        with lock:
            latencies.append(end - start)
            done.append(end)

    begin = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(one, refs))
    done.sort()
    quarter = len(done) // 4
    marks = [begin] + [done[q * quarter - 1] for q in range(1, 4)] + [done[-1]]
    counts = [quarter, quarter, quarter, len(done) - 3 * quarter]
    rates = [n / (b - a) for n, a, b in zip(counts, marks[:-1], marks[1:], strict=True)]
    return latencies, rates, len(done) / (done[-1] - begin)


def empty_call(cluster: LocalCluster, samples: int = 200) -> float:
    """p50 seconds of an unprepare of a claim the plugin never saw."""
    assert cluster.kubelet is not None
    unknown = [ClaimRef("default", "unknown", str(uuid.uuid4()))]
    return _p50(_time(lambda: cluster.kubelet.unprepare(unknown,  # type: ignore[union-attr]
                                                        driver_name=cluster.driver_name),
                      samples))


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--floor-samples", type=int, default=300)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="sdn-", dir="/tmp"))
    try:
        before = floor(workdir / "floor-1", args.floor_samples)
        with LocalCluster(workdir / "node") as cluster:
            cluster.start_plugin(profile="nic", num_devices=NICS)
            refs = make_claims(cluster, args.claims)
            results = _measure(cluster, refs)
        after = floor(workdir / "floor-2", args.floor_samples)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    # A shared machine's disk is not steady: the floor is taken before and after the
    # plugin's rounds, and the ratios use their mean.
    base = {k: (before[k] + after[k]) / 2 for k in before}
    _report(args.claims, base, results, (before, after))


def _measure(cluster: LocalCluster, refs: list[ClaimRef]) -> dict[str, object]:
    results: dict[str, object] = {"empty_fresh": empty_call(cluster)}
    for in_flight in CONCURRENCY:
        prepare = run_round(cluster, refs, "prepare", in_flight)
        if in_flight == 1:
            results["empty_full"] = empty_call(cluster)
        unprepare = run_round(cluster, refs, "unprepare", in_flight)
        results[f"prepare/{in_flight}"] = prepare
        results[f"unprepare/{in_flight}"] = unprepare
    return results


def _report(count: int, base: dict[str, float], results: dict[str, object],
            floors: tuple[dict[str, float], dict[str, float]]) -> None:
    ms = 1000.0
    prepare_floor = base["rpc"] + 2 * base["write"]
    unprepare_floor = base["rpc"] + 2 * base["remove"]
    print(f"node scale: {count} claims, one NIC share each, {NICS} NICs")
    for when, part in zip(("before", "after"), floors, strict=True):
        print(f"floor {when} the rounds: empty gRPC call {part['rpc'] * ms:.2f} ms, atomic "
              f"write {part['write'] * ms:.2f} ms, durable unlink {part['remove'] * ms:.2f} ms")
    print(f"  prepare floor (call + 2 writes)     {prepare_floor * ms:6.2f} ms  "
          f"= {1 / prepare_floor:6.0f}/s serial")
    print(f"  unprepare floor (call + 2 unlinks)  {unprepare_floor * ms:6.2f} ms  "
          f"= {1 / unprepare_floor:6.0f}/s serial")
    seq_p = results["prepare/1"][0]  # type: ignore[index]
    seq_u = results["unprepare/1"][0]  # type: ignore[index]
    print("sequential (1 in flight, ledger growing to N)")
    for label, samples, ref in (("prepare", seq_p, prepare_floor),
                                ("unprepare", seq_u, unprepare_floor)):
        print(f"  {label:9s} p50 {_p50(samples) * ms:6.2f} ms  p99 {_pct(samples, 0.99) * ms:6.2f}"
              f" ms  p50/floor {_p50(samples) / ref:4.1f}x")
    fresh, full = results["empty_fresh"], results["empty_full"]
    print(f"empty call: fresh {fresh * ms:.2f} ms, with {count} prepared {full * ms:.2f} ms"  # type: ignore[operator]
          f"  ratio {full / fresh:.2f}x")  # type: ignore[operator]
    print("throughput per quarter of the claims (calls/s), overall, and vs the serial floor")
    for in_flight in CONCURRENCY:
        for step, ref in (("prepare", prepare_floor), ("unprepare", unprepare_floor)):
            _, rates, overall = results[f"{step}/{in_flight}"]  # type: ignore[misc]
            quarters = " ".join(f"{r:6.0f}" for r in rates)
            print(f"  {step:9s} {in_flight:2d} in flight: {quarters}   overall {overall:6.0f}/s"
                  f"  last/first {rates[-1] / rates[0]:4.2f}  vs floor {overall * ref:4.2f}x")


if __name__ == "__main__":
    main()
