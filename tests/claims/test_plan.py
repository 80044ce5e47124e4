"""Planning a claim: units, CDI devices, env, the kubelet's answer, and plan errors."""

from __future__ import annotations

import pytest

from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.plan.prepared import plan_prepare
from simdra._driver.claims.types import ClaimError
from simdra._driver.devices.model import Device, Inventory, Pool
from tests.claims.builders import RULES

from .builders import (
    DRIVER,
    ENV_NAME,
    GPU_POOL,
    NIC_POOL,
    SHARE_1,
    SHARE_2,
    assert_valid_cdi_spec,
    claim,
    gpu,
    inventory,
    result,
)

UID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
KIND = f"k8s.{DRIVER}/device"


def _plan(results, inv=None, **kwargs):
    return plan_prepare(
        parse_claim(claim(UID, results, **kwargs), DRIVER), inv or inventory(), DRIVER
    , rules=RULES)


def _env(unit):
    """Env of a unit without its `SIMDRA_DEVICE_<ID>_` prefix (checking the scheme)."""
    env = {}
    for entry in unit.env:
        name, _, value = entry.partition("=")
        match = ENV_NAME.match(name)
        assert match, name
        env[match["key"]] = value
    assert len({ENV_NAME.match(e.split("=")[0])["id"] for e in unit.env}) == 1
    return env


def test_exclusive_two_gpu_claim():
    planned = _plan([result("gpus", "gpu-0"), result("gpus", "gpu-1")])
    assert [(d.pool_name, d.device_name, d.share_id) for d in planned.result.devices] == [
        (GPU_POOL, "gpu-0", None),
        (GPU_POOL, "gpu-1", None),
    ]
    assert [d.cdi_device_ids for d in planned.result.devices] == [
        (f"{KIND}={UID}-gpu-0",),
        (f"{KIND}={UID}-gpu-1",),
    ]
    assert planned.cdi_file == f"k8s.{DRIVER}-device_{UID}.json"
    spec = planned.cdi_spec
    assert_valid_cdi_spec(spec)
    assert spec["cdiVersion"] == "0.5.0"  # names start with the UID's leading digit
    first = spec["devices"][0]["containerEdits"]
    assert first["deviceNodes"] == [{"path": "/dev/simdra/gpu0"}]  # from the inventory
    assert _env(planned.units[0]) == {
        "NAME": "gpu-0",
        "POOL": GPU_POOL,
        "TYPE": "gpu",
        "CDI_DEVICE": f"{KIND}={UID}-gpu-0",
        "REQUEST": "gpus",
        "CLAIM": "default/claim-0a1b2c3d",
        "CLAIM_UID": UID,
        # An exclusive device's holder gets all of it.
        "CAPACITY_MEMORY": "80Gi",
        "CAPACITY_MEMORY_VALUE": str(80 * 2**30),
    }
    assert all(u.exclusive and not u.consumed_capacity for u in planned.units)


def test_two_shares_of_one_device_in_one_claim_get_distinct_cdi_devices_and_env():
    planned = _plan(
        [
            result("net-a", "nic-0", share=SHARE_1, consumed={"bandwidth": "1M"}),
            result("net-b/fast", "nic-0", share=SHARE_2, consumed={"bandwidth": "1500M"}),
        ]
    )
    assert_valid_cdi_spec(planned.cdi_spec)
    names = [d["name"] for d in planned.cdi_spec["devices"]]
    assert names == [f"{UID}-nic-0-{SHARE_1}", f"{UID}-nic-0-{SHARE_2}"]
    assert [d.request_names for d in planned.result.devices] == [("net-a",), ("net-b",)]
    assert [d.share_id for d in planned.result.devices] == [SHARE_1, SHARE_2]
    env_names = [e.split("=")[0] for u in planned.units for e in u.env]
    assert len(env_names) == len(set(env_names))  # one container may get both
    second = _env(planned.units[1])
    assert second["REQUEST"] == "net-b/fast"
    assert second["SHARE_ID"] == SHARE_2
    assert second["TYPE"] == "nic"
    assert second["CAPACITY_BANDWIDTH"] == "1500M"
    assert second["CAPACITY_BANDWIDTH_VALUE"] == "1500000000"
    assert _env(planned.units[0])["CAPACITY_BANDWIDTH"] == "1M"
    # The NIC has no inventory edits; our env keeps its CDI edits non-empty.
    assert set(planned.cdi_spec["devices"][1]["containerEdits"]) == {"env"}


def test_admin_access_result_is_marked_in_env():
    planned = _plan([result("watch", "gpu-0", admin=True)])
    assert planned.units[0].admin_access
    env = _env(planned.units[0])
    assert env["ADMIN_ACCESS"] == "true"
    assert not [key for key in env if key.startswith("CAPACITY_")]  # it reserves nothing


def test_same_device_name_in_two_pools_gets_pool_qualified_names():
    inv = Inventory(pools=(Pool("rack/a", (gpu(0),)), Pool("rack/b", (gpu(0),))))
    planned = _plan([result("g", "gpu-0", pool="rack/a"), result("g", "gpu-0", pool="rack/b")], inv)
    names = [d["name"] for d in planned.cdi_spec["devices"]]
    assert names == [f"{UID}-rack_a_gpu-0", f"{UID}-rack_b_gpu-0"]
    assert_valid_cdi_spec(planned.cdi_spec)


def test_results_for_one_device_from_several_requests_become_one_unit():
    planned = _plan([result("a", "gpu-0", admin=True), result("b", "gpu-0", admin=True)])
    (device,) = planned.result.devices
    assert device.request_names == ("a", "b")


def test_planning_is_deterministic():
    results = [result("gpus", "gpu-1"), result("net", "nic-0", share=SHARE_1, consumed={})]
    first, second = _plan(results), _plan(results)
    assert first.spec_bytes() == second.spec_bytes()
    assert first.result == second.result
    assert first.units == second.units


def test_inventory_container_edits_raise_the_cdi_version():
    dev = Device(
        spec={"name": "gpu-0"},
        container_edits={"netDevices": [{"hostInterfaceName": "eth1", "name": "net0"}]},
    )
    planned = _plan([result("g", "gpu-0")], Inventory(pools=(Pool(GPU_POOL, (dev,)),)))
    assert planned.cdi_spec["cdiVersion"] == "1.1.0"
    assert_valid_cdi_spec(planned.cdi_spec)
    assert _env(planned.units[0])["TYPE"] == "device"  # no `type` attribute


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        (
            [result("gpus", "gpu-7")],
            f"request gpus: pool {GPU_POOL} device gpu-7: device gpu-7 is not in pool",
        ),
        ([result("gpus", "gpu-0", pool="elsewhere")], "pool elsewhere is not on this node"),
        (
            [result("gpus", "gpu-0", share=SHARE_1)],
            f"allocated as share {SHARE_1}, but the device does not allow",
        ),
        ([result("net", "nic-0")], f"pool {NIC_POOL} device nic-0: the device allows multiple"),
        (
            [result("net", "nic-0", share=SHARE_1, consumed={"memory": "1"})],
            "consumedCapacity names ['memory']",
        ),
        (
            [result("gpus", "gpu-0", consumed={"memory": "1"})],
            "consumedCapacity is set for an exclusive",
        ),
        ([], f"no devices are allocated by driver {DRIVER}"),
    ],
)
def test_plan_errors_name_claim_request_pool_and_device(results, expected):
    with pytest.raises(ClaimError) as info:
        _plan(results)
    assert f"default/claim-0a1b2c3d (uid {UID})" in str(info.value)
    assert expected in str(info.value)


def test_bad_inventory_edits_are_a_claim_error_naming_the_device():
    dev = Device(spec={"name": "gpu-0"}, container_edits={"devicenodes": []})
    with pytest.raises(ClaimError, match="device gpu-0: container edits: unknown containerEdits"):
        _plan([result("g", "gpu-0")], Inventory(pools=(Pool(GPU_POOL, (dev,)),)))


def test_env_of_all_devices_one_container_may_get_never_collides():
    """A container referencing two claims gets the env of all their CDI devices at once:
    shares of one NIC across claims and within a claim, plus GPUs, must not overwrite."""
    other_uid = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
    first = _plan(
        [
            result("a", "nic-0", share=SHARE_1, consumed={"bandwidth": "1M"}),
            result("b", "nic-0", share=SHARE_2, consumed={"bandwidth": "2M"}),
            result("g", "gpu-0"),
        ]
    )
    second = plan_prepare(
        parse_claim(
            claim(other_uid, [result("a", "nic-0", share=SHARE_1, consumed={"bandwidth": "3M"})]),
            DRIVER,
        ),
        inventory(),
        DRIVER,
     rules=RULES)
    container_env = [e for p in (first, second) for u in p.units for e in u.env]
    names = [e.split("=", 1)[0] for e in container_env]
    assert len(names) == len(set(names))
    by_id: dict[str, dict[str, str]] = {}
    for entry in container_env:
        name, _, value = entry.partition("=")
        match = ENV_NAME.match(name)
        by_id.setdefault(match["id"], {})[match["key"]] = value
    # Each device's variables group under one id, and say which share holds how much.
    assert sorted((v["NAME"], v.get("CAPACITY_BANDWIDTH")) for v in by_id.values()) == [
        ("gpu-0", None),
        ("nic-0", "1M"),
        ("nic-0", "2M"),
        ("nic-0", "3M"),
    ]


def _partitioned_inventory(counters=True):
    consumes = [
        {"counterSet": "gpu-0-counters", "counters": {"slices": {"value": "3"}}},
    ]
    part = Device(
        spec={
            "name": "gpu-0-3g-0",
            "attributes": {
                "type": {"string": "gpu"},
                "partition": {"bool": True},
                "profile": {"string": "3g.40gb"},
                "parentUUID": {"string": "GPU-parent"},
            },
            "consumesCounters": consumes,
        }
    )
    sets = ({"name": "gpu-0-counters", "counters": {"slices": {"value": "7"}}},)
    return Inventory(pools=(Pool(GPU_POOL, (part,), sets if counters else ()),))


def test_partition_records_its_counters_and_tells_the_workload_its_profile():
    planned = _plan([result("g", "gpu-0-3g-0")], _partitioned_inventory())
    (unit,) = planned.units
    assert unit.consumes_counters == {"gpu-0-counters": {"slices": 3}}
    assert unit.counter_totals == {"gpu-0-counters": {"slices": 7}}
    env = _env(unit)
    assert (env["PARTITION"], env["PARTITION_PROFILE"], env["PARENT_UUID"]) == (
        "true",
        "3g.40gb",
        "GPU-parent",
    )


def test_device_consuming_a_counter_set_its_pool_lacks_is_a_claim_error():
    with pytest.raises(ClaimError, match="consumes counter set gpu-0-counters, which pool"):
        _plan([result("g", "gpu-0-3g-0")], _partitioned_inventory(counters=False))


def test_one_share_id_in_two_results_is_refused():
    # Forged: the scheduler draws a fresh shareID per allocation, and counting both
    # results as one share would let the second's capacity go unaccounted.
    with pytest.raises(ClaimError) as error:
        _plan([
            result("net-a", "nic-0", share=SHARE_1, consumed={"bandwidth": "5G"}),
            result("net-b", "nic-0", share=SHARE_1, consumed={"bandwidth": "5G"}),
        ])

    message = str(error.value)
    assert UID in message and "nic-0" in message and SHARE_1 in message
    assert "net-a, net-b" in message
