"""The fleet under test: one `simdra fleet` process, or one per shard (`--shard i/n`, as n
replicas of deploy/fleet run it), started together on the same control plane and
measured as one: published when the last shard is, requests and CPU summed, RSS summed
and per shard.
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from fleet_api import metric_sum
from fleet_cluster import DRIVER_NAME, Cluster, Fleet

from tests.e2e.controlplane import free_port


class FleetGroup:
    """`shards` fleet processes splitting `nodes` between them."""

    def __init__(self, cluster: Cluster, nodes: int, shards: int, workdir: Path,
                 args: list[str]) -> None:
        kubeconfig = cluster.fleet_kubeconfig()
        self.ports = [free_port() for _ in range(shards)]
        self.fleets = []
        for index, port in enumerate(self.ports):
            shard = ["--shard", f"{index}/{shards}"] if shards > 1 else []
            log = workdir / (f"fleet-{index}.log" if shards > 1 else "fleet.log")
            self.fleets.append(Fleet(["--kubeconfig", str(kubeconfig), "--driver-name",
                                      DRIVER_NAME, "--nodes", str(nodes), *args, *shard,
                                      "--metrics-port", str(port)], log))

    def start(self) -> None:
        """Start every shard (one right after the other)."""
        for fleet in self.fleets:
            fleet.start()

    def wait_published(self, timeout: float) -> tuple[float, float, int, int]:
        """Wait until every shard wrote its `published` line: (the largest time a shard
        says, the largest seen from its exec here, nodes, slices: summed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [fleet.poll_published() for fleet in self.fleets]
            done = [line for line in lines if line is not None]
            if len(done) == len(lines):
                return (max(d[0] for d in done), max(d[1] for d in done),
                        sum(d[2] for d in done), sum(d[3] for d in done))
            time.sleep(0.1)
        tails = "; ".join(fleet.tail() for fleet in self.fleets)
        raise RuntimeError(f"fleet: no 'published' line in {timeout:.0f}s: {tails}")

    def usage(self) -> tuple[float, list[float]]:
        """(CPU seconds so far, all shards; RSS in bytes, per shard)."""
        each = [fleet.usage() for fleet in self.fleets]
        return sum(cpu for cpu, _ in each), [rss for _, rss in each]

    def own_requests(self, **labels: str) -> float:
        """simdra_fleet_api_requests_total (all verbs, or those `labels` pick) from every
        shard's /metrics (0 for a shard that serves none)."""
        total = 0.0
        for port in self.ports:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                            timeout=5) as r:
                    total += metric_sum(r.read().decode(), "simdra_fleet_api_requests_total",
                                        **labels)
            except OSError:
                pass
        return total

    def stop(self) -> None:
        """Stop every shard."""
        for fleet in self.fleets:
            fleet.stop()
