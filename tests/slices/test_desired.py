"""Chunking the inventory into slices under the API's per-slice limits."""

from __future__ import annotations

from driver.core.validation import validate_slice
from driver.slices.desired import desired_pool, desired_pools
from driver.slices.diff import SliceTarget, slice_object

from .builders import DRIVER, NODE, TAINT, gpus, inventory, pool

TARGET = SliceTarget(DRIVER, NODE, "uid-1")


def sizes(p):
    return [(len(s.devices), len(s.shared_counters)) for s in desired_pool(p).slices]


def assert_valid(p):
    desired = desired_pool(p)
    for i, s in enumerate(desired.slices):
        obj = slice_object(s, p.name, 1, len(desired.slices), TARGET, f"s-{i}")
        assert validate_slice(obj) == [], obj["metadata"]["name"]


def test_plain_devices_fill_slices_of_128_in_inventory_order():
    p = pool("a", gpus(300))
    assert sizes(p) == [(128, 0), (128, 0), (44, 0)]
    names = [d["name"] for s in desired_pool(p).slices for d in s.devices]
    assert names == [f"gpu-{i}" for i in range(300)]
    assert_valid(p)


def test_taints_lower_the_limit_to_64():
    p = pool("a", gpus(130, taints=[TAINT]))
    assert sizes(p) == [(64, 0), (64, 0), (2, 0)]
    assert_valid(p)


def test_list_attributes_lower_the_limit_to_64():
    specs = gpus(65)
    for spec in specs:
        spec["attributes"]["links"] = {"ints": [1, 2]}
    assert sizes(pool("a", specs)) == [(64, 0), (1, 0)]


def test_an_advanced_device_starts_a_new_slice_when_the_current_one_is_too_full():
    specs = gpus(100) + gpus(1, start=100, taints=[TAINT]) + gpus(10, start=101)
    p = pool("a", specs)
    assert sizes(p) == [(100, 0), (11, 0)]
    assert_valid(p)


def test_shared_counters_get_their_own_slices_first_at_most_8_sets_each():
    counters = tuple({"name": f"set-{i}", "counters": {"mem": {"value": "80Gi"}}}
                     for i in range(10))
    uses = [{"counterSet": "set-0", "counters": {"mem": {"value": "1Gi"}}}]
    specs = gpus(3, consumesCounters=uses)
    p = pool("a", specs, counters)
    assert sizes(p) == [(0, 8), (0, 2), (3, 0)]
    first = desired_pool(p).slices[0].spec_content()
    assert "devices" not in first and len(first["sharedCounters"]) == 8
    assert_valid(p)


def test_an_empty_pool_is_published_as_one_empty_slice():
    p = pool("a", [])
    assert sizes(p) == [(0, 0)]
    assert desired_pool(p).slices[0].spec_content() == {"devices": []}
    assert_valid(p)


def test_every_pool_of_the_inventory_is_planned_in_order():
    pools = desired_pools(inventory(pool("b", gpus(1)), pool("a", gpus(2))))
    assert list(pools) == ["b", "a"]
    assert pools["a"].device_count == 2
