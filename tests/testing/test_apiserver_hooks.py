"""Test hooks: injected failures, the request log, feature gates, direct store access."""

from __future__ import annotations

import json
import socket
import threading

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.kubeconfig import client_from_kubeconfig


def _shared_device(make_device):
    device = make_device("nic-0", allowMultipleAllocations=True)
    device["capacity"] = {
        "bandwidth": {
            "value": "10G",
            "requestPolicy": {"default": "1M", "validRange": {"min": "1M", "step": "8"}},
        }
    }
    device["taints"] = [{"key": "example.com/maintenance", "effect": "NoSchedule"}]
    return device


# --- injected failures -----------------------------------------------------------------


def test_injected_429_carries_retry_after(server, resource_api, make_slice):
    server.inject_failure("create", "resourceslices", 429, retry_after=3)
    with pytest.raises(ApiException) as err:
        resource_api.create_resource_slice(make_slice())
    assert err.value.status == 429
    assert err.value.headers["Retry-After"] == "3"
    status = json.loads(err.value.body)
    assert status["reason"] == "TooManyRequests"
    assert status["details"]["retryAfterSeconds"] == 3
    # Only the next request failed: the retry goes through.
    assert resource_api.create_resource_slice(make_slice()).metadata.name


def test_injected_500_fails_count_requests(server, resource_api, make_slice):
    server.inject_failure("create", "resourceslices", 500, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            resource_api.create_resource_slice(make_slice())
        assert err.value.status == 500
        assert json.loads(err.value.body)["reason"] == "InternalError"
    resource_api.create_resource_slice(make_slice())
    assert len(server.objects("resourceslices")) == 1
    assert server.faults.pending() == 0


def test_injected_failure_matches_verb_and_resource(server, resource_api, make_slice, make_claim):
    server.inject_failure("update", "resourceclaims/status", 409)
    created = resource_api.create_resource_slice(make_slice())  # other verb and resource
    resource_api.create_namespaced_resource_claim("default", make_claim())
    claim = resource_api.read_namespaced_resource_claim("claim-1", "default")
    resource_api.replace_namespaced_resource_claim("claim-1", "default", claim)  # main endpoint
    with pytest.raises(ApiException) as err:
        resource_api.replace_namespaced_resource_claim_status("claim-1", "default", claim)
    assert err.value.status == 409
    assert created.metadata.name


def test_client_retries_a_get_answered_429_with_retry_after(server, resource_api, make_slice):
    """urllib3 (under the official client) honours Retry-After for idempotent verbs."""
    created = resource_api.create_resource_slice(make_slice())
    server.inject_failure("get", "resourceslices", 429, retry_after=0)
    assert resource_api.read_resource_slice(created.metadata.name).metadata.uid
    assert [r.code for r in server.request_log.entries("get")] == [429, 200]


def test_injecting_unknown_verbs_or_codes_is_refused(server):
    with pytest.raises(ValueError, match="verb"):
        server.inject_failure("apply", "resourceslices", 500)
    with pytest.raises(ValueError, match="418"):
        server.inject_failure("create", "resourceslices", 418)


# --- request log ----------------------------------------------------------------------


def test_request_log_counts_writes_not_reads(server, resource_api, make_slice):
    created = resource_api.create_resource_slice(make_slice())
    resource_api.list_resource_slice()
    resource_api.read_resource_slice(created.metadata.name)
    stream = resource_api.list_resource_slice(watch=True, _preload_content=False)
    stream.close()
    assert server.writes() == 1

    resource_api.replace_resource_slice(created.metadata.name, created)  # a no-op update
    resource_api.delete_resource_slice(created.metadata.name)
    assert server.writes() == 3
    assert server.writes("resourceclaims") == 0
    counts = server.request_log.counts()
    assert counts[("create", "resourceslices")] == 1
    assert counts[("list", "resourceslices")] == 1
    assert counts[("watch", "resourceslices")] == 1
    assert counts[("get", "resourceslices")] == 1

    server.request_log.clear()
    assert server.writes() == 0


# --- feature gates ---------------------------------------------------------------------


def test_disabled_gates_drop_fields_silently(make_slice, make_device):
    with APIServer(
        feature_gates={"DRAConsumableCapacity": False, "DRADeviceTaints": False}
    ) as server:
        api_client = server.api_client()
        api = client.ResourceV1Api(api_client)
        stored = api.create_resource_slice(make_slice(devices=[_shared_device(make_device)]))
        api_client.close()
    device = stored.spec.devices[0]
    assert device.allow_multiple_allocations is None
    assert device.capacity["bandwidth"].request_policy is None
    assert device.capacity["bandwidth"].value == "10G"
    assert device.taints is None
    assert device.attributes["model"].string == "sim-a100"


@pytest.mark.parametrize("gate", [True, False])
def test_node_allocatable_mappings_are_kept_only_with_their_gate(gate, make_slice, make_device):
    """As a 1.37 server: kept where DRANodeAllocatableResources is on, else dropped."""
    device = make_device("cpu-0", allowMultipleAllocations=True,
                         capacity={"cpus": {"value": "8"}})
    device["nodeAllocatableResources"] = {
        "cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "1"}}}
    with APIServer(kubernetes_version="1.37",
                   feature_gates={"DRANodeAllocatableResources": gate}) as server:
        stored = server.rest_client().request("POST", "/apis/resource.k8s.io/v1/resourceslices",
                                              body=make_slice(devices=[device]))
    kept = stored["spec"]["devices"][0].get("nodeAllocatableResources")
    assert kept == (device["nodeAllocatableResources"] if gate else None)


def test_enabled_gates_keep_fields(resource_api, make_slice, make_device):
    stored = resource_api.create_resource_slice(make_slice(devices=[_shared_device(make_device)]))
    device = stored.spec.devices[0]
    assert device.allow_multiple_allocations is True
    assert device.capacity["bandwidth"].request_policy.default == "1M"
    assert device.taints[0].effect == "NoSchedule"


def test_gate_turned_off_later_keeps_fields_already_in_use(
    server, resource_api, make_slice, make_device
):
    stored = resource_api.create_resource_slice(make_slice(devices=[_shared_device(make_device)]))
    server.feature_gates["DRAConsumableCapacity"] = False
    stored.spec.pool.generation = 1
    updated = resource_api.replace_resource_slice(stored.metadata.name, stored)
    assert updated.spec.devices[0].allow_multiple_allocations is True

    fresh = resource_api.create_resource_slice(make_slice(devices=[_shared_device(make_device)]))
    assert fresh.spec.devices[0].allow_multiple_allocations is None


# --- direct store access ------------------------------------------------------------------


def test_put_object_is_visible_over_http_and_to_watchers(server, resource_api, make_slice):
    rv = resource_api.list_resource_slice().metadata.resource_version
    body = make_slice(name="direct")
    stored = server.put_object("resourceslices", body)
    assert stored["metadata"]["uid"] and stored["metadata"]["resourceVersion"]

    got = resource_api.read_resource_slice("direct")
    assert got.metadata.uid == stored["metadata"]["uid"]
    w = watch.Watch()
    for event in w.stream(
        resource_api.list_resource_slice, resource_version=rv, timeout_seconds=5, deserialize=False
    ):
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "direct")
        break
    w.stop()
    assert server.delete_object("resourceslices", "direct")
    assert not server.delete_object("resourceslices", "direct")
    assert server.writes() == 0  # direct access is not API traffic


def test_objects_are_copies(server, make_slice):
    server.put_object("resourceslices", make_slice(name="s"))
    server.objects("resourceslices")[0]["spec"]["driver"] = "changed.example.com"
    server.get_object("resourceslices", "s")["spec"]["pool"]["generation"] = 9
    stored = server.get_object("resourceslices", "s")
    assert stored["spec"]["driver"] == "gpu.example.com"
    assert stored["spec"]["pool"]["generation"] == 0


def test_direct_access_is_thread_safe(server, make_slice):
    def writer(prefix: str) -> None:
        for i in range(50):
            server.put_object("resourceslices", make_slice(name=f"{prefix}-{i}"))

    threads = [threading.Thread(target=writer, args=(f"w{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = {s["metadata"]["resourceVersion"] for s in server.objects("resourceslices")}
    assert len(versions) == 200  # every write got its own resourceVersion


# --- kubeconfig and shutdown ----------------------------------------------------------------


def test_kubeconfig_points_at_the_server(server, tmp_path):
    path = server.write_kubeconfig(tmp_path / "sub" / "kubeconfig")
    config = yaml.safe_load(path.read_text())
    assert config["clusters"][0]["cluster"]["server"] == server.url
    assert server.url.startswith("http://127.0.0.1:")
    api_client = client_from_kubeconfig(path)
    try:
        assert client.CoreV1Api(api_client).list_node().items == []
    finally:
        api_client.close()


def test_stop_leaves_no_threads_and_closes_the_port(make_slice):
    before = set(threading.enumerate())
    server = APIServer().start()
    api_client = server.api_client()
    client.ResourceV1Api(api_client).create_resource_slice(make_slice())  # keep-alive conn
    port = server.port
    server.stop()
    server.stop()  # idempotent
    api_client.close()
    assert set(threading.enumerate()) - before == set()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
