"""Which fields a server dropped, and which feature gates that points to."""

from __future__ import annotations

import copy

from simdra._driver.slices.dropped import find_dropped, likely_gates

from .builders import TAINT, gpu


def spec(devices, **extra):
    return {"driver": "d", "nodeName": "n", "pool": {"name": "p", "generation": 1,
                                                      "resourceSliceCount": 1},
            "devices": devices, **extra}


def drop(sent, *keys):
    out = copy.deepcopy(sent)
    for device in out["devices"]:
        for key in keys:
            device.pop(key, None)
    return out


def test_consumable_capacity_fields_dropped_name_the_gate_once_for_all_devices():
    devices = [gpu(i, allowMultipleAllocations=True) for i in range(1000)]
    sent = spec(devices)
    paths = find_dropped(sent, drop(sent, "allowMultipleAllocations"))
    assert paths == ["spec.devices[*].allowMultipleAllocations"]
    assert likely_gates(paths) == ("DRAConsumableCapacity",)


def test_taints_and_counters_and_list_attributes():
    device = gpu(0, taints=[TAINT], consumesCounters=[{"counterSet": "s", "counters": {
        "mem": {"value": "1Gi"}}}])
    device["attributes"]["links"] = {"ints": [1]}
    sent = spec([device])
    stored = drop(sent, "taints", "consumesCounters")
    del stored["devices"][0]["attributes"]["links"]
    gates = likely_gates(find_dropped(sent, stored))
    assert gates == ("DRADeviceTaints", "DRAListTypeAttributes", "DRAPartitionableDevices")


def test_server_normalisation_is_not_reported():
    sent = spec([gpu(0, taints=[TAINT], capacity={"memory": {"value": "1024Mi"}})])
    stored = copy.deepcopy(sent)
    stored["devices"][0]["capacity"]["memory"]["value"] = "1Gi"
    stored["devices"][0]["taints"][0]["timeAdded"] = "2026-01-01T00:00:00Z"
    assert find_dropped(sent, stored) == []


def test_unknown_fields_are_reported_without_a_gate():
    sent = spec([gpu(0, futureField={"x": 1})])
    paths = find_dropped(sent, drop(sent, "futureField"))
    assert paths == ["spec.devices[*].futureField"] and likely_gates(paths) == ("unknown",)
