"""ResourceSlice publishing on one big node: time, API writes, quiet-node cost, memory.

Usage: python bench/publish_bench.py [--sizes 1000 10000] [--quiet-seconds 30]

For each size the API stand-in runs in a child process (so the RSS printed is the
publisher's process: publisher, client, inventory) and the publisher runs here, talking
HTTP to it. Printed per size:
- publish: wall time from start() to a complete published pool, and API writes against
  the floor of one create per slice;
- quiet: writes and CPU seconds of this process during N quiet seconds;
- one attribute changed / one device added: writes and time to publish the change;
- all slices deleted (as the kubelet does at start): time until every slice is back;
- restart with the same inventory: writes (should be 0) and time to sync;
- RSS of this process with the pool published.
No assertions: this prints numbers.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from stand_in_process import StandIn

from simdra._driver.devices.model import Device, Inventory, Pool
from simdra._driver.slices.publisher import Publisher

DRIVER = "gpu.example.com"
NODE = "bench-node"
POOL = "bench-pool"


# --- the API stand-in's commands (it runs in a child process) ------------------------


def _reset(server: Any) -> None:
    server.request_log.clear()


def _writes(server: Any) -> int:
    return int(server.writes("resourceslices"))


def _creates(server: Any) -> int:
    return sum(1 for e in server.request_log.entries("create", "resourceslices")
               if e.code == 201)


def _delete_all(server: Any) -> int:
    names = [o["metadata"]["name"] for o in server.store.list("resourceslices")[0]]
    for name in names:
        server.delete_object("resourceslices", name)
    return len(names)


COMMANDS = {"reset": _reset, "writes": _writes, "creates": _creates,
            "delete_all": _delete_all}


# --- inventory ---------------------------------------------------------------------


def gpu(i: int, model: str = "sim-a100") -> Device:
    """A GPU with the attribute/capacity mix of a real GPU driver."""
    return Device(spec={
        "name": f"gpu-{i}",
        "attributes": {
            "index": {"int": i},
            "model": {"string": model},
            "uuid": {"string": f"GPU-{i:08x}-0000-4000-8000-{i:012x}"},
            "driverVersion": {"version": "550.54.15"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{i // 256 % 256:02x}:"
                                                          f"{i % 256:02x}.0"},
            "numaNode": {"int": i % 2},
        },
        "capacity": {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "132"}},
    })


def inventory(n: int, changed: int | None = None) -> Inventory:
    devices = tuple(gpu(i, "sim-h100" if i == changed else "sim-a100") for i in range(n))
    return Inventory(pools=(Pool(name=POOL, devices=devices),))


# --- measurements ------------------------------------------------------------------


def timed_update(publisher: Publisher, stand_in: StandIn, inv: Inventory) -> tuple[int, float]:
    stand_in.ask("reset")
    start = time.perf_counter()
    publisher.update(inv)
    if not publisher.wait_synced(120):
        raise SystemExit("publisher did not sync within 120 s")
    return stand_in.ask("writes"), time.perf_counter() - start


def republish_time(publisher: Publisher, stand_in: StandIn) -> tuple[float, int]:
    stand_in.ask("reset")
    deleted = stand_in.ask("delete_all")
    start = time.perf_counter()
    deadline = start + 120
    while stand_in.ask("creates") < deleted:
        if time.perf_counter() > deadline:
            raise SystemExit("slices were not republished within 120 s")
        time.sleep(0.002)
    elapsed = time.perf_counter() - start
    publisher.wait_synced(120)
    return elapsed, stand_in.ask("writes")


def run(size: int, quiet_seconds: float) -> None:
    stand_in = StandIn(COMMANDS, nodes=[NODE])
    me = psutil.Process()
    try:
        client = _client(stand_in.url)
        rss_before = me.memory_info().rss
        slices = math.ceil(size / 128)

        start = time.perf_counter()
        publisher = Publisher(client, DRIVER, NODE, inventory(size))
        publisher.start()
        if not publisher.wait_synced(300):
            raise SystemExit("publisher did not sync within 300 s")
        publish_s = time.perf_counter() - start
        writes = stand_in.ask("writes")
        print(f"\n== {size} devices, {slices} slices ==")
        print(f"publish:          {publish_s:8.3f} s   writes {writes} (floor {slices}, "
              f"ratio {writes / slices:.2f})")

        stand_in.ask("reset")
        cpu = me.cpu_times()
        time.sleep(quiet_seconds)
        cpu_after = me.cpu_times()
        used = (cpu_after.user - cpu.user) + (cpu_after.system - cpu.system)
        print(f"quiet {quiet_seconds:g} s:       writes {stand_in.ask('writes')}, CPU "
              f"{used:.3f} s")

        writes, took = timed_update(publisher, stand_in, inventory(size, changed=size // 2))
        print(f"1 attribute:      {took:8.3f} s   writes {writes}")
        writes, took = timed_update(publisher, stand_in, inventory(size + 1, changed=size // 2))
        print(f"1 device added:   {took:8.3f} s   writes {writes} "
              f"(generation {publisher.stats().generations.get(POOL)})")

        took, writes = republish_time(publisher, stand_in)
        print(f"all deleted:      {took:8.3f} s   to republish, writes {writes}")
        rss = me.memory_info().rss
        print(f"RSS:              {rss / 2**20:8.1f} MiB (+{(rss - rss_before) / 2**20:.1f} MiB "
              "for the inventory and the publisher's state)")

        publisher.stop()
        stand_in.ask("reset")
        start = time.perf_counter()
        restarted = Publisher(client, DRIVER, NODE, inventory(size + 1, changed=size // 2))
        restarted.start()
        restarted.wait_synced(120)
        print(f"restart:          {time.perf_counter() - start:8.3f} s   writes "
              f"{stand_in.ask('writes')}")
        restarted.stop()
        client.close()
    finally:
        stand_in.stop()


def _client(url: str) -> Any:
    from simdra._driver.kubeapi import ClusterAccess, RestClient

    return RestClient(ClusterAccess(server=url))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--quiet-seconds", type=float, default=30.0)
    args = parser.parse_args()
    for size in args.sizes:
        run(size, args.quiet_seconds)


if __name__ == "__main__":
    main()
