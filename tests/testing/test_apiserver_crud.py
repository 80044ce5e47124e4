"""CRUD through the official client over real HTTP: what a driver relies on from the server."""

from __future__ import annotations

import json
import uuid

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.fixtures import every_field

NODE, DRIVER = "node-1", "gpu.example.com"


def _status(exc: ApiException) -> dict:
    return json.loads(exc.body)


# --- nodes ------------------------------------------------------------------------------


def test_node_create_get_list_delete(core_api):
    created = core_api.create_node({"metadata": {"name": NODE}})
    uuid.UUID(created.metadata.uid)  # a real uuid, needed for slice owner references
    assert created.metadata.creation_timestamp is not None

    assert core_api.read_node(NODE).metadata.uid == created.metadata.uid
    assert [n.metadata.name for n in core_api.list_node().items] == [NODE]

    status = core_api.delete_node(NODE)  # the client hands back the Status as a dict
    assert status["status"] == "Success"
    assert status["details"]["uid"] == created.metadata.uid
    with pytest.raises(ApiException) as err:
        core_api.read_node(NODE)
    assert err.value.status == 404
    assert _status(err.value)["reason"] == "NotFound"
    assert _status(err.value)["message"] == 'nodes "node-1" not found'


def test_deleting_a_node_collects_the_slices_it_owns(core_api, resource_api, make_slice):
    node = core_api.create_node({"metadata": {"name": NODE}})
    owned = make_slice()
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": NODE,
            "uid": node.metadata.uid,
            "controller": True,
        }
    ]
    resource_api.create_resource_slice(owned)
    resource_api.create_resource_slice(make_slice(node="node-2", pool="node-2"))

    core_api.delete_node(NODE)

    remaining = resource_api.list_resource_slice().items
    assert [s.spec.node_name for s in remaining] == ["node-2"]


# --- resource slices: create / get / update / delete --------------------------------------


def test_create_with_generate_name_sets_server_fields(resource_api, make_slice):
    created = resource_api.create_resource_slice(make_slice())

    prefix = f"{NODE}-{DRIVER}-"
    assert created.metadata.name.startswith(prefix)
    assert len(created.metadata.name) == len(prefix) + 5
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.generation == 1
    assert int(created.metadata.resource_version) > 0
    assert created.kind == "ResourceSlice" and created.api_version == "resource.k8s.io/v1"
    got = resource_api.read_resource_slice(created.metadata.name)
    assert got.to_dict() == created.to_dict()


def test_generate_name_gives_distinct_names(resource_api, make_slice):
    names = {resource_api.create_resource_slice(make_slice()).metadata.name for _ in range(5)}
    assert len(names) == 5


def test_create_with_taken_name_is_already_exists(resource_api, make_slice):
    resource_api.create_resource_slice(make_slice(name="fixed"))
    with pytest.raises(ApiException) as err:
        resource_api.create_resource_slice(make_slice(name="fixed"))
    assert err.value.status == 409
    assert _status(err.value)["reason"] == "AlreadyExists"
    assert _status(err.value)["details"] == {
        "name": "fixed",
        "group": "resource.k8s.io",
        "kind": "resourceslices",
    }


def test_resource_versions_increase_with_every_write(resource_api, make_slice):
    first = resource_api.create_resource_slice(make_slice())
    second = resource_api.create_resource_slice(make_slice())
    listed = resource_api.list_resource_slice()
    assert int(first.metadata.resource_version) < int(second.metadata.resource_version)
    assert int(listed.metadata.resource_version) == int(second.metadata.resource_version)


def test_update_with_stale_resource_version_is_conflict(resource_api, make_slice):
    created = resource_api.create_resource_slice(make_slice())
    created.spec.pool.generation = 1
    updated = resource_api.replace_resource_slice(created.metadata.name, created)
    assert updated.spec.pool.generation == 1

    created.spec.pool.generation = 2  # still carries the first resourceVersion
    with pytest.raises(ApiException) as err:
        resource_api.replace_resource_slice(created.metadata.name, created)
    assert err.value.status == 409
    assert _status(err.value)["reason"] == "Conflict"
    assert "the object has been modified" in _status(err.value)["message"]
    assert resource_api.read_resource_slice(created.metadata.name).spec.pool.generation == 1


def test_update_keeps_uid_and_bumps_generation_only_on_spec_change(resource_api, make_slice):
    created = resource_api.create_resource_slice(make_slice())
    name = created.metadata.name

    created.metadata.labels = {"team": "a"}
    relabeled = resource_api.replace_resource_slice(name, created)
    assert relabeled.metadata.generation == 1
    assert relabeled.metadata.uid == created.metadata.uid

    relabeled.spec.pool.generation = 5
    relabeled.metadata.uid = None  # an update that omits the uid keeps it
    changed = resource_api.replace_resource_slice(name, relabeled)
    assert changed.metadata.generation == 2
    assert changed.metadata.uid == created.metadata.uid
    assert changed.metadata.creation_timestamp == created.metadata.creation_timestamp


def test_update_that_changes_nothing_keeps_the_resource_version(resource_api, make_slice):
    created = resource_api.create_resource_slice(make_slice())
    same = resource_api.replace_resource_slice(created.metadata.name, created)
    assert same.metadata.resource_version == created.metadata.resource_version


def test_update_of_missing_slice_is_not_found(resource_api, make_slice):
    with pytest.raises(ApiException) as err:
        resource_api.replace_resource_slice("ghost", make_slice(name="ghost"))
    assert err.value.status == 404


def test_update_with_other_name_in_body_is_bad_request(resource_api, make_slice):
    created = resource_api.create_resource_slice(make_slice())
    with pytest.raises(ApiException) as err:
        resource_api.replace_resource_slice(created.metadata.name, make_slice(name="other"))
    assert err.value.status == 400


def test_delete_with_preconditions(resource_api, make_slice):
    created = resource_api.create_resource_slice(make_slice())
    name = created.metadata.name
    for preconditions in (
        client.V1Preconditions(uid=str(uuid.uuid4())),
        client.V1Preconditions(resource_version="1"),
    ):
        with pytest.raises(ApiException) as err:
            resource_api.delete_resource_slice(
                name, body=client.V1DeleteOptions(preconditions=preconditions)
            )
        assert err.value.status == 409
        assert "Precondition failed" in _status(err.value)["message"]

    deleted = resource_api.delete_resource_slice(
        name,
        body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(
                uid=created.metadata.uid, resource_version=created.metadata.resource_version
            )
        ),
    )
    assert deleted.metadata.uid == created.metadata.uid
    assert resource_api.list_resource_slice().items == []


def test_delete_missing_slice_is_not_found(resource_api):
    with pytest.raises(ApiException) as err:
        resource_api.delete_resource_slice("ghost")
    assert err.value.status == 404
    assert _status(err.value)["details"]["name"] == "ghost"


def test_delete_collection_by_field_selector(resource_api, make_slice):
    resource_api.create_resource_slice(make_slice())
    resource_api.create_resource_slice(make_slice())
    resource_api.create_resource_slice(make_slice(node="node-2", pool="node-2"))

    resource_api.delete_collection_resource_slice(field_selector=f"spec.nodeName={NODE}")

    assert [s.spec.node_name for s in resource_api.list_resource_slice().items] == ["node-2"]


def test_delete_collection_also_deletes_objects_changed_after_its_list(
    server, resource_api, make_slice, monkeypatch
):
    """The real server deletes each listed object by name, whatever its version by then:
    a kubelet wiping the node's slices while a driver updates one leaves nothing behind."""
    for name in ("a", "b"):
        resource_api.create_resource_slice(make_slice(name=name))
    listed = server.store.list

    def list_then_race(resource, namespace=None):
        result = listed(resource, namespace)
        monkeypatch.setattr(server.store, "list", listed)  # once
        current = server.get_object("resourceslices", "a")
        current["spec"]["pool"]["generation"] = 7
        server.put_object("resourceslices", current)  # lands between list and delete
        return result

    rv = resource_api.list_resource_slice().metadata.resource_version
    monkeypatch.setattr(server.store, "list", list_then_race)
    resource_api.delete_collection_resource_slice(field_selector=f"spec.nodeName={NODE}")

    assert resource_api.list_resource_slice().items == []
    stream = watch.Watch().stream(
        resource_api.list_resource_slice, resource_version=rv, timeout_seconds=5,
        deserialize=False,
    )
    deleted = []
    for event in stream:
        if event["type"] == "DELETED":
            obj = event["object"]
            deleted.append((obj["metadata"]["name"], obj["spec"]["pool"]["generation"]))
            if len(deleted) == 2:
                break
    stream.close()
    assert sorted(deleted) == [("a", 7), ("b", 0)]  # one DELETED each, with the last state


# --- resource slices: list ------------------------------------------------------------------


@pytest.fixture
def three_slices(resource_api, make_slice):
    resource_api.create_resource_slice(make_slice(name="a", node="node-1", pool="p1"))
    resource_api.create_resource_slice(make_slice(name="b", node="node-1", pool="p2"))
    resource_api.create_resource_slice(
        make_slice(name="c", node="node-2", pool="p1", driver="nic.example.com")
    )


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("spec.nodeName=node-1", ["a", "b"]),
        ("spec.driver=nic.example.com", ["c"]),
        ("spec.pool.name=p1", ["a", "c"]),
        ("spec.nodeName=node-1,spec.pool.name=p2", ["b"]),
        ("spec.nodeName!=node-1", ["c"]),
        ("spec.nodeName=", []),
        ("metadata.name=b", ["b"]),
    ],
)
def test_list_with_field_selectors(resource_api, three_slices, selector, names):
    listed = resource_api.list_resource_slice(field_selector=selector)
    assert [s.metadata.name for s in listed.items] == names


def test_list_with_unsupported_field_is_bad_request(resource_api, three_slices):
    with pytest.raises(ApiException) as err:
        resource_api.list_resource_slice(field_selector="spec.devices=x")
    assert err.value.status == 400
    assert "field label not supported" in _status(err.value)["message"]


def test_list_with_label_selector(resource_api, make_slice):
    for name, labels in (("a", {"tier": "fast"}), ("b", {"tier": "slow"}), ("c", {})):
        body = make_slice(name=name)
        body["metadata"]["labels"] = labels
        resource_api.create_resource_slice(body)

    def names(selector: str) -> list[str]:
        listed = resource_api.list_resource_slice(label_selector=selector)
        return [s.metadata.name for s in listed.items]

    assert names("tier=fast") == ["a"]
    assert names("tier!=fast") == ["b", "c"]
    assert names("tier") == ["a", "b"]
    assert names("!tier") == ["c"]
    assert names("tier in (fast,slow)") == ["a", "b"]


def test_list_answer_is_shaped_like_the_real_server(raw, three_slices):
    code, body, _ = raw("GET", "/apis/resource.k8s.io/v1/resourceslices")
    assert code == 200
    assert body["kind"] == "ResourceSliceList"
    assert body["apiVersion"] == "resource.k8s.io/v1"
    assert body["metadata"]["resourceVersion"].isdigit()
    assert [i["metadata"]["name"] for i in body["items"]] == ["a", "b", "c"]


def test_list_pages_with_limit_and_continue(resource_api, three_slices):
    first = resource_api.list_resource_slice(limit=2)
    assert [s.metadata.name for s in first.items] == ["a", "b"]
    assert first.metadata.remaining_item_count == 1
    rest = resource_api.list_resource_slice(limit=2, _continue=first.metadata._continue)
    assert [s.metadata.name for s in rest.items] == ["c"]
    assert not rest.metadata._continue


# --- device classes ---------------------------------------------------------------------


def test_device_class_create_get_list_delete(resource_api):
    body = {
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
    }
    created = resource_api.create_device_class(body)
    assert created.metadata.uid
    assert resource_api.read_device_class("gpu.example.com").spec.selectors[0].cel.expression
    assert [c.metadata.name for c in resource_api.list_device_class().items] == ["gpu.example.com"]
    resource_api.delete_device_class("gpu.example.com")
    assert resource_api.list_device_class().items == []


# --- resource claims ----------------------------------------------------------------------


def _allocation(device: str = "gpu-0") -> dict:
    return {
        "devices": {
            "results": [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device}]
        }
    }


def test_claim_create_ignores_status_and_lists_across_namespaces(resource_api, make_claim):
    body = make_claim("c1", "team-a")
    body["status"] = {"allocation": _allocation()}
    created = resource_api.create_namespaced_resource_claim("team-a", body)
    assert created.status is None or created.status.allocation is None
    resource_api.create_namespaced_resource_claim("team-b", make_claim("c2", "team-b"))

    everywhere = resource_api.list_resource_claim_for_all_namespaces()
    assert [(c.metadata.namespace, c.metadata.name) for c in everywhere.items] == [
        ("team-a", "c1"),
        ("team-b", "c2"),
    ]
    in_a = resource_api.list_namespaced_resource_claim("team-a")
    assert [c.metadata.name for c in in_a.items] == ["c1"]
    assert (
        resource_api.read_namespaced_resource_claim("c1", "team-a").metadata.uid
        == created.metadata.uid
    )
    with pytest.raises(ApiException) as err:
        resource_api.read_namespaced_resource_claim("c1", "team-b")
    assert err.value.status == 404


def test_claim_status_update_checks_resource_version(resource_api, make_claim):
    claim = resource_api.create_namespaced_resource_claim("default", make_claim())
    claim.status = {"allocation": _allocation()}
    updated = resource_api.replace_namespaced_resource_claim_status("claim-1", "default", claim)
    assert updated.status.allocation.devices.results[0].device == "gpu-0"
    assert updated.metadata.generation == claim.metadata.generation  # status is not spec

    claim.status = {"allocation": _allocation("gpu-1")}  # stale resourceVersion
    with pytest.raises(ApiException) as err:
        resource_api.replace_namespaced_resource_claim_status("claim-1", "default", claim)
    assert err.value.status == 409


def test_claim_main_endpoint_ignores_status_and_keeps_spec_immutable(resource_api, make_claim):
    claim = resource_api.create_namespaced_resource_claim("default", make_claim())
    claim.status = {"allocation": _allocation()}
    claim.metadata.labels = {"x": "y"}
    updated = resource_api.replace_namespaced_resource_claim("claim-1", "default", claim)
    assert updated.metadata.labels == {"x": "y"}
    assert updated.status is None or updated.status.allocation is None

    updated.spec.devices.requests[0].name = "other"
    with pytest.raises(ApiException) as err:
        resource_api.replace_namespaced_resource_claim("claim-1", "default", updated)
    assert err.value.status == 422
    assert _status(err.value)["details"]["causes"][0]["field"] == "spec"


def test_claim_status_merge_patch(resource_api, make_claim):
    resource_api.create_namespaced_resource_claim("default", make_claim())
    devices = [
        {
            "driver": DRIVER,
            "pool": NODE,
            "device": "gpu-0",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Prepared",
                    "message": "",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }
            ],
        }
    ]
    patched = resource_api.patch_namespaced_resource_claim_status(
        "claim-1",
        "default",
        {"status": {"allocation": _allocation(), "devices": devices}},
        _content_type="application/merge-patch+json",
    )
    assert patched.status.devices[0].conditions[0].type == "Ready"
    assert patched.status.allocation.devices.results[0].device == "gpu-0"


def test_claim_status_json_patch(resource_api, make_claim):
    resource_api.create_namespaced_resource_claim("default", make_claim())
    patched = resource_api.patch_namespaced_resource_claim_status(
        "claim-1",
        "default",
        [{"op": "add", "path": "/status", "value": {"allocation": _allocation()}}],
    )
    assert patched.status.allocation.devices.results[0].pool == NODE

    with pytest.raises(ApiException) as err:  # a failing "test" operation rejects the patch
        resource_api.patch_namespaced_resource_claim_status(
            "claim-1",
            "default",
            [
                {
                    "op": "test",
                    "path": "/status/allocation/devices/results/0/device",
                    "value": "gpu-9",
                }
            ],
        )
    assert err.value.status == 422


def test_patch_that_sets_an_old_resource_version_is_conflict(resource_api, make_claim):
    claim = resource_api.create_namespaced_resource_claim("default", make_claim())
    resource_api.patch_namespaced_resource_claim(
        "claim-1",
        "default",
        {"metadata": {"labels": {"a": "b"}}},
        _content_type="application/merge-patch+json",
    )
    with pytest.raises(ApiException) as err:
        resource_api.patch_namespaced_resource_claim(
            "claim-1",
            "default",
            {
                "metadata": {
                    "labels": {"a": "c"},
                    "resourceVersion": claim.metadata.resource_version,
                }
            },
            _content_type="application/merge-patch+json",
        )
    assert err.value.status == 409


def test_finalizers_delay_deletion_until_removed(resource_api, make_claim):
    body = make_claim()
    body["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    resource_api.create_namespaced_resource_claim("default", body)

    marked = resource_api.delete_namespaced_resource_claim("claim-1", "default")
    assert marked.metadata.deletion_timestamp is not None
    still = resource_api.read_namespaced_resource_claim("claim-1", "default")
    still.metadata.finalizers = []
    resource_api.replace_namespaced_resource_claim("claim-1", "default", still)
    assert resource_api.list_namespaced_resource_claim("default").items == []


# --- objects with every field round-trip ------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "kind"),
    [
        ("resourceslices", "ResourceSlice"),
        ("resourceclaims", "ResourceClaim"),
        ("deviceclasses", "DeviceClass"),
    ],
)
def test_every_field_object_round_trips_through_the_store(server, raw, resource, kind):
    fixture = every_field.BY_KIND[kind]()
    namespaced = resource == "resourceclaims"

    stored = server.put_object(resource, fixture)

    expected = json.loads(json.dumps(fixture))
    if not namespaced:
        del expected["metadata"]["namespace"]  # cluster-scoped objects have none
    expected["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
    assert stored == expected
    path = (
        f"/apis/resource.k8s.io/v1/namespaces/namespaceSample/{resource}/nameSample"
        if namespaced
        else f"/apis/resource.k8s.io/v1/{resource}/nameSample"
    )
    code, got, _ = raw("GET", path)
    assert (code, got) == (200, expected)


# --- server-side defaults and claim status rules -------------------------------------------


def test_taints_get_a_time_added(resource_api, make_slice, make_device):
    taint = {"key": "example.com/maintenance", "effect": "NoSchedule"}
    created = resource_api.create_resource_slice(
        make_slice(devices=[make_device("gpu-0", taints=[taint])])
    )
    assert created.spec.devices[0].taints[0].time_added is not None


def test_claim_requests_get_default_allocation_mode(resource_api, make_claim):
    created = resource_api.create_namespaced_resource_claim("default", make_claim())
    exactly = created.spec.devices.requests[0].exactly
    assert (exactly.allocation_mode, exactly.count) == ("ExactCount", 1)


def test_claim_status_devices_must_be_allocated(resource_api, make_claim):
    claim = resource_api.create_namespaced_resource_claim("default", make_claim())
    claim.status = {
        "allocation": _allocation("gpu-0"),
        "devices": [{"driver": DRIVER, "pool": NODE, "device": "gpu-7"}],
    }
    with pytest.raises(ApiException) as err:
        resource_api.replace_namespaced_resource_claim_status("claim-1", "default", claim)
    assert err.value.status == 422
    assert _status(err.value)["details"]["causes"][0]["field"] == "status.devices[0]"


def test_claim_allocation_cannot_change_once_set(resource_api, make_claim):
    claim = resource_api.create_namespaced_resource_claim("default", make_claim())
    claim.status = {"allocation": _allocation("gpu-0")}
    allocated = resource_api.replace_namespaced_resource_claim_status("claim-1", "default", claim)
    allocated.status = {"allocation": _allocation("gpu-1")}
    with pytest.raises(ApiException) as err:
        resource_api.replace_namespaced_resource_claim_status("claim-1", "default", allocated)
    assert err.value.status == 422
    allocated.status = None  # deallocation is allowed
    cleared = resource_api.replace_namespaced_resource_claim_status("claim-1", "default", allocated)
    assert cleared.status is None or cleared.status.allocation is None
