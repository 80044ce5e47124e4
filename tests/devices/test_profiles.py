"""Built-in fake-device profiles: what they publish, and that the API server would accept it."""

from __future__ import annotations

import pytest

from simdra._driver.builtins import builtin_kinds
from simdra._driver.core.quantity import parse_quantity
from simdra._driver.core.validation import MAX_CONSUMES_COUNTERS, validate_slice_spec
from simdra._driver.devices.backend import FakeBackend
from simdra._driver.devices.profiles import profile_inventory
from simdra._driver.devices.request_policy import consumed_amount
from simdra._driver.kinds.gpu import PARTITION_SHAPES
from simdra._driver.slices.checks import pool_rule_problems
from simdra._driver.slices.desired import desired_pool

DRIVER = "gpu.simdra.example.com"
NODE = "node-a"
GI = 2**30


def _pool(profile: str, count: int = 2):
    (pool,) = profile_inventory(profile, DRIVER, NODE, count, kinds=builtin_kinds()).pools
    return pool


@pytest.mark.parametrize(
    "profile",
    [*sorted(builtin_kinds().profiles()), "gpu,nic", "gpu-shared,nic", "gpu-partitioned,nic"],
)
def test_every_slice_of_every_profile_passes_api_validation(profile):
    pool = _pool(profile, count=8)
    desired = desired_pool(pool)
    # With the driver: no name the Go helper v0.38 would refuse (ValidateQualifiedNames).
    assert pool_rule_problems(desired, DRIVER) == []
    for content in desired.slices:
        spec = {
            "driver": DRIVER,
            "pool": {"name": pool.name, "generation": 1, "resourceSliceCount": 1},
            "nodeName": NODE,
            **content.spec_content(),
        }
        assert [str(e) for e in validate_slice_spec(spec)] == []


def test_plain_profiles_are_unchanged():
    pool = _pool("gpu,nic")
    assert [d.name for d in pool.devices] == ["gpu-0", "gpu-1", "nic-0", "nic-1"]
    gpu, nic = pool.device("gpu-0"), pool.device("nic-0")
    assert not gpu.allows_multiple_allocations and gpu.capacity() == {"memory": 80 * GI}
    assert nic.allows_multiple_allocations and nic.capacity() == {"bandwidth": 10**10}
    assert pool.shared_counters == ()


def test_shared_gpu_memory_and_compute_follow_their_request_policies():
    gpu = _pool("gpu-shared").device("gpu-0")
    assert gpu.allows_multiple_allocations
    assert gpu.attribute("type") == "gpu"
    memory, compute = gpu.spec["capacity"]["memory"], gpu.spec["capacity"]["compute"]
    assert parse_quantity(memory["value"]) == 80 * GI and parse_quantity(compute["value"]) == 100
    assert consumed_amount(memory) == 8 * GI  # the default when a request names none
    assert consumed_amount(memory, "7.5Gi") == 8 * GI  # rounded up to the 1Gi step
    assert consumed_amount(memory, "100Mi") == GI  # raised to the minimum
    assert consumed_amount(compute) == 10
    assert consumed_amount(compute, "15") == 20


def test_partitioned_gpu_counters_partitions_and_attributes():
    pool = _pool("gpu-partitioned", count=2)
    assert [s["name"] for s in pool.shared_counters] == ["gpu-0-counters", "gpu-1-counters"]
    counters = {
        name: parse_quantity(c["value"]) for name, c in pool.shared_counters[0]["counters"].items()
    }
    assert counters == {"memory": 80 * GI, "slices": 7}
    whole = pool.device("gpu-0")
    assert whole.attribute("partition") is False
    parent = whole.attribute("uuid")
    partitions = [d for d in pool.devices if d.name.startswith("gpu-0-")]
    assert len(partitions) == sum(shape.count for shape in PARTITION_SHAPES)
    for device in [whole, *partitions]:
        consumes = device.spec["consumesCounters"]
        assert len(consumes) <= MAX_CONSUMES_COUNTERS
        assert [c["counterSet"] for c in consumes] == ["gpu-0-counters"]
    # The whole GPU takes every counter; each shape's partitions together fit the GPU.
    assert _consumed(whole) == counters
    for shape in PARTITION_SHAPES:
        group = [d for d in partitions if d.attribute("profile") == shape.profile]
        assert len(group) == shape.count
        for device in group:
            assert device.attribute("partition") is True
            assert device.attribute("parentUUID") == parent
            assert device.attribute("uuid").startswith("MIG-")
        total = {k: sum(_consumed(d)[k] for d in group) for k in counters}
        assert all(total[k] <= counters[k] for k in counters)
    assert [d.name for d in partitions[:2]] == ["gpu-0-1g-0", "gpu-0-1g-1"]


def _consumed(device):
    (entry,) = device.spec["consumesCounters"]
    return {name: parse_quantity(c["value"]) for name, c in entry["counters"].items()}


def test_device_identities_are_stable_per_node_and_unique_across_nodes():
    first = profile_inventory("gpu-partitioned,nic", DRIVER, NODE, 1, kinds=builtin_kinds())
    again = profile_inventory("gpu-partitioned,nic", DRIVER, NODE, 1, kinds=builtin_kinds())
    other = profile_inventory("gpu-partitioned,nic", DRIVER, "node-b", 1, kinds=builtin_kinds())

    def uuids(inventory):
        return [d.attribute("uuid") for _, d in inventory.devices()]

    assert uuids(first) == uuids(again)
    assert len(set(uuids(first))) == len(uuids(first))
    assert not set(uuids(first)) & set(uuids(other))


@pytest.mark.parametrize(
    ("profiles", "message"),
    [
        ("tpu", "unknown device profile 'tpu'"),
        ("gpu,gpu-shared", "device profiles gpu and gpu-shared are both of kind .gpu."),
        ("nic,nic", "device profile 'nic' is listed twice"),
    ],
)
def test_bad_profile_lists_are_refused(profiles, message):
    with pytest.raises(ValueError, match=message):
        profile_inventory(profiles, DRIVER, NODE, 1, kinds=builtin_kinds())


@pytest.mark.parametrize("profile", ["gpu-shared", "gpu-partitioned,nic"])
def test_new_profile_names_reach_the_fake_backend_as_profiles_not_paths(profile):
    backend = FakeBackend(profile, DRIVER, NODE, 1, kinds=builtin_kinds())
    assert backend.inventory_path is None
    assert backend.discover() == profile_inventory(profile, DRIVER, NODE, 1, kinds=builtin_kinds())


def test_license_seats_skip_node_operations_and_gpus_do_not():
    pool = _pool("gpu,license")
    skips = {d.name: d.skip_node_operations for d in pool.devices}
    assert {n: s for n, s in skips.items() if n.startswith("license-")} == {
        f"license-{i}": ("*",) for i in range(2)}
    assert not any(s for n, s in skips.items() if n.startswith("gpu-"))


def test_partitioned_gpus_name_their_partition_type():
    assert _pool("gpu-partitioned").partition_type_attribute == f"{DRIVER}/profile"
    assert _pool("gpu").partition_type_attribute is None
