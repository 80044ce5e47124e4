"""The Allocator wrapper against the API stand-in, over real HTTP with the official client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient, ResourceV1Api

from simdra._driver.testing.allocation.builders import claim, device_class, exactly, resource_slice
from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.scheduler import AllocationError, Allocator

NIC = "nic.example.com"
NAMESPACE = "default"


def shared_nic() -> dict[str, Any]:
    policy = {"default": "1M", "validRange": {"min": "1M", "step": "8"}}
    return {
        "name": "nic-0",
        "allowMultipleAllocations": True,
        "capacity": {"bandwidth": {"value": "10G", "requestPolicy": policy}},
    }


def nic_claim(name: str, bandwidth: str) -> dict[str, Any]:
    return claim(name, exactly("nic", NIC, capacity={"requests": {"bandwidth": bandwidth}}))


@pytest.fixture
def client() -> Iterator[ApiClient]:
    with APIServer() as server:
        api_client = server.api_client()
        try:
            yield api_client
        finally:
            api_client.close()


def read_claim(api: ResourceV1Api, name: str) -> dict[str, Any]:
    response = api.read_namespaced_resource_claim(name, NAMESPACE, _preload_content=False)
    return json.loads(response.data)


def test_allocator_writes_allocation_and_reservation_through_the_api(client):
    api = ResourceV1Api(client)
    api.create_device_class(device_class(NIC))
    api.create_resource_slice(resource_slice(NIC, [shared_nic()]))
    for name, bandwidth in (("a", "1G"), ("b", "9G"), ("c", "1G")):
        api.create_namespaced_resource_claim(NAMESPACE, nic_claim(name, bandwidth))
    allocator = Allocator(client)

    written = allocator.allocate(NAMESPACE, "a", pod_name="pod-a", pod_uid="uid-pod-a")

    stored = read_claim(api, "a")
    assert stored["status"] == written["status"]
    (result,) = stored["status"]["allocation"]["devices"]["results"]
    assert (result["request"], result["device"]) == ("nic", "nic-0")
    assert result["consumedCapacity"] == {"bandwidth": "1G"}
    assert result["shareID"]
    assert stored["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0][
        "matchFields"
    ] == [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]
    assert stored["status"]["reservedFor"] == [
        {"resource": "pods", "name": "pod-a", "uid": "uid-pod-a"}
    ]

    # Other claims' allocations, listed from the API, count against the device.
    allocator.allocate(NAMESPACE, "b")
    with pytest.raises(
        AllocationError, match=r"has 1G of bandwidth left \(nic-0: 10G of 10G used\)"
    ):
        allocator.allocate(NAMESPACE, "c")
    assert "allocation" not in (read_claim(api, "c").get("status") or {})

    # A second pod sharing claim a keeps the allocation and joins reservedFor.
    again = allocator.allocate(NAMESPACE, "a", pod_name="pod-b", pod_uid="uid-pod-b")
    assert again["status"]["allocation"] == stored["status"]["allocation"]
    assert [r["name"] for r in read_claim(api, "a")["status"]["reservedFor"]] == ["pod-a", "pod-b"]

    # Releasing b frees its share for c.
    allocator.deallocate(NAMESPACE, "b")
    allocated = allocator.allocate(NAMESPACE, "c")
    assert allocated["status"]["allocation"]["devices"]["results"][0]["device"] == "nic-0"


def test_allocator_reserves_a_claim_for_a_pod_group(client):
    # DRAWorkloadResourceClaims: the scheduler names the PodGroup, and its pods share the
    # claim without being named; a second member's scheduling adds nothing.
    api = ResourceV1Api(client)
    api.create_device_class(device_class(NIC))
    api.create_resource_slice(resource_slice(NIC, [shared_nic()]))
    api.create_namespaced_resource_claim(NAMESPACE, nic_claim("group", "1G"))
    allocator = Allocator(client)

    first = allocator.allocate(NAMESPACE, "group", pod_group=("trainers", "uid-group"))
    again = allocator.allocate(NAMESPACE, "group", pod_group=("trainers", "uid-group"))

    group = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "trainers",
             "uid": "uid-group"}
    assert read_claim(api, "group")["status"]["reservedFor"] == [group]
    assert again["status"] == first["status"]
    with pytest.raises(ValueError, match="pod or for its PodGroup"):
        allocator.allocate(NAMESPACE, "group", pod_name="p", pod_uid="u",
                           pod_group=("trainers", "uid-group"))


def test_allocator_passes_over_a_device_a_taint_rule_taints(client):
    """A DeviceTaintRule in the API counts as the device's own taint, as the scheduler
    counts it: the claim gets the other NIC."""
    api = ResourceV1Api(client)
    api.create_device_class(device_class(NIC))
    api.create_resource_slice(resource_slice(NIC, [{"name": "nic-0"}, {"name": "nic-1"}]))
    api.create_namespaced_resource_claim(NAMESPACE, claim("one", exactly("nic", NIC)))
    api.create_device_taint_rule({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": "drain-nic-0"},
        "spec": {"deviceSelector": {"driver": NIC, "device": "nic-0"},
                 "taint": {"key": "example.com/drain", "effect": "NoSchedule"}}})

    written = Allocator(client).allocate(NAMESPACE, "one")

    (result,) = written["status"]["allocation"]["devices"]["results"]
    assert result["device"] == "nic-1"
