"""`kubectl dra top`: allocated against total devices and capacity, per group."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.dra_cli.conftest import Run


def _groups(run: Run, by: str) -> dict[str, dict[str, Any]]:
    code, out, err = run("top", "--by", by, "-o", "json")
    assert (code, err) == (0, "")
    return {g["group"]: g for g in json.loads(out)["groups"]}


def _capacity(group: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: f"{c['used']}/{c['total']}" for c in group["capacity"]}


def test_by_node(run: Run) -> None:
    groups = _groups(run, "node")
    assert [(g["devices"], g["allocated"], g["unhealthy"]) for g in groups.values()] == [
        (5, 2, 1), (3, 1, 0), (8, 3, 1)]
    assert list(groups) == ["node-1", "node-2", "(all)"]
    assert _capacity(groups["node-1"]) == {"bandwidth": "100G/100G", "memory": "80Gi/320Gi"}
    assert _capacity(groups["(all)"]) == {"bandwidth": "100G/100G", "memory": "120Gi/480Gi"}


def test_by_driver_and_by_class(run: Run) -> None:
    drivers = _groups(run, "driver")
    gpu, net = drivers["gpu.example.com"], drivers["net.example.com"]
    assert (gpu["devices"], gpu["allocated"], net["devices"], net["allocated"]) == (7, 2, 1, 1)
    classes = _groups(run, "class")
    assert list(classes) == ["gpu", "net", "(all)"]
    assert _capacity(classes["net"]) == {"bandwidth": "100G/100G"}


def test_the_table(run: Run) -> None:
    code, out, _ = run("top")
    assert code == 0
    header, node1, _, total = out.splitlines()
    assert header.split()[:4] == ["NODE", "DEVICES", "ALLOCATED", "%"]
    assert node1.split()[:5] == ["node-1", "5", "2", "40%", "1"]
    assert total.split()[:4] == ["(all)", "8", "3", "37%"]


def test_watch_refreshes_until_told_to_stop(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    sleep: Callable[[float], None] = slept.append
    monkeypatch.setattr("simdra._driver.dra_cli.commands.time.sleep", sleep)
    code, out, _ = run("top", "--watch", "--interval", "0.5", "--iterations", "3")
    assert code == 0
    assert out.count("NODE  ") == 3 and slept == [0.5, 0.5]
