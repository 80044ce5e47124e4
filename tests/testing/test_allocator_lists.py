"""The scheduler stand-in over list-type attributes (DRAListTypeAttributes, on in the
modelled 1.37), as the structured allocator compares them: a value is a set (a scalar is
a set of one), `matchAttribute` keeps the chosen sets meeting, `distinctAttribute` keeps
them pairwise disjoint."""

from __future__ import annotations

from typing import Any

import pytest

from simdra._driver.testing.allocation.builders import claim, device_class, exactly, resource_slice
from simdra._driver.testing.scheduler import AllocationError, allocate

GPU, NIC = "gpu.example.com", "nic.example.com"
CLASSES = {GPU: device_class(GPU), NIC: device_class(NIC)}
NUMA = "resource.kubernetes.io/numaNode"


def _device(name: str, numa: Any) -> dict[str, Any]:
    value = {"ints": numa} if isinstance(numa, list) else {"int": numa}
    return {"name": name, "attributes": {NUMA: value}}


def _slices() -> list[dict[str, Any]]:
    return [resource_slice(GPU, [_device("gpu-0", 1)]),
            resource_slice(NIC, [_device("nic-0", [2, 3]), _device("nic-1", [0, 1]),
                                 _device("nic-2", [0, 1])])]


def _picked(allocation: dict[str, Any]) -> list[str]:
    return [r["device"] for r in allocation["devices"]["results"]]


def test_match_attribute_takes_a_list_that_holds_the_scalar():
    pair = claim("pair", exactly("gpu", GPU), exactly("nic", NIC),
                 constraints=[{"matchAttribute": NUMA}])
    assert _picked(allocate(pair, _slices(), CLASSES)) == ["gpu-0", "nic-1"]


def test_distinct_attribute_needs_disjoint_lists():
    two = claim("two", exactly("nics", NIC, count=2), constraints=[{"distinctAttribute": NUMA}])
    assert _picked(allocate(two, _slices(), CLASSES)) == ["nic-0", "nic-1"]
    three = claim("three", exactly("nics", NIC, count=3),
                  constraints=[{"distinctAttribute": NUMA}])
    with pytest.raises(AllocationError, match="not together under constraints"):
        allocate(three, _slices(), CLASSES)
