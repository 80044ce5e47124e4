"""Local validation of a pool before publishing: problems name pool, device and rule."""

from __future__ import annotations

import threading

from simdra._driver.slices import naming
from simdra._driver.slices.checks import check_pool
from simdra._driver.slices.desired import SliceLayout, desired_pool
from simdra._driver.slices.diff import SliceTarget, slice_object
from simdra._driver.slices.validated import ValidatedPools

from .builders import DRIVER, NODE, gpu, gpus, inventory, pool

TARGET = SliceTarget(DRIVER, NODE, "uid")
COUNTERS = ({"name": "gpu-0-set", "counters": {"memory": {"value": "80Gi"}}},)


def problems(p):
    desired = desired_pool(p)
    n = len(desired.slices)
    objects = [slice_object(s, p.name, 0, n, TARGET, naming.slice_name(i, 5, DRIVER, NODE, p.name))
               for i, s in enumerate(desired.slices)]
    return [str(x) for x in check_pool(desired, objects)]


def test_a_valid_pool_has_no_problems():
    specs = gpus(2, consumesCounters=[{"counterSet": "gpu-0-set",
                                       "counters": {"memory": {"value": "1Gi"}}}])
    assert problems(pool("a", specs, COUNTERS)) == []


def test_duplicate_device_names_across_slices_are_found():
    specs = gpus(200)
    specs[150]["name"] = "gpu-3"
    assert problems(pool("a", specs)) == [
        'pool "a", device "gpu-3": name: Duplicate value: device names must be unique in the pool'
    ]


def test_consumes_counters_must_name_known_sets_and_counters():
    one = {"value": "1"}
    specs = [gpu(0, consumesCounters=[{"counterSet": "nope", "counters": {"memory": one}}]),
             gpu(1, consumesCounters=[{"counterSet": "gpu-0-set", "counters": {"cores": one}}])]
    found = problems(pool("a", specs, COUNTERS))
    assert len(found) == 2
    assert found[0].startswith('pool "a", device "gpu-0": consumesCounters[0].counterSet')
    assert "'nope'" in found[0]
    assert found[1].startswith('pool "a", device "gpu-1": consumesCounters[0].counters[cores]')


def test_api_rules_are_reported_with_the_device_name():
    bad_name = gpu(0, name="GPU_0")
    policy_without_sharing = gpu(1, capacity={"memory": {"value": "80Gi", "requestPolicy": {
        "default": "1Gi", "validRange": {"min": "1Gi"}}}})
    found = problems(pool("a", [bad_name, policy_without_sharing]))
    assert any(f.startswith('pool "a", device "GPU_0": spec.devices[0].name') for f in found)
    assert any(f.startswith('pool "a", device "gpu-1": spec.devices[1].capacity[memory]')
               for f in found)


def test_an_invalid_pool_name_is_reported_without_a_device():
    found = problems(pool("Bad_Pool", gpus(1)))
    assert found and all(f.startswith('pool "Bad_Pool": spec.pool.name') for f in found)


def _adopt_1_34(p):
    pools = ValidatedPools(DRIVER, NODE, threading.Condition())
    pools.layout = SliceLayout.WITH_DEVICES
    pools.adopt(inventory(p), "uid")
    return [str(x) for x in pools.problems.get(p.name, [])]


def test_a_1_34_pool_with_counters_next_to_their_devices_is_valid():
    specs = gpus(2, consumesCounters=[{"counterSet": "gpu-0-set",
                                       "counters": {"memory": {"value": "1Gi"}}}])
    assert _adopt_1_34(pool("a", specs, COUNTERS)) == []


def test_the_1_34_limits_of_a_slice_with_counters_and_devices_are_checked():
    sets = tuple({"name": f"s-{i}", "counters": {f"c-{j}": {"value": "1"} for j in range(9)}}
                 for i in range(4))  # each set valid (9 counters), 36 in one slice is not
    links = [[{"counterSet": f"s-{i}", "counters": {"c-0": {"value": "1"}}} for i in (k, k + 1)]
             for k in range(3)]  # s-0..s-1, s-1..s-2, s-2..s-3: one group of four sets
    specs = [gpu(k, consumesCounters=link) for k, link in enumerate(links)]
    assert _adopt_1_34(pool("a", specs, sets)) == [
        'pool "a": slice[0].sharedCounters: Invalid value: 36: the total number of shared '
        "counters in a slice that holds counter sets with their devices (the 1.34 layout) "
        "must not exceed 32"]
    assert problems(pool("a", specs, sets)) == []  # on 1.35+ each set is a slice's own


def test_a_name_qualified_with_the_drivers_own_domain_is_refused_as_the_go_helper_does():
    # kubeletplugin v0.38 (ValidateQualifiedNames, default on) refuses the whole pool:
    # "gpu.example.com/model" is "model" in this driver's slices, and with both CEL reads
    # either at random.
    specs = gpus(2)
    specs[1]["attributes"][f"{DRIVER}/model"] = {"string": "other"}
    specs[1]["capacity"][f"{DRIVER}/memory"] = {"value": "1Gi"}
    assert problems(pool("a", specs)) == [
        f'pool "a", device "gpu-1": attributes[{DRIVER}/model]: '
        'use the unqualified name "model": the driver\'s domain is implied',
        f'pool "a", device "gpu-1": capacity[{DRIVER}/memory]: '
        'use the unqualified name "memory": the driver\'s domain is implied',
    ]


def test_names_of_other_domains_stay_allowed():
    specs = gpus(1)
    specs[0]["attributes"]["resource.kubernetes.io/pciBusID"] = {"string": "0000:01:00.0"}
    specs[0]["attributes"][f"vendor.{DRIVER}/model"] = {"string": "x"}
    specs[0]["attributes"][f"{DRIVER}.other/model"] = {"string": "x"}
    assert problems(pool("a", specs)) == []
