"""Prepare/unprepare at node scale against a floor measured in the same run.

The floor does not involve this project's code: an empty unary call to a minimal Python
gRPC server in its own process on a unix socket, and the atomic-write primitive (temp
file, fsync, rename, directory fsync) and a durable unlink, in two directories of the
file system the plugin writes to. A prepare needs at least one call and two atomic
writes (the record, then the CDI spec), an unprepare one call and two durable unlinks.

A shared machine's disk is not steady (fsyncs take 0.3 ms one second and 8 ms the next),
so the floor is sampled where the plugin is: one floor sample after every few calls of
the sequential rounds, and a hundred right before and after each throughput round.

Against it, the real plugin process (registered with the kubelet emulator, claims read
from the API stand-in over HTTP) with N claims, each a share of a NIC
(`--claims`, default 2,000). The calls are made as bare as the floor's: the generated
v1 stub on the emulator's channel to the plugin, made once, the kubelet's request, the
answer checked for an error; the emulator's own per-call Python (finding the plugin,
a stub per call, checking the answer against the kubelet's rules: ~0.1 ms) is the
client's cost, not the plugin's, and the floor's client does none of it.

- sequential prepare and unprepare (1 in flight) p50/p99 and the ratio to the floor;
- throughput at 1, 8 and 64 calls in flight, per quarter of the N claims (flatness:
  does the 2,000th prepare cost what the first did?), against the serial floor;
- an empty call (unprepare of an unknown claim) on the fresh plugin and with N
  prepared, each in turn with the floor's empty call;
- the CPU one prepare costs at 64 in flight (the plugin's, and the bench's own kubelet
  emulator and API stand-in's, which share the machine's cores) and one serial floor
  prepare, and from these the ceiling no batching can pass: cores / CPU per prepare.
  Against the serial floor it says whether a target is a matter of batching (fsyncs
  shared) or of CPU.

It ends with a table of the prepare-path targets (issue 23's, which replaced issue 14's),
each PASS or MISS: sequential prepare p50 <= 1.5x the floor prepare, unprepare <= 1.3x,
the empty call <= 1.3x the floor call, the plugin's CPU per sequential prepare <= 2.5 ms
(printed with the floor's), 8 in flight >= 1.2x the serial floor, 64 in flight >= 0.9x
the CPU ceiling, flat to N prepared claims (last / first quarter >= 0.9).
`measure()` returns that table's rows, so another bench can print it with its own.

    python bench/node_scale_bench.py [--claims 2000] [--work-parent /var/tmp]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from scale_floor import Floor
from shares import make_shares
from targets import Row, table

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.gen import dra_v1_pb2, dra_v1_pb2_grpc
from simdra._driver.testing.cluster import LocalCluster

NICS = 8
CONCURRENCY = (1, 8, 64)
INTERLEAVED = 400  # floor samples spread over a sequential round
AROUND = 100  # floor samples right before, and again right after, a throughput round
EMPTY_SAMPLES = 300
# Not /tmp: on an ext4 without a journal (as on the machine this was written on) each
# file created skips the inodes of its block group deleted in the last half minute, and
# /tmp's group is where every build and test on the machine churns its temp files: a
# create there cost up to a millisecond of CPU, the floor's and the plugin's alike. A
# kubelet's directories are not /tmp either.
WORK_PARENT = "/var/tmp"
# Issue 23's targets for the prepare path.
SEQUENTIAL_PREPARE = 1.5  # p50 / floor p50, at most
SEQUENTIAL_UNPREPARE = 1.3
EMPTY_CALL = 1.3  # empty call / floor call taken in turn with it (fresh plugin), at most
SEQUENTIAL_CPU_MS = 2.5  # the plugin's CPU per sequential prepare, at most
EIGHT_IN_FLIGHT = 1.2  # 8 in flight / serial floor, at least
CEILING_SHARE = 0.9  # 64 in flight / CPU ceiling, at least
FLATNESS = 0.90  # last quarter / first quarter, at least
EMPTY_FULL = 1.2  # empty call with N prepared / on the fresh plugin, at most


@dataclass(frozen=True)
class Cpu:
    """CPU seconds per call: the plugin's and the bench process's (kubelet emulator and
    API stand-in) over a throughput round, and a floor sample's (its server and the bench
    process) around it."""

    plugin: float
    bench: float
    floor: float


@dataclass(frozen=True)
class Round:
    """One pass over all claims: latencies, calls/s per quarter and overall, and the
    floor samples (seconds per serial floor call) taken with it."""

    latencies: list[float]
    quarters: list[float]
    overall: float
    floor: list[float] = field(default_factory=list)
    cpu: Cpu | None = None

    @property
    def floor_p50(self) -> float:
        """Seconds of one floor prepare (or unprepare), as measured with this round."""
        return statistics.median(self.floor)


@dataclass
class Measured:
    """Everything one run measured."""

    claims: int
    parts: dict[str, float]  # p50 seconds of the floor's parts: rpc, write, remove
    # Empty call and floor call p50 seconds, on the fresh plugin and with N prepared.
    empty_fresh: tuple[float, float] = (0.0, 0.0)
    empty_full: tuple[float, float] = (0.0, 0.0)
    rounds: dict[tuple[str, int], Round] = field(default_factory=dict)


def _bare_call(cluster: LocalCluster, step: str) -> Callable[[ClaimRef], str]:
    """A function that makes the kubelet's v1 call for one claim through the generated
    stub and returns the claim's error ("" when none)."""
    kubelet = cluster.kubelet
    assert kubelet is not None
    stub = dra_v1_pb2_grpc.DRAPluginStub(kubelet.plugin(cluster.driver_name).channel)
    if step == "prepare":
        method, request = stub.NodePrepareResources, dra_v1_pb2.NodePrepareResourcesRequest
    else:
        method, request = stub.NodeUnprepareResources, dra_v1_pb2.NodeUnprepareResourcesRequest

    def call(ref: ClaimRef) -> str:
        claim = dra_v1_pb2.Claim(namespace=ref.namespace, name=ref.name, uid=ref.uid)
        answer = method(request(claims=[claim]), timeout=10)
        return str(answer.claims[ref.uid].error)

    return call


def _caller(cluster: LocalCluster, step: str) -> Callable[[ClaimRef], float]:
    """A function that prepares (or unprepares) one claim and returns its latency."""
    call = _bare_call(cluster, step)

    def one(ref: ClaimRef) -> float:
        start = time.perf_counter()
        error = call(ref)
        latency = time.perf_counter() - start
        if error:
            raise RuntimeError(f"{step} {ref.name}: {error}")
        return latency

    return one


def _quarters(counts_and_seconds: Sequence[tuple[int, float]]) -> list[float]:
    return [n / s for n, s in counts_and_seconds]


def sequential_round(cluster: LocalCluster, refs: list[ClaimRef], step: str,
                     floor: Floor, meter: CpuMeter) -> Round:
    """Every claim one at a time, with a floor sample after every few calls (not timed
    as part of the calls): rates per quarter are calls over their summed latencies. The
    CPU per call: the plugin's over the round, and a floor sample's (its server and the
    bench) over the samples."""
    one = _caller(cluster, step)
    sample = floor.prepare if step == "prepare" else floor.unprepare
    every = max(1, len(refs) // INTERLEAVED)
    latencies, floor_samples = [], []
    floor_cpu = 0.0
    start = meter.read()
    for i, ref in enumerate(refs):
        latencies.append(one(ref))
        if i % every == 0:
            before = meter.read()
            floor_samples.append(sample())
            _, bench, server = _used(before, meter.read())
            floor_cpu += bench + server
    plugin_cpu, bench_cpu, _ = _used(start, meter.read())
    cpu = Cpu(plugin_cpu / len(refs), (bench_cpu - floor_cpu) / len(refs),
              floor_cpu / len(floor_samples))
    q = len(latencies) // 4
    parts = [latencies[:q], latencies[q:2 * q], latencies[2 * q:3 * q], latencies[3 * q:]]
    return Round(latencies, _quarters([(len(p), sum(p)) for p in parts]),
                 len(latencies) / sum(latencies), floor_samples, cpu)


class CpuMeter:
    """CPU seconds used so far by the plugin, the bench's own process, and the floor's
    server."""

    def __init__(self, plugin_pid: int, floor: Floor) -> None:
        self._plugin = psutil.Process(plugin_pid)
        self._bench = psutil.Process()
        self._floor = psutil.Process(floor.server_pid)

    def read(self) -> tuple[float, float, float]:
        """(plugin, bench, floor server) CPU seconds, user and system."""
        return tuple(sum(p.cpu_times()[:2])  # type: ignore[return-value]
                     for p in (self._plugin, self._bench, self._floor))


def concurrent_round(cluster: LocalCluster, refs: list[ClaimRef], step: str,
                     in_flight: int, floor: Floor, meter: CpuMeter) -> Round:
    """Every claim with `in_flight` calls at a time, between two runs of floor samples;
    rates per quarter of the calls in order of completion, and the CPU per call."""
    one = _caller(cluster, step)
    sample = floor.prepare if step == "prepare" else floor.unprepare
    floor_samples, floor_cpu = _floor_run(sample, meter)
    done: list[float] = []
    latencies: list[float] = []
    lock = threading.Lock()

    def timed(ref: ClaimRef) -> None:
        latency = one(ref)
        with lock:
            latencies.append(latency)
            done.append(time.perf_counter())

    before = meter.read()
    begin = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(timed, refs))
    plugin_cpu, bench_cpu, _ = _used(before, meter.read())
    after, after_cpu = _floor_run(sample, meter)
    floor_samples += after
    cpu = Cpu(plugin_cpu / len(refs), bench_cpu / len(refs),
              (floor_cpu + after_cpu) / len(floor_samples))
    done.sort()
    q = len(done) // 4
    marks = [begin] + [done[i * q - 1] for i in range(1, 4)] + [done[-1]]
    counts = [q, q, q, len(done) - 3 * q]
    rates = _quarters([(n, b - a) for n, a, b in zip(counts, marks, marks[1:], strict=False)])
    return Round(latencies, rates, len(done) / (done[-1] - begin), floor_samples, cpu)


def _floor_run(sample: Callable[[], float], meter: CpuMeter) -> tuple[list[float], float]:
    """AROUND floor samples, and the CPU seconds they took (the floor's server and the
    bench process, which makes the floor's calls and writes)."""
    before = meter.read()
    samples = [sample() for _ in range(AROUND)]
    _, bench, server = _used(before, meter.read())
    return samples, bench + server


def _used(before: tuple[float, ...], after: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(b - a for a, b in zip(before, after, strict=True))


def empty_call(cluster: LocalCluster, floor: Floor,
               samples: int = EMPTY_SAMPLES) -> tuple[float, float]:
    """p50 seconds of an unprepare of a claim the plugin never saw, and of the floor's
    empty call, the two taken in turn."""
    call = _bare_call(cluster, "unprepare")
    unknown = ClaimRef("default", "unknown", str(uuid.uuid4()))
    latencies, floor_rpc = [], []
    for _ in range(samples):
        start = time.perf_counter()
        call(unknown)
        latencies.append(time.perf_counter() - start)
        start = time.perf_counter()
        floor.call()
        floor_rpc.append(time.perf_counter() - start)
    return statistics.median(latencies), statistics.median(floor_rpc)


def run(claims: int = 2000, parent: str = WORK_PARENT) -> Measured:
    """Start the node in a new directory under `parent`, measure every round, stop;
    the figures."""
    workdir = Path(tempfile.mkdtemp(prefix="sdn-", dir=parent))
    try:
        with Floor(workdir / "floor") as floor, LocalCluster(workdir / "node") as cluster:
            plugin = cluster.start_plugin(profile="nic", num_devices=NICS)
            meter = CpuMeter(plugin.pid, floor)
            refs = make_shares(cluster, claims, NICS)
            measured = Measured(claims, floor.parts())
            measured.empty_fresh = empty_call(cluster, floor)
            for in_flight in CONCURRENCY:
                for step in ("prepare", "unprepare"):
                    measured.rounds[(step, in_flight)] = (
                        sequential_round(cluster, refs, step, floor, meter) if in_flight == 1
                        else concurrent_round(cluster, refs, step, in_flight, floor, meter))
                    if (step, in_flight) == ("prepare", 1):
                        measured.empty_full = empty_call(cluster, floor)
            return measured
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def target_rows(m: Measured) -> list[Row]:
    """Issue 23's prepare-path targets as measured, each with PASS or MISS."""
    ms = 1000.0
    seq_p, seq_u = m.rounds[("prepare", 1)], m.rounds[("unprepare", 1)]
    rows = [Row("floor: prepare (call + 2 atomic writes), p50", seq_p.floor_p50 * ms, "ms"),
            Row("floor: unprepare (call + 2 durable unlinks), p50", seq_u.floor_p50 * ms, "ms")]
    for label, one, goal in (("prepare", seq_p, SEQUENTIAL_PREPARE),
                             ("unprepare", seq_u, SEQUENTIAL_UNPREPARE)):
        p50 = statistics.median(one.latencies)
        rows.append(Row(f"sequential {label}, p50", p50 * ms, "ms"))
        ratio = p50 / one.floor_p50
        rows.append(Row(f"sequential {label} p50 / floor", ratio, "x", f"<= {goal:.1f}x",
                        ratio <= goal))
    assert seq_p.cpu is not None
    rows += [Row("CPU per sequential prepare: the plugin", seq_p.cpu.plugin * ms, "ms",
                 f"<= {SEQUENTIAL_CPU_MS:.1f} ms", seq_p.cpu.plugin * ms <= SEQUENTIAL_CPU_MS),
             Row("CPU per serial floor prepare, taken with it", seq_p.cpu.floor * ms, "ms")]
    eight = m.rounds[("prepare", 8)]
    eight_ratio = eight.overall * eight.floor_p50
    rows.append(Row("prepare, 8 in flight / serial floor", eight_ratio, "x",
                    f">= {EIGHT_IN_FLIGHT:.1f}x", eight_ratio >= EIGHT_IN_FLIGHT))
    burst = m.rounds[("prepare", 64)]
    serial = 1 / burst.floor_p50
    rows.append(Row("serial floor around the 64-in-flight round", serial, "/s"))
    rows.append(Row("prepare, 64 in flight", burst.overall, "/s"))
    rows.append(Row("prepare, 64 in flight / serial floor", burst.overall / serial, "x"))
    flat = burst.quarters[-1] / burst.quarters[0]
    rows.append(Row(f"64 in flight, last / first quarter (to {m.claims})", flat, "x",
                    f">= {FLATNESS:.2f}x", flat >= FLATNESS))
    return rows + _cpu_rows(burst, serial) + _empty_rows(m)


def _cpu_rows(burst: Round, serial: float) -> list[Row]:
    """Where the 64-in-flight round's CPU went, and the ceiling it sets: with every core
    busy, no batching gets past cores / CPU per prepare."""
    assert burst.cpu is not None
    ms, cpu, cores = 1000.0, burst.cpu, os.cpu_count() or 1
    ceiling = cores / (cpu.plugin + cpu.bench)
    share = burst.overall / ceiling
    return [Row("CPU per prepare at 64 in flight: the plugin", cpu.plugin * ms, "ms"),
            Row("  and the bench's kubelet emulator + API stand-in", cpu.bench * ms, "ms"),
            Row("CPU per serial floor prepare (its server + the bench)", cpu.floor * ms, "ms"),
            Row(f"CPU ceiling: {cores} cores / CPU per prepare", ceiling, "/s"),
            Row("CPU ceiling / serial floor", ceiling / serial, "x"),
            Row("prepare, 64 in flight / CPU ceiling", share, "x",
                f">= {CEILING_SHARE:.1f}x", share >= CEILING_SHARE)]


def _empty_rows(m: Measured) -> list[Row]:
    """The empty call's rows. The kubelet emulator and the API stand-in share the
    bench's process, whose own calls slow down as it holds N claims (the floor's call
    too, by a third): each empty call is judged against the floor call taken in turn
    with it."""
    ms = 1000.0
    (fresh, fresh_floor), (full, full_floor) = m.empty_fresh, m.empty_full
    normalized = (full / full_floor) / (fresh / fresh_floor)
    return [Row("empty call, fresh plugin", fresh * ms, "ms"),
            Row("floor call, taken in turn with the fresh one", fresh_floor * ms, "ms"),
            Row("empty call, fresh plugin / floor call", fresh / fresh_floor, "x",
                f"<= {EMPTY_CALL:.1f}x", fresh / fresh_floor <= EMPTY_CALL),
            Row(f"empty call, {m.claims} prepared", full * ms, "ms"),
            Row(f"floor call, taken in turn with the {m.claims} prepared one",
                full_floor * ms, "ms"),
            Row(f"empty call, {m.claims} prepared / fresh (raw)", full / fresh, "x"),
            Row(f"empty call, {m.claims} prepared / fresh (per floor call)", normalized, "x",
                f"<= {EMPTY_FULL:.1f}x", normalized <= EMPTY_FULL)]


def detail_lines(m: Measured) -> list[str]:
    """The per-round figures: floor parts, latencies, rates per quarter."""
    ms = 1000.0
    parts = m.parts
    lines = [f"node scale: {m.claims} claims, one NIC share each, {NICS} NICs",
             f"floor parts (p50): empty gRPC call {parts['rpc'] * ms:.2f} ms, atomic write "
             f"{parts['write'] * ms:.2f} ms, durable unlink {parts['remove'] * ms:.2f} ms",
             "round                      p50 ms  p99 ms   floor ms  quarters (calls/s)"
             "              overall  vs serial floor"]
    for in_flight in CONCURRENCY:
        for step in ("prepare", "unprepare"):
            one = m.rounds[(step, in_flight)]
            ordered = sorted(one.latencies)
            p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
            quarters = " ".join(f"{r:6.0f}" for r in one.quarters)
            lines.append(
                f"{step:9s} {in_flight:2d} in flight  {statistics.median(ordered) * ms:7.2f} "
                f"{p99 * ms:7.2f}  {one.floor_p50 * ms:8.2f}  {quarters}  {one.overall:6.0f}/s"
                f"  {one.overall * one.floor_p50:5.2f}x")
    return lines


def measure(claims: int = 2000, parent: str = WORK_PARENT) -> list[Row]:
    """Run the benchmark; the targets table's rows (the details are printed)."""
    measured = run(claims, parent)
    print("\n".join(detail_lines(measured)))
    return target_rows(measured)


def main() -> None:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--work-parent", default=WORK_PARENT,
                        help="where the node's directories are made (default %(default)s)")
    args = parser.parse_args()
    rows = measure(args.claims, args.work_parent)
    print(table("prepare path (ratios against the floor of the same run)", rows))


if __name__ == "__main__":
    main()
