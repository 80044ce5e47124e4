"""The publisher against the API stand-in over HTTP: what a node's slices look like and
how few writes it takes to keep them right."""

from __future__ import annotations

import copy
import time

from simdra._driver.core.validation import validate_slice
from simdra._driver.slices import naming
from simdra._driver.slices import reconciler as slice_reconciler
from simdra._driver.slices.api import SliceApi
from simdra._driver.slices.publisher import Publisher
from simdra._driver.testing.apiserver import APIServer

from .builders import DRIVER, NODE, TAINT, gpu, gpus, inventory, pool
from .conftest import FAST


def slices(server, pool_name=None):
    objs = [o for o in server.objects("resourceslices") if o["spec"]["driver"] == DRIVER]
    if pool_name is not None:
        objs = [o for o in objs if o["spec"]["pool"]["name"] == pool_name]
    return sorted(objs, key=lambda o: o["metadata"]["name"])


def slice_writes(server):
    return [(e.verb, e.name, e.code) for e in server.request_log.entries(resource="resourceslices")
            if e.is_write]


def wait_until(condition, timeout=10.0):
    """Poll `condition` (a generous bound; latency numbers live in bench/)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_eight_gpus_make_one_valid_slice_owned_by_the_node(server, node, start):
    publisher = start(inventory(pool("gpus", gpus(8))))
    assert publisher.wait_synced(10)
    (obj,) = slices(server)
    assert validate_slice(obj) == []
    assert obj["spec"]["nodeName"] == NODE
    assert obj["spec"]["pool"] == {"name": "gpus", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in obj["spec"]["devices"]] == [f"gpu-{i}" for i in range(8)]
    assert obj["metadata"]["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node["metadata"]["uid"],
        "controller": True}]
    assert obj["metadata"]["name"].startswith(f"00000-{DRIVER}-{NODE}-")
    assert publisher.stats().writes == {"create": 1, "update": 0, "delete": 0}


def test_300_devices_make_3_slices_of_one_complete_generation(server, node, start):
    assert start(inventory(pool("a", gpus(300)))).wait_synced(10)
    objs = slices(server)
    assert [len(o["spec"]["devices"]) for o in objs] == [128, 128, 44]
    assert {(o["spec"]["pool"]["generation"], o["spec"]["pool"]["resourceSliceCount"])
            for o in objs} == {(1, 3)}


def test_tainted_devices_go_64_per_slice_and_counters_in_their_own_slice(server, node, start):
    counters = ({"name": "mem", "counters": {"memory": {"value": "8Ti"}}},)
    uses = [{"counterSet": "mem", "counters": {"memory": {"value": "80Gi"}}}]
    devices = gpus(100, taints=[TAINT]) + gpus(30, start=100, consumesCounters=uses)
    assert start(inventory(pool("a", devices, counters))).wait_synced(10)
    objs = slices(server)
    assert objs[0]["spec"]["sharedCounters"][0]["name"] == "mem"
    assert "devices" not in objs[0]["spec"]
    assert [len(o["spec"]["devices"]) for o in objs[1:]] == [64, 64, 2]


def test_quiet_node_makes_no_requests_at_all(server, node, start):
    publisher = start(inventory(pool("a", gpus(300, taints=[TAINT]))))
    assert publisher.wait_synced(10)
    server.request_log.clear()
    time.sleep(1.5)
    assert server.request_log.entries() == []
    assert publisher.stats().synced


def test_one_changed_attribute_is_one_update_without_generation_bump(server, node, start):
    publisher = start(inventory(pool("a", gpus(300))))
    assert publisher.wait_synced(10)
    server.request_log.clear()
    specs = gpus(300)
    specs[250]["attributes"]["model"] = {"string": "sim-h100"}
    publisher.update(inventory(pool("a", specs)))
    assert publisher.wait_synced(10)
    assert [(verb, code) for verb, _, code in slice_writes(server)] == [("update", 200)]
    assert {o["spec"]["pool"]["generation"] for o in slices(server)} == {1}
    assert slices(server)[1]["spec"]["devices"][250 - 128]["attributes"]["model"] == {
        "string": "sim-h100"}


def test_growing_a_full_pool_bumps_the_generation_update_then_create(server, node, start):
    publisher = start(inventory(pool("a", gpus(128))))
    assert publisher.wait_synced(10)
    server.request_log.clear()
    publisher.update(inventory(pool("a", gpus(129))))
    assert publisher.wait_synced(10)
    assert [verb for verb, _, _ in slice_writes(server)] == ["update", "create"]
    assert {(o["spec"]["pool"]["generation"], o["spec"]["pool"]["resourceSliceCount"])
            for o in slices(server)} == {(2, 2)}
    assert publisher.stats().generations == {"a": 2}


def test_obsolete_slices_are_deleted_before_updates_and_creates(server, node, start):
    first = start(inventory(pool("a", gpus(128))))
    assert first.wait_synced(10)
    first.stop()
    legacy = copy.deepcopy(slices(server)[0])  # as a Go <= 1.35 helper would have named it
    legacy["metadata"] = {"name": f"{NODE}-{DRIVER}-x7k2p",
                          "ownerReferences": legacy["metadata"]["ownerReferences"]}
    server.put_object("resourceslices", legacy)
    server.request_log.clear()
    assert start(inventory(pool("a", gpus(129)))).wait_synced(10)
    assert [(verb, name) for verb, name, _ in slice_writes(server)] == [
        ("delete", legacy["metadata"]["name"]), ("update", slices(server)[0]["metadata"]["name"]),
        ("create", "")]
    assert {o["spec"]["pool"]["generation"] for o in slices(server)} == {2}


def test_change_in_one_pool_never_touches_another(server, node, start):
    publisher = start(inventory(pool("a", gpus(200)), pool("b", gpus(200))))
    assert publisher.wait_synced(10)
    before = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in slices(server, "b")}
    publisher.update(inventory(pool("a", gpus(300)), pool("b", gpus(200))))
    assert publisher.wait_synced(10)
    after = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in slices(server, "b")}
    assert after == before
    assert {o["spec"]["pool"]["generation"] for o in slices(server, "a")} == {2}


def test_removed_pool_is_deleted(server, node, start):
    publisher = start(inventory(pool("a", gpus(1)), pool("b", gpus(1))))
    assert publisher.wait_synced(10)
    publisher.update(inventory(pool("a", gpus(1))))
    assert publisher.wait_synced(10)
    assert [o["spec"]["pool"]["name"] for o in slices(server)] == ["a"]


def set_taint_times(server, when):
    """What a real server does to taints published without `timeAdded`."""
    for obj in slices(server):
        for device in obj["spec"].get("devices", []):
            for taint in device.get("taints", []):
                taint["timeAdded"] = when
        server.put_object("resourceslices", obj)


def test_restart_adopts_existing_slices_with_zero_writes(server, node, start):
    inv = inventory(pool("a", gpus(300, taints=[TAINT])), pool("b", []))
    first = start(inv)
    assert first.wait_synced(10)
    first.stop()
    set_taint_times(server, "2026-01-02T03:04:05Z")
    server.request_log.clear()
    second = start(inv)
    assert second.wait_synced(10)
    assert server.writes() == 0
    assert second.stats().generations == {"a": 1, "b": 1}
    # A later change keeps the stored taint times of unchanged taints.
    specs = gpus(300, taints=[TAINT])
    specs[1]["attributes"]["model"] = {"string": "changed"}
    second.update(inventory(pool("a", specs), pool("b", [])))
    assert second.wait_synced(10)
    assert server.writes() == 1
    devices = slices(server, "a")[0]["spec"]["devices"]
    assert devices[1]["attributes"]["model"] == {"string": "changed"}
    assert {t["timeAdded"] for d in devices for t in d["taints"]} == {"2026-01-02T03:04:05Z"}


def test_slices_deleted_behind_our_back_are_republished(server, node, start):
    publisher = start(inventory(pool("a", gpus(300))))
    assert publisher.wait_synced(10)
    names = [o["metadata"]["name"] for o in slices(server)]
    for name in names:  # what the kubelet does when it starts
        server.delete_object("resourceslices", name)
    assert wait_until(lambda: len(slices(server)) == 3)
    assert publisher.wait_synced(10)
    assert [o["metadata"]["name"] for o in slices(server)] == names  # same stable names


def test_a_given_node_uid_owns_the_first_slices_however_late_then_ages(server, node, start):
    """The caller's UID (a fleet's, which just created the Node) is not re-read before
    the first slices even when they come after its max age; later recreates re-read it,
    so a Node re-created since gets its slices owned by its new UID."""
    server.stall("list", "resourceslices", 0.3, together=1000)  # the first pass comes late
    publisher = start(inventory(pool("a", gpus(2))), node_uid=node["metadata"]["uid"],
                      node_uid_max_age=0.05)
    assert publisher.wait_synced(10)
    assert server.request_log.count("get", "nodes") == 0
    (first,) = slices(server)
    assert first["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    server.delete_object("nodes", NODE)
    again = server.put_object("nodes", {"metadata": {"name": NODE}})
    server.delete_object("resourceslices", first["metadata"]["name"])  # the GC's part
    assert wait_until(lambda: [o["metadata"]["ownerReferences"][0]["uid"]
                               for o in slices(server)] == [again["metadata"]["uid"]])
    assert server.request_log.count("get", "nodes") == 1


def test_injected_conflict_server_error_and_throttling_recover(server, node, start):
    server.inject_failure("create", "resourceslices", 500, count=2)
    server.inject_failure("create", "resourceslices", 429, retry_after=1)
    publisher = start(inventory(pool("a", gpus(300))))
    assert publisher.wait_synced(10)
    assert len(slices(server)) == 3
    server.inject_failure("update", "resourceslices", 409)
    specs = gpus(300)
    specs[0]["attributes"]["model"] = {"string": "changed"}
    publisher.update(inventory(pool("a", specs)))
    assert publisher.wait_synced(10)
    assert slices(server)[0]["spec"]["devices"][0]["attributes"]["model"] == {"string": "changed"}
    errors = publisher.stats().errors
    assert errors["server"] == 2 and errors["throttled"] == 1 and errors["conflict"] == 1


def test_concurrent_change_by_someone_else_is_reread_and_fixed(server, node, start):
    publisher = start(inventory(pool("a", gpus(2))))
    assert publisher.wait_synced(10)
    (obj,) = slices(server)
    obj["spec"]["devices"][0]["attributes"]["model"] = {"string": "tampered"}
    server.put_object("resourceslices", obj)
    assert wait_until(lambda: slices(server)[0]["spec"]["devices"][0]["attributes"]["model"]
                      == {"string": "sim-a100"})
    assert publisher.wait_synced(10)


def test_missing_node_is_retried_until_it_appears(server, start):
    publisher = start(inventory(pool("a", gpus(8))))
    assert wait_until(lambda: publisher.stats().errors.get("node_missing", 0) >= 2)
    assert slices(server) == [] and not publisher.stats().synced
    node = server.put_object("nodes", {"metadata": {"name": NODE}})
    assert publisher.wait_synced(10)
    (obj,) = slices(server)
    assert obj["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]


def test_dropped_fields_are_reported_once_with_gate_names(server, node, start):
    server.feature_gates["DRAConsumableCapacity"] = False
    publisher = start(inventory(pool("a", gpus(200, allowMultipleAllocations=True))))
    assert publisher.wait_synced(10)
    names = [o["metadata"]["name"] for o in slices(server)]
    server.delete_object("resourceslices", names[0])  # force a resync with a rewrite
    assert wait_until(lambda: len(slices(server)) == 2)
    assert publisher.wait_synced(10)
    server.request_log.clear()
    time.sleep(0.5)
    assert server.writes() == 0  # no rewrite loop
    (report,) = publisher.stats().dropped_fields
    assert report.pool == "a" and report.gates == ("DRAConsumableCapacity",)
    assert report.fields == ("spec.devices[*].allowMultipleAllocations",)
    assert "DRAConsumableCapacity" in str(report)


def test_invalid_pool_is_reported_and_valid_pool_still_published(server, node, start):
    bad = gpus(3)
    bad[2]["name"] = "gpu-0"
    publisher = start(inventory(pool("good", gpus(2)), pool("bad", bad)))
    assert publisher.wait_synced(10)
    assert [o["spec"]["pool"]["name"] for o in slices(server)] == ["good"]
    (problem,) = publisher.stats().validation_problems["bad"]
    assert 'device "gpu-0"' in problem and "unique in the pool" in problem


def test_watch_expiry_relists_and_keeps_recovering(server, node, start):
    publisher = start(inventory(pool("a", [gpu(0)])), watch_timeout=1)
    assert publisher.wait_synced(10)
    server.put_object("nodes", {"metadata": {"name": "other-node"}})  # move the RV on
    server.compact()  # our watch's resourceVersion is now too old: 410 on resume
    assert wait_until(lambda: publisher.stats().relists >= 2)
    server.delete_object("resourceslices", slices(server)[0]["metadata"]["name"])
    assert wait_until(lambda: len(slices(server)) == 1)


def test_a_name_held_by_a_foreign_object_falls_back_to_generate_name(server, node, start):
    taken = naming.slice_name(0, 5, DRIVER, NODE, "a")
    server.put_object("resourceslices", {"metadata": {"name": taken}, "spec": {
        "driver": "other.example.com", "nodeName": NODE,
        "pool": {"name": "a", "generation": 1, "resourceSliceCount": 1}, "devices": []}})
    publisher = start(inventory(pool("a", gpus(1))))
    assert publisher.wait_synced(10)
    (obj,) = slices(server)
    assert obj["metadata"]["name"].startswith(f"00000-{DRIVER}-{NODE}-")
    assert obj["metadata"]["name"] != taken
    assert publisher.stats().errors["already_exists"] == 1
    server.request_log.clear()
    time.sleep(0.3)
    assert server.writes() == 0


def test_a_new_api_server_with_older_versions_gets_our_slices_again():
    """An API server whose resourceVersions went back (a restored etcd; here a fresh
    stand-in on the same port): the publisher lists again and republishes its slices."""
    first = APIServer().start()
    try:
        first.put_objects("nodes", [{"metadata": {"name": f"other-{i}"}} for i in range(20)])
        first.put_object("nodes", {"metadata": {"name": NODE}})
        client = first.rest_client()
        publisher = Publisher(client, DRIVER, NODE, inventory(pool("a", gpus(3))), backoff=FAST)
        publisher.start()
        try:
            assert publisher.wait_synced(10)
            port = first.port
            first.stop()
            with APIServer(port=port, too_large_resource_version_wait=0.05) as second:
                second.put_object("nodes", {"metadata": {"name": NODE}})
                assert wait_until(lambda: len(slices(second)) == 1)
                assert publisher.wait_synced(10)
        finally:
            publisher.stop()
            client.close()
    finally:
        first.stop()


def test_watches_ended_at_once_are_retried_with_backoff_not_in_a_loop(server, node, start):
    publisher = start(inventory(pool("a", gpus(1))))
    assert publisher.wait_synced(10)
    server.store.close()  # as a server shutting down: every watch ends at once, no events
    server.request_log.clear()
    time.sleep(0.5)
    # FAST backs off 0.05 s doubling to 0.4 s: a handful of tries, not hundreds.
    assert server.request_log.count("watch", "resourceslices") < 10
    assert publisher.stats().errors.get("watch_closed", 0) >= 1


def _held_specs(publisher, pool_name):
    return [d for o in publisher._cache.pool_slices(pool_name) for d in o["spec"]["devices"]]


def test_published_devices_are_held_once_whether_written_or_adopted(server, node, start):
    """A big node's memory: what the server stores is not kept as a second copy of every
    device next to the inventory, after our writes and after adopting listed slices."""
    inv = inventory(pool("a", gpus(300)))
    specs = {d.name: d.spec for _, d in inv.devices()}
    first = start(inv)
    assert first.wait_synced(10)
    held = _held_specs(first, "a")
    assert len(held) == 300 and all(d is specs[d["name"]] for d in held)
    first.stop()
    second = start(inv)  # lists the slices the first one wrote
    assert second.wait_synced(10) and server.writes() == 3
    held = _held_specs(second, "a")
    assert len(held) == 300 and all(d is specs[d["name"]] for d in held)


def _partitioned(model: str):
    """Four GPUs that consume one counter set, the first of them of `model`."""
    counters = ({"name": "mem", "counters": {"memory": {"value": "8Ti"}}},)
    uses = [{"counterSet": "mem", "counters": {"memory": {"value": "80Gi"}}}]
    specs = gpus(4, consumesCounters=uses)
    specs[0]["attributes"]["model"] = {"string": model}
    return inventory(pool("a", specs, counters))


def test_a_control_plane_upgraded_or_rolled_back_under_the_plugin_gets_its_layout(
        monkeypatch):
    # 1.34 wants counter sets in the slice of the devices that consume them, 1.35 in a
    # slice of their own: the first write the new release refuses re-reads /version.
    reads = []
    read_version = SliceApi.server_version

    def counting(api):
        reads.append(1)
        return read_version(api)

    monkeypatch.setattr(SliceApi, "server_version", counting)
    monkeypatch.setattr(slice_reconciler, "_LAYOUT_RECHECK_SECONDS", 1.5)
    with APIServer(kubernetes_version="1.34") as server:
        server.put_object("nodes", {"metadata": {"name": NODE}})
        client = server.rest_client()
        publisher = Publisher(client, DRIVER, NODE, _partitioned("a"), backoff=FAST)
        publisher.start()
        try:
            assert publisher.wait_synced(10)
            [mixed] = slices(server)
            assert mixed["spec"]["sharedCounters"] and len(mixed["spec"]["devices"]) == 4

            server.config.kubernetes_version = "1.35"  # the control plane is upgraded
            publisher.update(_partitioned("b"))
            assert publisher.wait_synced(10)
            counters, devices = slices(server)
            assert "devices" not in counters["spec"] and "sharedCounters" not in devices["spec"]
            assert devices["spec"]["devices"][0]["attributes"]["model"] == {"string": "b"}
            assert [validate_slice(o) for o in (counters, devices)] == [[], []]
            assert len(reads) == 2

            server.config.kubernetes_version = "1.34"  # and rolled back
            publisher.update(_partitioned("c"))
            assert publisher.wait_synced(10)
            [mixed] = slices(server)
            assert mixed["spec"]["devices"][0]["attributes"]["model"] == {"string": "c"}
            # Writes refused while /version may not be read yet back off; one read.
            assert len(reads) == 3
            assert publisher.stats().errors["invalid"] >= 2
        finally:
            publisher.stop()
            client.close()
