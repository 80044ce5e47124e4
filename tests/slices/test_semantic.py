"""Semantic equality: server-side normalisation must never look like a change."""

from __future__ import annotations

from simdra._driver.slices.semantic import device_equal, devices_equal, with_taint_times

from .builders import TAINT, gpu


def test_quantities_compare_by_value_not_by_text():
    a = gpu(0, capacity={"memory": {"value": "1024Mi"}})
    assert device_equal(a, gpu(0, capacity={"memory": {"value": "1Gi"}}))
    assert not device_equal(a, gpu(0, capacity={"memory": {"value": "1G"}}))


def test_empty_lists_maps_and_empty_taint_values_are_omitted_like_go_omitempty():
    assert device_equal(gpu(0, taints=[]), gpu(0))
    assert device_equal({"name": "x", "attributes": {}}, {"name": "x"})
    assert device_equal(gpu(0, taints=[{**TAINT, "value": ""}]),
                        gpu(0, taints=[{"key": TAINT["key"], "effect": "NoSchedule"}]))


def test_server_set_time_added_is_not_a_change_and_is_preserved():
    stored = gpu(0, taints=[{**TAINT, "timeAdded": "2026-01-01T00:00:00Z"}])
    assert device_equal(gpu(0, taints=[TAINT]), stored)
    (merged,) = with_taint_times([gpu(0, taints=[TAINT])], [stored])
    assert merged["taints"][0]["timeAdded"] == "2026-01-01T00:00:00Z"


def test_a_changed_taint_is_a_change_and_keeps_no_old_time():
    stored = gpu(0, taints=[{**TAINT, "timeAdded": "2026-01-01T00:00:00Z"}])
    changed = gpu(0, taints=[{**TAINT, "effect": "NoExecute"}])
    assert not device_equal(changed, stored)
    (merged,) = with_taint_times([changed], [stored])
    assert "timeAdded" not in merged["taints"][0]


def test_order_and_attribute_values_matter():
    assert not devices_equal([gpu(0), gpu(1)], [gpu(1), gpu(0)])
    assert not devices_equal([gpu(0)], [gpu(0, attributes={"index": {"int": 5}})])
    assert devices_equal([gpu(0), gpu(1)], [gpu(0), gpu(1)])
