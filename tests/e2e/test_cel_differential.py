"""The same CEL selectors select the same devices in the real scheduler as in our
`simdra._driver.testing` allocator.

Each selector becomes a claim with allocationMode All on a node whose inventory
(inventories/cel.yaml) has exclusive devices with varied attributes: the real
scheduler then allocates every device the selector matches (or marks the pod
unschedulable when none does), and our allocator computes the allocation of the same
claim against the same slices and DeviceClass read back from the real API server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from simdra._driver.testing.cluster import wait_until
from simdra._driver.testing.scheduler import AllocationError, allocate

from .conftest import CEL_NODE
from .hostnode import HostNode
from .workloads import Workloads, exactly, unique

GPU = "gpu.dra.example.com"
A = 'device.attributes["dra.example.com"]'
C = 'device.capacity["dra.example.com"]'

SELECTORS = [
    f'{A}.model in ["Simulated GPU S2", "Simulated GPU X1"]',
    f"has({A}.vendor)",
    f"!has({A}.vendor)",
    f'{A}.model.matches("S[12]$")',
    f'{C}.memory.compareTo(quantity("20Gi")) >= 0',
    f'{C}.memory.isLessThan(quantity("16Gi"))',
    f'{C}.memory == quantity("16G")',
    f'{A}.driverVersion.isGreaterThan(semver("1.0.0"))',
    f'{A}.driverVersion.isLessThan(semver("1.2.0"))',
    f'{A}.driverVersion.major() == 1 && {A}.driverVersion.minor() >= 2',
    f"size({A}.model) == 16 && {A}.ecc",
    f'{A}.index < 3 ? {A}.ecc : {A}.model.endsWith("X1")',
    f'{A}.index in [0, 4, 9] || {A}.model.startsWith("Simulated GPU S2")',
    'device.attributes["other.example.com"].rack == "r1"',
    f'has(device.attributes["other.example.com"].rack) || {A}.index == 2',
    f'{A}.vendor == "vendor-a" || {A}.index == 1',
    f'{A}.model.contains("X") && !{A}.ecc',
    f'device.driver == "dra.example.com" && {A}.index >= 100',
]


def _real(workloads: Workloads, selector: str) -> set[str] | str:
    template = workloads.template(unique("cel"), [
        exactly("all", GPU, all_devices=True, selectors=[selector])])
    pod = workloads.pod(unique("cel"), {"all": template}, node=CEL_NODE)

    def verdict() -> set[str] | str | None:
        devices = workloads.allocated_devices(pod).get("all")
        if devices:
            return {d["device"] for d in devices}
        reason = workloads.unschedulable_reason(pod)
        return "unschedulable" if reason else None
    try:
        return wait_until(verdict, 60, f"scheduler verdict for {selector}")
    finally:
        workloads.delete_pod(pod)


def _ours(api: client.ApiClient, node: HostNode, selector: str) -> set[str] | str:
    resource = client.ResourceV1Api(api)
    raw = resource.read_device_class(GPU, _preload_content=False)
    classes = {GPU: json.loads(raw.data)}
    claim: dict[str, Any] = {
        "metadata": {"name": "cel", "namespace": "default", "uid": "differential"},
        "spec": {"devices": {"requests": [
            exactly("all", GPU, all_devices=True, selectors=[selector])]}},
    }
    try:
        allocation = allocate(claim, node.slices(), classes, node_name=node.name)
    except AllocationError:
        return "unschedulable"
    return {r["device"] for r in allocation["devices"]["results"]}


@pytest.mark.parametrize("selector", SELECTORS)
def test_selector_selects_the_same_devices(selector: str, cel_node: HostNode,
                                           workloads: Workloads) -> None:
    real = _real(workloads, selector)
    ours = _ours(workloads.core.api_client, cel_node, selector)
    assert ours == real, f"{selector}: scheduler {real}, our allocator {ours}"
