"""Planning a pool's writes: matching, generation rule, order, minimal writes."""

from __future__ import annotations

import copy
import itertools

from simdra._driver.slices.desired import desired_pool
from simdra._driver.slices.diff import (
    AcceptedForm,
    SliceTarget,
    normalized_content,
    plan_pool,
    plan_removal,
)

from .builders import DRIVER, NODE, TAINT, gpus, pool

TARGET = SliceTarget(DRIVER, NODE, "node-uid-1")
_rv = itertools.count(100)


def stored(body, drop=()):
    """What a server stores for a create/update body (uid, resourceVersion, timeAdded)."""
    obj = copy.deepcopy(body)
    meta = obj["metadata"]
    meta.setdefault("name", meta.pop("generateName", "") + "abcde")
    meta.setdefault("uid", f"uid-{meta['name']}")
    meta["resourceVersion"] = str(next(_rv))
    for device in obj["spec"].get("devices", []):
        for taint in device.get("taints", []):
            taint.setdefault("timeAdded", "2026-01-01T00:00:00Z")
        for key in drop:
            device.pop(key, None)
    return obj


def publish(desired, observed=(), **kw):
    """Plan, then apply the plan like a server would; returns (plan, new observed)."""
    plan = plan_pool(desired, list(observed), TARGET, **kw)
    state = {o["metadata"]["name"]: o for o in observed}
    for w in plan.writes:
        if w.verb == "delete":
            del state[w.name]
        else:
            obj = stored(w.body)
            state[obj["metadata"]["name"]] = obj
    return plan, list(state.values())


def verbs(plan):
    return [w.verb for w in plan.writes]


def test_first_publish_creates_every_slice_at_generation_1_owned_by_the_node():
    plan, observed = publish(desired_pool(pool("a", gpus(300))))
    assert verbs(plan) == ["create"] * 3 and plan.generation == 1
    for obj in observed:
        assert obj["spec"]["pool"] == {"name": "a", "generation": 1, "resourceSliceCount": 3}
        assert obj["spec"]["nodeName"] == NODE and obj["spec"]["driver"] == DRIVER
        assert obj["metadata"]["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "node-uid-1",
            "controller": True}]


def test_unchanged_pool_plans_nothing_even_with_server_normalisation():
    desired = desired_pool(pool("a", gpus(130, taints=[TAINT])))
    _, observed = publish(desired)
    for obj in observed:  # the server rewrites quantities canonically
        for device in obj["spec"]["devices"]:
            device["capacity"]["memory"]["value"] = "85899345920"
    assert plan_pool(desired, observed, TARGET).empty


def test_one_changed_slice_is_one_update_without_generation_bump():
    _, observed = publish(desired_pool(pool("a", gpus(300))))
    specs = gpus(300)
    specs[200]["attributes"]["model"] = {"string": "sim-h100"}
    plan, _ = publish(desired_pool(pool("a", specs)), observed)
    assert verbs(plan) == ["update"] and plan.generation == 1 and not plan.bumped
    assert plan.writes[0].name.startswith("00001-")
    assert plan.writes[0].body["metadata"]["resourceVersion"]  # optimistic concurrency


def test_two_changed_slices_bump_the_generation_and_rewrite_every_slice():
    _, observed = publish(desired_pool(pool("a", gpus(300))))
    specs = gpus(300)
    specs[0]["attributes"]["model"] = {"string": "x"}
    specs[299]["attributes"]["model"] = {"string": "x"}
    plan, after = publish(desired_pool(pool("a", specs)), observed)
    assert verbs(plan) == ["update"] * 3 and plan.generation == 2
    assert {o["spec"]["pool"]["generation"] for o in after} == {2}


def test_adding_a_device_to_a_full_pool_deletes_then_updates_then_creates():
    _, observed = publish(desired_pool(pool("a", gpus(128))))
    legacy = copy.deepcopy(observed[0])  # a Go <= 1.35 helper slice: no index prefix
    legacy["metadata"].update(name=f"{NODE}-{DRIVER}-x7k2p", uid="legacy")
    plan, after = publish(desired_pool(pool("a", gpus(129))), [*observed, legacy])
    assert verbs(plan) == ["delete", "update", "create"]
    assert plan.writes[0].name == legacy["metadata"]["name"]
    assert plan.writes[0].uid == "legacy" and plan.writes[0].resource_version
    assert plan.generation == 2
    assert sorted(o["spec"]["pool"]["resourceSliceCount"] for o in after) == [2, 2]


def test_shrinking_deletes_the_surplus_slice_first_and_keeps_the_generation():
    _, observed = publish(desired_pool(pool("a", gpus(200))))
    plan, after = publish(desired_pool(pool("a", gpus(100))), observed)
    assert verbs(plan) == ["delete", "update"] and plan.generation == 1
    assert len(after) == 1 and after[0]["spec"]["pool"]["resourceSliceCount"] == 1


def test_duplicate_slices_for_one_index_keep_the_newest_and_delete_the_rest():
    desired = desired_pool(pool("a", gpus(2)))
    _, observed = publish(desired)
    old = copy.deepcopy(observed[0])
    old["metadata"].update(name="00000-gpu.example.com-node-1-zzzzz", uid="old")
    old["spec"]["pool"]["generation"] = 0
    plan = plan_pool(desired, [old, *observed], TARGET)
    assert verbs(plan) == ["delete"] and plan.writes[0].uid == "old"


def test_a_slice_left_at_an_older_generation_is_updated_in_place():
    _, observed = publish(desired_pool(pool("a", gpus(300))))
    observed[2]["spec"]["pool"]["generation"] = 0  # an interrupted rewrite
    plan = plan_pool(desired_pool(pool("a", gpus(300))), observed, TARGET)
    assert verbs(plan) == ["update"] and plan.generation == 1


def test_update_preserves_stored_taint_times():
    _, observed = publish(desired_pool(pool("a", gpus(2, taints=[TAINT]))))
    specs = gpus(2, taints=[TAINT])
    specs[1]["attributes"]["model"] = {"string": "changed"}
    plan = plan_pool(desired_pool(pool("a", specs)), observed, TARGET)
    (write,) = plan.writes
    for device in write.body["spec"]["devices"]:
        assert device["taints"][0]["timeAdded"] == "2026-01-01T00:00:00Z"


def test_missing_owner_reference_is_repaired():
    desired = desired_pool(pool("a", gpus(1)))
    _, observed = publish(desired)
    observed[0]["metadata"]["ownerReferences"] = []
    plan = plan_pool(desired, observed, TARGET)
    assert verbs(plan) == ["update"] and "metadata.ownerReferences" in plan.writes[0].reason


def test_accepted_stored_form_stops_rewrites_after_dropped_fields():
    desired = desired_pool(pool("a", gpus(2, allowMultipleAllocations=True)))
    plan = plan_pool(desired, [], TARGET)
    observed = [stored(plan.writes[0].body, drop=("allowMultipleAllocations",))]
    assert verbs(plan_pool(desired, observed, TARGET)) == ["update"]
    accepted = {0: AcceptedForm(desired.slices[0].spec_content(),
                                normalized_content(observed[0]["spec"]))}
    assert plan_pool(desired, observed, TARGET, accepted).empty


def test_taken_names_fall_back_to_generate_name():
    desired = desired_pool(pool("a", gpus(1)))
    name = plan_pool(desired, [], TARGET).writes[0].name
    plan = plan_pool(desired, [], TARGET, taken_names=frozenset({name}))
    meta = plan.writes[0].body["metadata"]
    assert "name" not in meta and meta["generateName"].startswith("00000-gpu.example.com-")


def test_terminating_slices_are_neither_matched_nor_deleted_again():
    desired = desired_pool(pool("a", gpus(1)))
    _, observed = publish(desired)
    observed[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert verbs(plan_pool(desired, observed, TARGET)) == ["create"]
    assert plan_removal("a", observed).empty


def test_removed_pool_deletes_all_its_slices_with_preconditions():
    _, observed = publish(desired_pool(pool("a", gpus(200))))
    plan = plan_removal("a", observed)
    assert verbs(plan) == ["delete", "delete"]
    assert all(w.uid and w.resource_version for w in plan.writes)


def test_a_terminating_slice_still_counts_for_the_generation():
    """Consumers see a terminating slice until it is gone: the replacement must carry a
    newer generation, or two complete pools would exist at the same generation."""
    desired = desired_pool(pool("a", gpus(1)))
    _, observed = publish(desired)
    observed[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    plan = plan_pool(desired, observed, TARGET)
    assert verbs(plan) == ["create"] and plan.generation == 2
