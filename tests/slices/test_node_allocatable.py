"""Node-allocatable mappings (KEP-5517): validate_device refuses what kube-apiserver
1.37 refuses, and each release's server gets the field it knows (1.37
`nodeAllocatableResources`, 1.36 `nodeAllocatableResourceMappings`, nothing before)."""

from __future__ import annotations

from typing import Any

import pytest

from simdra import validate_device
from simdra._driver.devices.model import Device, Pool
from simdra._driver.slices.desired import SliceLayout, desired_pool, layout_for_release
from simdra._driver.slices.release_fields import mapping_1_36
from simdra._driver.testing.apiserver.validation.node_allocatable import node_allocatable_errors

PATH = "spec.devices[0]"
WHERE = f"{PATH}.nodeAllocatableResources"


def _device(resources: Any, **capacity: str) -> dict[str, Any]:
    return {"name": "cpu-0", "allowMultipleAllocations": True,
            "capacity": {name: {"value": value} for name, value in
                         (capacity or {"cpus": "8"}).items()},
            "nodeAllocatableResources": resources}


def _errors(resources: Any, **capacity: str) -> list[tuple[str, str]]:
    return [(e.field, e.message) for e in validate_device(_device(resources, **capacity), PATH)]


@pytest.mark.parametrize("resources", [
    {"cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "1"}}},
    {"memory": {"mapping": {"deviceMultiplier": "2Gi"}}},
    {"hugepages-2Mi": {"overhead": {"perPod": "4Mi", "perContainer": "0"}}},
    {"cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "2"},
             "overhead": {"perContainer": "100m"}}},
])
def test_well_formed_mappings_are_accepted(resources: Any) -> None:
    assert _errors(resources) == []


@pytest.mark.parametrize(("resources", "expected"), [
    ({"nvidia.com/gpu": {"mapping": {"deviceMultiplier": "1"}}},
     (f"{WHERE}[nvidia.com/gpu]", "must be a node allocatable resource name")),
    ({"cpu": {}}, (f"{WHERE}[cpu]", "at least one of mapping or overhead must be set")),
    ({"cpu": {"mapping": {"capacityKey": "cores", "capacityMultiplier": "1"}}},
     (f"{WHERE}[cpu].mapping.capacityKey", 'Not found: "cores"')),
    ({"cpu": {"mapping": {"capacityKey": "cpus"}}},
     (f"{WHERE}[cpu].mapping.capacityMultiplier", "capacityMultiplier is required")),
    ({"cpu": {"mapping": {"capacityMultiplier": "1"}}},
     (f"{WHERE}[cpu].mapping.capacityKey", "capacityKey is required")),
    ({"cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "0"}}},
     (f"{WHERE}[cpu].mapping.capacityMultiplier", "must be positive")),
    ({"cpu": {"mapping": {"deviceMultiplier": "-1"}}},
     (f"{WHERE}[cpu].mapping.deviceMultiplier", "must be positive")),
    ({"cpu": {"mapping": {}}}, (f"{WHERE}[cpu].mapping", "must specify one of")),
    ({"cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "1",
                          "deviceMultiplier": "1"}}},
     (f"{WHERE}[cpu].mapping", "must specify exactly one of")),
    ({"cpu": {"overhead": {}}}, (f"{WHERE}[cpu].overhead", "at least one of perPod")),
    ({"cpu": {"overhead": {"perPod": "-1"}}},
     (f"{WHERE}[cpu].overhead.perPod", "must be non-negative")),
])
def test_mappings_the_api_server_refuses_are_refused(resources: Any,
                                                     expected: tuple[str, str]) -> None:
    field, text = expected
    errors = _errors(resources)
    assert any(f == field and text in m for f, m in errors), errors


CPU = Device(spec=_device({"cpu": {"mapping": {"capacityKey": "cpus",
                                               "capacityMultiplier": "1"}}}))
GPU = Device(spec=_device({"memory": {"mapping": {"deviceMultiplier": "4Gi"},
                                      "overhead": {"perPod": "1Gi"}},
                           "hugepages-1Gi": {"overhead": {"perPod": "1Gi"}}}))


def _published(device: Device, release: str) -> dict[str, Any]:
    [desired] = desired_pool(Pool("p", (device,)), layout_for_release(release)).slices
    return dict(desired.devices[0])


def test_a_1_37_server_gets_the_mappings_as_written() -> None:
    assert _published(CPU, "v1.37.2") == CPU.spec


def test_a_1_36_server_gets_them_under_its_own_name_and_shape() -> None:
    published = _published(CPU, "v1.36.3")

    assert "nodeAllocatableResources" not in published
    assert published["nodeAllocatableResourceMappings"] == {
        "cpu": {"capacityKey": "cpus", "allocationMultiplier": "1"}}


def test_1_36_counts_devices_with_an_allocation_multiplier_and_has_no_overheads() -> None:
    published = _published(GPU, "v1.36.0")

    assert published["nodeAllocatableResourceMappings"] == {
        "memory": {"allocationMultiplier": "4Gi"}}
    assert mapping_1_36({"overhead": {"perPod": "1Gi"}}) is None


@pytest.mark.parametrize("release", ["v1.35.4", "v1.34.4"])
def test_older_servers_get_no_mappings_at_all(release: str) -> None:
    published = _published(CPU, release)

    assert not {"nodeAllocatableResources", "nodeAllocatableResourceMappings"} & set(published)
    assert published["capacity"] == CPU.spec["capacity"]


def test_each_layout_names_the_field_of_its_release() -> None:
    assert SliceLayout.SEPARATE_1_36.node_allocatable_field == "nodeAllocatableResourceMappings"
    assert SliceLayout.WITH_DEVICES.node_allocatable_field is None


_ALL_CASES = [
    {"cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "1"}}},
    {"nvidia.com/gpu": {"mapping": {"deviceMultiplier": "1"}}},
    {"cpu": {}},
    {"cpu": {"mapping": {"capacityKey": "cores", "capacityMultiplier": "1"}}},
    {"cpu": {"mapping": {"capacityKey": "", "capacityMultiplier": "1"}}},
    {"cpu": {"mapping": {"capacityKey": "cpus"}}},
    {"cpu": {"mapping": {"capacityMultiplier": "1"}}},
    {"cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "-2"}}},
    {"cpu": {"mapping": {}}},
    {"cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "1",
                         "deviceMultiplier": "1"}}},
    {"memory": {"overhead": {}}},
    {"memory": {"overhead": {"perPod": "-1Gi", "perContainer": "-1"}}},
]


@pytest.mark.parametrize("resources", _ALL_CASES)
def test_the_client_and_the_stand_in_judge_mappings_alike(resources: Any) -> None:
    """The stand-in's own rule book (written apart) names the same fields and reasons."""
    device = _device(resources)
    ours = sorted((e.field, e.reason) for e in validate_device(device, PATH))
    theirs = sorted((e.field, e.reason) for e in node_allocatable_errors(device, PATH))
    assert ours == theirs
