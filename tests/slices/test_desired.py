"""Chunking the inventory into slices under the API's per-slice limits."""

from __future__ import annotations

import pytest

from simdra._driver.core.validation import validate_slice
from simdra._driver.slices.desired import (
    SliceLayout,
    desired_pool,
    desired_pools,
    layout_for_release,
)
from simdra._driver.slices.diff import SliceTarget, slice_object

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


def _counter_set(name, *counters):
    return {"name": name, "counters": {c: {"value": "80Gi"} for c in counters or ("mem",)}}


def _uses(*sets):
    return [{"counterSet": s, "counters": {"mem": {"value": "1Gi"}}} for s in sets]


@pytest.mark.parametrize(("release", "layout"), [
    ("v1.34.4", SliceLayout.WITH_DEVICES),
    ("v1.34.0-eks-4d5e6f", SliceLayout.WITH_DEVICES),
    ("1.33.1", SliceLayout.WITH_DEVICES),
    ("v1.35.0", SliceLayout.SEPARATE_1_35),
    ("v1.36.3", SliceLayout.SEPARATE_1_36),
    ("v1.37.2", SliceLayout.SEPARATE),
    ("v1.38.0-beta.0", SliceLayout.SEPARATE),  # a pre-release: its minor decides
    ("v2.0.0", SliceLayout.SEPARATE),
    ("", SliceLayout.SEPARATE),
    ("v0.0.0-master+$Format:%H$", SliceLayout.SEPARATE),  # unstamped build: newest
    ("master", SliceLayout.SEPARATE),
])
def test_the_release_decides_where_counter_sets_go(release, layout):
    assert layout_for_release(release) is layout


def _layout(slices):
    return [([c["name"] for c in s.shared_counters], [d["name"] for d in s.devices])
            for s in slices]


def test_on_1_34_counter_sets_share_the_slice_of_their_devices_in_inventory_order():
    counters = (_counter_set("gpu-0"), _counter_set("gpu-1"), _counter_set("spare"))
    specs = (gpus(2, consumesCounters=_uses("gpu-1")) + gpus(1, start=2)
             + gpus(2, start=3, consumesCounters=_uses("gpu-0")))
    desired = desired_pool(pool("a", specs, counters), SliceLayout.WITH_DEVICES)
    assert _layout(desired.slices) == [
        (["gpu-0", "gpu-1"], ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"]),
        (["spare"], []),  # a set nobody consumes is still published
    ]
    assert "devices" not in desired.slices[1].spec_content()


def test_on_1_34_a_set_and_its_devices_never_straddle_two_slices():
    # 8 partitionable GPUs of 9 partitions each: 72 devices, 64 at most per slice.
    counters = tuple(_counter_set(f"gpu-{g}") for g in range(8))
    specs = [spec for g in range(8)
             for spec in gpus(9, start=9 * g, consumesCounters=_uses(f"gpu-{g}"))]
    slices = desired_pool(pool("a", specs, counters), SliceLayout.WITH_DEVICES).slices
    assert [len(s.devices) for s in slices] == [63, 9]
    assert [[c["name"] for c in s.shared_counters] for s in slices] == [
        [f"gpu-{g}" for g in range(7)], ["gpu-7"]]
    names = [d["name"] for s in slices for d in s.devices]
    assert names == [f"gpu-{i}" for i in range(72)]


def test_on_1_34_devices_linked_by_a_set_move_to_the_first_of_them():
    counters = (_counter_set("a"), _counter_set("b"), _counter_set("c"))
    specs = gpus(1, consumesCounters=_uses("a", "c")) + gpus(1, start=1)
    specs += gpus(1, start=2, consumesCounters=_uses("b"))
    specs += gpus(1, start=3, consumesCounters=_uses("c"))
    slices = desired_pool(pool("p", specs, counters), SliceLayout.WITH_DEVICES).slices
    assert _layout(slices) == [(["a", "b", "c"], ["gpu-0", "gpu-3", "gpu-1", "gpu-2"])]


def test_a_1_34_slice_is_valid_under_the_1_35_rules_half_by_half():
    counters = (_counter_set("gpu-0"),)
    p = pool("a", gpus(2, consumesCounters=_uses("gpu-0")), counters)
    [paired] = desired_pool(p, SliceLayout.WITH_DEVICES).slices
    obj = slice_object(paired, "a", 1, 1, TARGET, "s-0")
    assert "only one of" in " ".join(e.message for e in validate_slice(obj))
    halves = paired.parts()
    assert [bool(h.devices) for h in halves] == [True, False]
    for half in halves:
        assert validate_slice(slice_object(half, "a", 1, 1, TARGET, "s-0")) == []


def test_without_counters_the_1_34_layout_is_the_same():
    p = pool("a", gpus(300))
    assert desired_pool(p, SliceLayout.WITH_DEVICES) == desired_pool(p)
