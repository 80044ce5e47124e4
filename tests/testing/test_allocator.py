"""The test allocator's pure core: which devices a claim gets, or why it gets none."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from simdra._driver.testing.allocation.builders import (
    claim,
    device_class,
    exactly,
    opaque_config,
    resource_slice,
    selector,
)
from simdra._driver.testing.scheduler import AllocationError, UnsupportedExpression, allocate

JSON = dict[str, Any]
GPU, NIC = "gpu.example.com", "nic.example.com"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
CLASSES = {
    GPU: device_class(GPU),
    NIC: device_class(NIC),
}


def gpu(index: int, **extra: Any) -> JSON:
    """An exclusive GPU with model/index attributes and 40Gi memory."""
    return {
        "name": f"gpu-{index}",
        "attributes": {"model": {"string": "A100"}, "index": {"int": index}},
        "capacity": {"memory": {"value": "40Gi"}},
        **extra,
    }


def nic(index: int, **extra: Any) -> JSON:
    """A shared NIC: 10G bandwidth (default 1M, min 1M, step 8), 16 queues (default 0)."""
    return {
        "name": f"nic-{index}",
        "allowMultipleAllocations": True,
        "capacity": {
            "bandwidth": {
                "value": "10G",
                "requestPolicy": {"default": "1M", "validRange": {"min": "1M", "step": "8"}},
            },
            "queues": {
                "value": "16",
                "requestPolicy": {"default": "0", "validRange": {"min": "0", "step": "1"}},
            },
        },
        **extra,
    }


def gpus(count: int, **kwargs: Any) -> list[JSON]:
    return [resource_slice(GPU, [gpu(i) for i in range(count)], **kwargs)]


def with_allocation(item: JSON, allocation: JSON) -> JSON:
    out = copy.deepcopy(item)
    out["status"] = {"allocation": allocation}
    return out


def picked(allocation: JSON) -> list[tuple[str, str]]:
    return [(r["request"], r["device"]) for r in allocation["devices"]["results"]]


def nic_claim(name: str, bandwidth: str | None = None) -> JSON:
    capacity = {"capacity": {"requests": {"bandwidth": bandwidth}}} if bandwidth else {}
    return claim(name, exactly("nic", NIC, **capacity))


def allocate_in_turn(claims: list[JSON], slices: list[JSON]) -> list[JSON]:
    """Allocate claims one after another, each seeing the earlier ones as in use."""
    done: list[JSON] = []
    for item in claims:
        done.append(with_allocation(item, allocate(item, slices, CLASSES, done)))
    return done


# -- exclusive devices


def test_exclusive_count_two_gets_two_devices_pinned_to_the_node():
    allocation = allocate(claim("a", exactly("gpu", GPU, count=2)), gpus(3), CLASSES)

    assert picked(allocation) == [("gpu", "gpu-0"), ("gpu", "gpu-1")]
    for result in allocation["devices"]["results"]:
        assert result["driver"] == GPU and result["pool"] == "node-a"
        assert "shareID" not in result and "consumedCapacity" not in result
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
        ]
    }


def test_exclusive_device_is_never_given_to_two_claims():
    slices = gpus(3)
    first = with_allocation(
        a := claim("a", exactly("gpu", GPU, count=2)), allocate(a, slices, CLASSES)
    )

    second = allocate(claim("b", exactly("gpu", GPU)), slices, CLASSES, [first])
    assert picked(second) == [("gpu", "gpu-2")]

    with pytest.raises(AllocationError) as error:
        allocate(claim("c", exactly("gpu", GPU, count=2)), slices, CLASSES, [first])
    assert str(error.value) == (
        "claim default/c: request gpu: needs 2 device(s) of class gpu.example.com, 1 of 3 "
        "matching devices available (gpu-0: in use by claim default/a; "
        "gpu-1: in use by claim default/a)"
    )


def test_a_claims_own_earlier_allocation_does_not_block_it():
    slices = gpus(1)
    mine = claim("a", exactly("gpu", GPU))
    stale = with_allocation(mine, allocate(mine, slices, CLASSES))
    assert picked(allocate(mine, slices, CLASSES, [stale])) == [("gpu", "gpu-0")]


def test_all_mode_takes_every_matching_device_or_fails():
    slices = gpus(3)
    request = exactly("gpu", GPU, allocationMode="All")
    allocation = allocate(claim("a", request), slices, CLASSES)
    assert [d for _, d in picked(allocation)] == ["gpu-0", "gpu-1", "gpu-2"]

    holder = claim("b", exactly("gpu", GPU))
    taken = with_allocation(holder, allocate(holder, slices, CLASSES))
    with pytest.raises(AllocationError, match=r"needs all 3 device\(s\).*gpu-0: in use by claim"):
        allocate(claim("a", request), slices, CLASSES, [taken])


def test_a_claim_gets_at_most_32_devices():
    slices = gpus(33)
    assert len(picked(allocate(claim("a", exactly("gpu", GPU, count=32)), slices, CLASSES))) == 32
    with pytest.raises(
        AllocationError, match="needs 33 devices, more than the 32 results a claim may hold"
    ):
        allocate(claim("b", exactly("gpu", GPU, allocationMode="All")), slices, CLASSES)


def test_only_the_highest_generation_of_a_pool_is_used():
    old = resource_slice(GPU, [gpu(0), gpu(1)], generation=1)
    new = resource_slice(GPU, [gpu(7)], generation=2)

    allocation = allocate(claim("a", exactly("gpu", GPU)), [old, new], CLASSES)
    assert picked(allocation) == [("gpu", "gpu-7")]
    with pytest.raises(AllocationError, match=r"1 of 1 matching devices available"):
        allocate(claim("a", exactly("gpu", GPU, count=2)), [old, new], CLASSES)


def test_incomplete_pool_is_ignored():
    partial = resource_slice(GPU, [gpu(0)], pool="partial", count=2)
    with pytest.raises(AllocationError, match="no devices in complete pools"):
        allocate(claim("a", exactly("gpu", GPU)), [partial], CLASSES)

    complete = resource_slice(GPU, [gpu(5)], pool="whole")
    allocation = allocate(claim("a", exactly("gpu", GPU)), [partial, complete], CLASSES)
    assert picked(allocation) == [("gpu", "gpu-5")]


def test_two_slices_of_one_pool_count_as_complete():
    slices = [
        resource_slice(GPU, [gpu(0)], count=2, name="s-0"),
        resource_slice(GPU, [gpu(1)], count=2, name="s-1"),
    ]
    allocation = allocate(claim("a", exactly("gpu", GPU, count=2)), slices, CLASSES)
    assert picked(allocation) == [("gpu", "gpu-0"), ("gpu", "gpu-1")]


def test_missing_device_class_is_named():
    with pytest.raises(AllocationError, match="request gpu: device class 'nope' not found"):
        allocate(claim("a", exactly("gpu", "nope")), gpus(1), CLASSES)


# -- nodes


def test_node_name_restricts_devices_and_pins_that_node():
    slices = gpus(1) + gpus(1, node="node-b", pool="node-b")
    allocation = allocate(claim("a", exactly("gpu", GPU)), slices, CLASSES, node_name="node-b")
    assert allocation["devices"]["results"][0]["pool"] == "node-b"
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [
        "node-b"
    ]


def test_without_node_name_the_next_node_with_room_is_chosen():
    slices = gpus(1) + gpus(2, node="node-b", pool="node-b")
    allocation = allocate(claim("a", exactly("gpu", GPU, count=2)), slices, CLASSES)
    assert {r["pool"] for r in allocation["devices"]["results"]} == {"node-b"}


def test_devices_for_all_nodes_need_no_node_selector():
    slices = [resource_slice(GPU, [gpu(0)], node=None, pool="fabric")]
    allocation = allocate(claim("a", exactly("gpu", GPU)), slices, CLASSES)
    assert picked(allocation) == [("gpu", "gpu-0")]
    assert "nodeSelector" not in allocation


# -- shared devices (consumable capacity)


def test_shared_nic_fills_to_exactly_its_capacity_then_refuses_clearly():
    slices = [resource_slice(NIC, [nic(0)])]
    done = allocate_in_turn([nic_claim(f"c{i}", "1G") for i in range(10)], slices)
    assert all(picked(c["status"]["allocation"]) == [("nic", "nic-0")] for c in done)

    with pytest.raises(AllocationError) as error:
        allocate(nic_claim("c10", "1G"), slices, CLASSES, done)
    assert str(error.value) == (
        "claim default/c10: request nic: no device of class nic.example.com has 1G of "
        "bandwidth left (nic-0: 10G of 10G used)"
    )


def test_refusal_reports_what_is_left_of_a_partly_used_device():
    slices = [resource_slice(NIC, [nic(0)])]
    done = allocate_in_turn([nic_claim("big", "9.5G")], slices)
    with pytest.raises(
        AllocationError, match=r"has 1G of bandwidth left \(nic-0: 9.5G of 10G used\)"
    ):
        allocate(nic_claim("more", "1G"), slices, CLASSES, done)
    # What is left still fits exactly.
    assert allocate(nic_claim("rest", "500M"), slices, CLASSES, done)


@pytest.mark.parametrize(
    ("requested", "consumed"),
    [
        pytest.param(None, "1M", id="default"),
        pytest.param("1k", "1M", id="below-min"),
        pytest.param("1M", "1M", id="exactly-min"),
        pytest.param("1000001", "1000008", id="between-steps"),
        pytest.param("1000016", "1000016", id="on-a-step"),
    ],
)
def test_consumed_capacity_is_rounded_and_lists_every_capacity(requested, consumed):
    slices = [resource_slice(NIC, [nic(0)])]
    result = allocate(nic_claim("a", requested), slices, CLASSES)["devices"]["results"][0]
    assert result["consumedCapacity"] == {"bandwidth": consumed, "queues": "0"}
    assert UUID.match(result["shareID"])


def test_shares_of_one_device_get_distinct_share_ids():
    slices = [resource_slice(NIC, [nic(0)])]
    two = claim("a", exactly("one", NIC), exactly("two", NIC))
    results = allocate(two, slices, CLASSES)["devices"]["results"]
    assert [r["device"] for r in results] == ["nic-0", "nic-0"]
    ids = [r["shareID"] for r in results]
    other = allocate(nic_claim("b"), slices, CLASSES)["devices"]["results"][0]["shareID"]
    assert len({*ids, other}) == 3 and all(UUID.match(i) for i in ids)


def test_capacity_above_the_policy_maximum_does_not_fit():
    bounded = nic(0)
    bounded["capacity"]["queues"]["requestPolicy"]["validRange"]["max"] = "8"
    slices = [resource_slice(NIC, [bounded])]
    request = exactly("nic", NIC, capacity={"requests": {"queues": "9"}})
    with pytest.raises(AllocationError, match="queues: request 9 is above the policy maximum 8"):
        allocate(claim("a", request), slices, CLASSES)


def test_capacity_the_device_does_not_have_rules_it_out():
    slices = [resource_slice(NIC, [nic(0)])]
    request = exactly("nic", NIC, capacity={"requests": {"lanes": "1"}})
    with pytest.raises(AllocationError, match="nic-0: has no capacity 'lanes'"):
        allocate(claim("a", request), slices, CLASSES)


def test_qualified_capacity_name_does_not_match_the_unqualified_published_one():
    # The scheduler looks capacity names up exactly (allocator corpus: "capacity name").
    slices = [resource_slice(NIC, [nic(0)])]
    request = exactly("nic", NIC, capacity={"requests": {f"{NIC}/bandwidth": "2G"}})
    with pytest.raises(AllocationError, match=f"has no capacity '{NIC}/bandwidth'"):
        allocate(claim("a", request), slices, CLASSES)


def test_an_amount_rounded_up_to_a_step_is_written_in_the_request_format():
    slices = [resource_slice(NIC, [nic(0)])]
    request = exactly("nic", NIC, capacity={"requests": {"bandwidth": "1999999999"}})
    result = allocate(claim("a", request), slices, CLASSES)["devices"]["results"][0]
    # Not a multiple of the step (8): rounded up to 2000000000, written in the request's
    # (decimal) format, canonical, as the 1.37 scheduler does (1.36: "1953125Ki").
    assert result["consumedCapacity"]["bandwidth"] == "2G"


# -- request kinds


def test_first_available_uses_the_first_subrequest_that_fits():
    big = device_class(
        "big-gpu",
        GPU,
        selectors=('device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) >= 0',),
        config=[opaque_config(GPU, profile="big")],
    )
    small = device_class("small-gpu", GPU, config=[opaque_config(GPU, profile="small")])
    request = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "large", "deviceClassName": "big-gpu"},
            {"name": "small", "deviceClassName": "small-gpu", "count": 2},
        ],
    }
    all_classes = {**CLASSES, "big-gpu": big, "small-gpu": small}
    allocation = allocate(claim("a", request), gpus(2), all_classes)

    assert picked(allocation) == [("gpu/small", "gpu-0"), ("gpu/small", "gpu-1")]
    assert [c["opaque"]["parameters"]["profile"] for c in allocation["devices"]["config"]] == [
        "small"
    ]

    with pytest.raises(AllocationError, match=r"no subrequest can be satisfied \(gpu/large: no"):
        allocate(claim("b", request), gpus(1), all_classes)


def test_admin_access_gets_a_busy_device_and_blocks_nobody():
    slices = gpus(1)
    holder = claim("holder", exactly("gpu", GPU))
    held = with_allocation(holder, allocate(holder, slices, CLASSES))

    admin = claim("admin", exactly("gpu", GPU, adminAccess=True))
    result = allocate(admin, slices, CLASSES, [held])["devices"]["results"][0]
    assert result["device"] == "gpu-0" and result["adminAccess"] is True

    # With only the admin claim allocated, a normal claim still gets the device.
    admin_held = with_allocation(admin, allocate(admin, slices, CLASSES))
    assert picked(allocate(claim("user", exactly("gpu", GPU)), slices, CLASSES, [admin_held]))


def test_admin_access_on_a_full_shared_device_gets_no_share():
    # The scheduler skips only the in-use check for admin access: a share must still fit
    # the remaining capacity (allocator corpus: "admin: shared device capacity used up").
    slices = [resource_slice(NIC, [nic(0)])]
    full = allocate_in_turn([nic_claim("all", "10G")], slices)
    admin = claim("admin", exactly("nic", NIC, adminAccess=True))
    with pytest.raises(AllocationError, match="bandwidth"):
        allocate(admin, slices, CLASSES, full)


def test_admin_access_on_a_shared_device_with_room_gets_a_share():
    slices = [resource_slice(NIC, [nic(0)])]
    held = allocate_in_turn([nic_claim("most", "9G")], slices)
    admin = claim("admin", exactly("nic", NIC, adminAccess=True))
    result = allocate(admin, slices, CLASSES, held)["devices"]["results"][0]
    assert result["adminAccess"] is True and UUID.match(result["shareID"])


# -- partitionable devices (counters)


def partitioned_gpu() -> list[JSON]:
    """One physical GPU offered whole or as two halves, sharing a 40Gi memory counter."""
    counters = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}]

    def partition(name: str, memory: str) -> JSON:
        consumes = [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": memory}}}]
        return {"name": name, "consumesCounters": consumes}

    return [
        resource_slice(GPU, [], count=2, shared_counters=counters, name="counters"),
        resource_slice(
            GPU,
            [
                partition("gpu-0-full", "40Gi"),
                partition("gpu-0-a", "20Gi"),
                partition("gpu-0-b", "20Gi"),
            ],
            count=2,
            name="devices",
        ),
    ]


def test_a_half_of_another_compatibility_group_waits_and_says_why():
    """KEP-5963: devices drawing on one counter set at once must share a group, although
    the counters have room (the scheduler checks this before the counters)."""
    slices = partitioned_gpu()
    for device, groups in zip(slices[1]["spec"]["devices"][1:], ("mig", "time-sliced"),
                              strict=True):
        device["consumesCounters"][0]["compatibilityGroups"] = [groups]
        device["attributes"] = {"group": {"string": groups}}
    slices[1]["spec"]["devices"][0]["attributes"] = {"group": {"string": "whole"}}
    first = allocate_in_turn([claim("mig", exactly("gpu", GPU, selectors=[
        selector(f'device.attributes["{GPU}"].group == "mig"')]))], slices)
    with pytest.raises(AllocationError) as error:
        allocate(claim("b", exactly("gpu", GPU)), slices, CLASSES, first)
    assert ("gpu-0-b: counter set gpu-0-counters: compatibility groups ['time-sliced'] "
            "share none with ['mig'] of the devices drawing on it") in str(error.value)


def test_partitions_fit_only_while_shared_counters_last():
    slices = partitioned_gpu()
    halves = exactly("gpu", GPU, count=2)  # only the two halves fit together
    assert picked(allocate(claim("a", exactly("gpu", GPU)), slices, CLASSES)) == [
        ("gpu", "gpu-0-full")
    ]

    full = allocate_in_turn([claim("whole", exactly("gpu", GPU))], slices)
    with pytest.raises(AllocationError) as error:
        allocate(claim("b", exactly("gpu", GPU)), slices, CLASSES, full)
    assert "gpu-0-a: counter gpu-0-counters/memory: needs 20Gi, 40Gi of 40Gi used" in str(
        error.value
    )

    two = allocate(claim("c", halves), slices, CLASSES)
    assert [d for _, d in picked(two)] == ["gpu-0-a", "gpu-0-b"]


# -- taints and tolerations


def test_tainted_device_is_skipped_unless_tolerated():
    taint = {"key": "example.com/broken", "value": "ecc", "effect": "NoSchedule"}
    slices = [resource_slice(GPU, [gpu(0, taints=[taint]), gpu(1)])]
    assert picked(allocate(claim("a", exactly("gpu", GPU)), slices, CLASSES)) == [("gpu", "gpu-1")]

    with pytest.raises(
        AllocationError, match=r"gpu-0: has taint example.com/broken=ecc:NoSchedule"
    ):
        allocate(claim("b", exactly("gpu", GPU, count=2)), slices, CLASSES)

    toleration = {"key": "example.com/broken", "operator": "Exists"}
    tolerant = claim("c", exactly("gpu", GPU, count=2, tolerations=[toleration]))
    results = allocate(tolerant, slices, CLASSES)["devices"]["results"]
    assert [r["device"] for r in results] == ["gpu-0", "gpu-1"]
    assert results[0]["tolerations"] == [toleration]


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        pytest.param({"key": "k", "operator": "Equal", "value": "v"}, True, id="equal"),
        pytest.param({"key": "k", "value": "v"}, True, id="default-operator-equal"),
        pytest.param({"key": "k", "value": "other"}, False, id="other-value"),
        pytest.param({"operator": "Exists"}, True, id="exists-any-key"),
        pytest.param({"key": "k", "operator": "Exists", "effect": "NoExecute"}, True, id="effect"),
        pytest.param(
            {"key": "k", "operator": "Exists", "effect": "NoSchedule"}, False, id="wrong-effect"
        ),
    ],
)
def test_toleration_matching(toleration, tolerated):
    taint = {"key": "k", "value": "v", "effect": "NoExecute"}
    slices = [resource_slice(GPU, [gpu(0, taints=[taint])])]
    request = claim("a", exactly("gpu", GPU, tolerations=[toleration]))
    if tolerated:
        assert picked(allocate(request, slices, CLASSES)) == [("gpu", "gpu-0")]
    else:
        with pytest.raises(AllocationError, match="not tolerated"):
            allocate(request, slices, CLASSES)


def test_taint_with_effect_none_does_not_block():
    taint = {"key": "k", "effect": "None"}
    slices = [resource_slice(GPU, [gpu(0, taints=[taint])])]
    assert picked(allocate(claim("a", exactly("gpu", GPU)), slices, CLASSES))


# -- selectors


def test_request_selectors_narrow_the_class():
    slices = gpus(3)
    request = exactly(
        "gpu", GPU, selectors=[selector('device.attributes["gpu.example.com"].index >= 2')]
    )
    assert picked(allocate(claim("a", request), slices, CLASSES)) == [("gpu", "gpu-2")]

    none = exactly(
        "gpu", GPU, selectors=[selector("device.attributes['gpu.example.com'].model == 'H100'")]
    )
    with pytest.raises(
        AllocationError,
        match=r"no device matches device class gpu.example.com and the request's selectors "
        r"\(3 devices checked\)",
    ):
        allocate(claim("b", none), slices, CLASSES)


def test_unsupported_selector_is_refused_with_the_expression():
    # `device` has no `name` field: Kubernetes refuses this selector when it compiles it.
    request = exactly("gpu", GPU, selectors=[selector('device.name == "gpu-0"')])
    with pytest.raises(
        UnsupportedExpression, match=r"request gpu: selector #0: .*device.name.*undefined field"
    ):
        allocate(claim("a", request), gpus(1), CLASSES)


def test_selector_runtime_error_names_claim_device_and_key():
    request = exactly(
        "gpu", GPU, selectors=[selector('device.attributes["gpu.example.com"].serial == "x"')]
    )
    with pytest.raises(
        AllocationError,
        match=r"request gpu: device gpu.example.com/node-a/gpu-0: .*no such key: serial",
    ):
        allocate(claim("a", request), gpus(1), CLASSES)


# -- constraints


def pcie_gpus() -> list[JSON]:
    devices = []
    for index, root in enumerate(["root-a", "root-a", "root-b", "root-b"]):
        device = gpu(index)
        device["attributes"]["resource.kubernetes.io/pcieRoot"] = {"string": root}
        devices.append(device)
    return [resource_slice(GPU, devices)]


def test_match_attribute_keeps_devices_on_one_pcie_root():
    slices = pcie_gpus()
    holder = claim("holder", exactly("gpu", GPU))
    held = with_allocation(holder, allocate(holder, slices, CLASSES))  # takes gpu-0 (root-a)
    pair = claim(
        "pair",
        exactly("left", GPU),
        exactly("right", GPU),
        constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    )
    allocation = allocate(pair, slices, CLASSES, [held])
    assert picked(allocation) == [("left", "gpu-2"), ("right", "gpu-3")]


def test_distinct_attribute_spreads_over_devices():
    slices = pcie_gpus()
    pair = claim(
        "pair",
        exactly("gpu", GPU, count=2),
        constraints=[{"distinctAttribute": "resource.kubernetes.io/pcieRoot"}],
    )
    assert [d for _, d in picked(allocate(pair, slices, CLASSES))] == ["gpu-0", "gpu-2"]


def test_unsatisfiable_constraint_is_reported():
    slices = [resource_slice(GPU, [gpu(0), gpu(1)])]
    pair = claim(
        "pair",
        exactly("left", GPU),
        exactly("right", GPU),
        constraints=[{"matchAttribute": f"{GPU}/index"}],
    )
    with pytest.raises(AllocationError, match="fit one by one but not together under constraints"):
        allocate(pair, slices, CLASSES)


# -- configuration


def test_config_is_copied_from_class_and_claim_with_source():
    gpu_class = device_class(GPU, config=[opaque_config(GPU, mode="class")])
    claim_config = [
        opaque_config(GPU, requests=["gpu"], mode="claim"),
        opaque_config(GPU, requests=["other"], mode="unrelated"),
        opaque_config("other.example.com", mode="everyone"),
    ]
    item = claim("a", exactly("gpu", GPU), config=claim_config)
    config = allocate(item, gpus(1), {GPU: gpu_class})["devices"]["config"]
    assert config == [
        {"source": "FromClass", "opaque": {"driver": GPU, "parameters": {"mode": "class"}}},
        {
            "source": "FromClaim",
            "requests": ["gpu"],
            "opaque": {"driver": GPU, "parameters": {"mode": "claim"}},
        },
        {
            "source": "FromClaim",
            "opaque": {"driver": "other.example.com", "parameters": {"mode": "everyone"}},
        },
    ]


def test_class_config_names_its_requests_when_not_all_use_the_class():
    gpu_class = device_class(GPU, config=[opaque_config(GPU, mode="class")])
    item = claim("a", exactly("gpu", GPU), exactly("nic", NIC))
    slices = [*gpus(1), resource_slice(NIC, [nic(0)])]
    config = allocate(item, slices, {GPU: gpu_class, NIC: CLASSES[NIC]})["devices"]["config"]
    assert config == [
        {
            "source": "FromClass",
            "requests": ["gpu"],
            "opaque": {"driver": GPU, "parameters": {"mode": "class"}},
        }
    ]


def test_input_claim_is_not_modified():
    item = claim("a", exactly("gpu", GPU))
    before = copy.deepcopy(item)
    allocate(item, gpus(1), CLASSES)
    assert item == before


def test_a_result_copies_its_slices_skip_node_operations():
    seats = resource_slice(GPU, [gpu(0)], pool="seats")
    seats["spec"]["skipNodeOperations"] = ["*"]
    plain = resource_slice(GPU, [gpu(1)], pool="gpus")

    allocation = allocate(claim("a", exactly("gpu", GPU, count=2)), [seats, plain], CLASSES)

    skips = {r["device"]: r.get("skipNodeOperations") for r in allocation["devices"]["results"]}
    assert skips == {"gpu-0": ["*"], "gpu-1": None}
