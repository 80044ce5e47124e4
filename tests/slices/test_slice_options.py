"""The 1.37 slice fields the publisher sets: `skipNodeOperations` on the slices of
devices that need no node-side work, and the pool's `partitionTypeAttribute` on those
with counter consumers; published to the API stand-in with their gates on and off."""

from __future__ import annotations

import dataclasses
import time

from simdra._driver.core.validation import validate_slice
from simdra._driver.devices.model import Device, Inventory, Pool
from simdra._driver.slices.checks import pool_rule_problems
from simdra._driver.slices.desired import SliceLayout, desired_pool
from simdra._driver.slices.diff import SliceTarget, slice_object

from .builders import DRIVER, NODE, gpus
from .test_publisher import slices, wait_until

TARGET = SliceTarget(DRIVER, NODE, "uid-1")
SKIP = ("*",)
ATTR = f"{DRIVER}/profile"


def _seat(i: int) -> Device:
    spec = {"name": f"license-{i}", "attributes": {"type": {"string": "license"}}}
    return Device(spec=spec, skip_node_operations=SKIP)


def _mixed() -> Pool:
    """GPUs that need a prepare and seats that do not, interleaved in one pool."""
    devices = []
    for i, spec in enumerate(gpus(3)):
        devices += [Device(spec=spec), _seat(i)]
    return Pool("a", tuple(devices))


def _partition(name: str, profile: str, memory: str) -> dict[str, object]:
    return {"name": name, "attributes": {"profile": {"string": profile}},
            "consumesCounters": [{"counterSet": "c", "counters": {"m": {"value": memory}}}]}


def _partitioned(*specs: dict[str, object]) -> Pool:
    counters = ({"name": "c", "counters": {"m": {"value": "80Gi"}}},)
    plain = {"name": "nic-0"}
    return Pool("p", (*(Device(spec=s) for s in specs), Device(spec=plain)), counters,
                partition_type_attribute=ATTR)


def test_a_mixed_pool_never_claims_a_skip_for_a_device_that_needs_its_prepare():
    desired = desired_pool(_mixed())
    by_skip = {s.skip_node_operations: [d["name"] for d in s.devices] for s in desired.slices}
    assert by_skip == {(): ["gpu-0", "gpu-1", "gpu-2"],
                       SKIP: ["license-0", "license-1", "license-2"]}
    for i, s in enumerate(desired.slices):
        obj = slice_object(s, "a", 1, len(desired.slices), TARGET, f"s-{i}")
        assert validate_slice(obj) == []
        assert obj["spec"].get("skipNodeOperations") == (["*"] if s.skip_node_operations
                                                         else None)


def test_the_1_34_layout_carries_no_1_37_fields():
    pool = _partitioned(_partition("x-0", "1g", "10Gi"))
    pool = dataclasses.replace(pool, devices=(*pool.devices, _seat(0)))
    for s in desired_pool(pool, SliceLayout.WITH_DEVICES).slices:
        assert "skipNodeOperations" not in s.spec_content()
        assert "partitionTypeAttribute" not in s.spec_content()


def test_partition_type_goes_only_on_slices_with_counter_consumers():
    desired = desired_pool(_partitioned(_partition("x-0", "1g", "10Gi")))
    contents = [s.spec_content() for s in desired.slices]
    assert [c.get("partitionTypeAttribute") for c in contents] == [None, ATTR]
    assert "sharedCounters" in contents[0]


def test_devices_of_one_type_must_consume_alike():
    good = _partitioned(_partition("x-0", "1g", "10Gi"), _partition("x-1", "1g", "10Gi"),
                        _partition("y-0", "2g", "20Gi"))
    assert pool_rule_problems(desired_pool(good)) == []
    bad = _partitioned(_partition("x-0", "1g", "10Gi"), _partition("x-1", "1g", "20Gi"))
    (problem,) = pool_rule_problems(desired_pool(bad))
    assert str(problem) == (
        f'pool "p", device "x-1": attributes[{ATTR}]: partition type \'1g\' is also that '
        "of device x-0, which consumes other counters; devices of one type must consume "
        "the same")


def test_published_with_gates_on_and_kept_without_a_write_loop_with_them_off(
        server, node, start):
    server.feature_gates.update(DRAOptionalNodeOperations=True)
    publisher = start(Inventory(pools=(_mixed(),)))
    assert publisher.wait_synced(10)
    skips = sorted(str(o["spec"].get("skipNodeOperations")) for o in slices(server))
    assert skips == ["None", "['*']"]

    server.feature_gates.update(DRAOptionalNodeOperations=False)
    for obj in slices(server):
        server.delete_object("resourceslices", obj["metadata"]["name"])
    assert wait_until(lambda: len(slices(server)) == 2)
    assert publisher.wait_synced(10)
    assert not any(o["spec"].get("skipNodeOperations") for o in slices(server))
    server.request_log.clear()
    time.sleep(0.5)
    assert server.writes() == 0  # the stored form is adopted
    (report,) = publisher.stats().dropped_fields
    assert report.gates == ("DRAOptionalNodeOperations",)
