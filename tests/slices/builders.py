"""Small builders for inventories and devices used by the slice tests."""

from __future__ import annotations

from typing import Any

from simdra._driver.devices.model import Device, Inventory, Pool

DRIVER = "gpu.example.com"
NODE = "node-1"


def gpu(i: int, **extra: Any) -> dict[str, Any]:
    """A plain GPU device spec (v1 JSON)."""
    return {
        "name": f"gpu-{i}",
        "attributes": {"index": {"int": i}, "model": {"string": "sim-a100"}},
        "capacity": {"memory": {"value": "80Gi"}},
        **extra,
    }


def pool(name: str, specs: list[dict[str, Any]], counters: tuple[dict[str, Any], ...] = ()
         ) -> Pool:
    """A pool from device specs."""
    return Pool(name=name, devices=tuple(Device(spec=s) for s in specs), shared_counters=counters)


def gpus(n: int, start: int = 0, **extra: Any) -> list[dict[str, Any]]:
    """`n` GPU specs numbered from `start`."""
    return [gpu(i, **extra) for i in range(start, start + n)]


def inventory(*pools: Pool) -> Inventory:
    """An inventory of the given pools."""
    return Inventory(pools=tuple(pools))


TAINT = {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}
