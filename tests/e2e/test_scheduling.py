"""The real controller-manager and scheduler allocate from our slices; the kubelet emulator
then prepares those real claims through the plugin's socket.

Scenarios: exclusive GPUs, shared NIC bandwidth, partitions, admin access, device taints.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from simdra._driver.core.quantity import parse_quantity
from simdra._driver.testing.cluster import wait_until
from simdra._driver.testing.scheduler import allocate
from tests.testing.apiserver_corpus import MODELLED_RELEASE, minor_of

from . import releases
from .conftest import GPU_NODE, MIG_NODE
from .controlplane import ControlPlane
from .hostnode import DRIVER, HostNode
from .workloads import Workloads, exactly, unique

GPU = "gpu.dra.example.com"
NIC = "nic.dra.example.com"


def _env_of(node: HostNode, claim_uid: str) -> dict[str, str]:
    """Every env entry the CDI spec of one claim sets, over all its devices."""
    specs = [s for name, s in node.cdi_specs().items() if claim_uid in name]
    assert specs, f"no CDI spec for claim {claim_uid} in {node.cdi_root}"
    env = {}
    for spec in specs:
        edits = [spec.get("containerEdits", {})] + [
            d.get("containerEdits", {}) for d in spec.get("devices", [])]
        for edit in edits:
            for entry in edit.get("env", []):
                key, _, value = entry.partition("=")
                env[key] = value
    return env


def env_keys(env: dict[str, str]) -> dict[str, str]:
    """KEY -> value of simdra's `SIMDRA_DEVICE_<8 hex>_<KEY>` variables (one device)."""
    prefix = "SIMDRA_DEVICE_"
    return {k[len(prefix) + 9:]: v for k, v in env.items() if k.startswith(prefix)}


def _run(workloads: Workloads, node: HostNode, pod: str) -> dict[str, dict[str, object]]:
    """Wait for the pod to be bound to `node`, then prepare its claims as the kubelet
    would; returns the prepare answer."""
    assert workloads.wait_scheduled(pod) == node.name
    return node.prepare_pod(workloads.namespace, pod)


def _finish(workloads: Workloads, node: HostNode, pod: str) -> None:
    """Unprepare the pod's claims, delete it and wait until its claims are gone."""
    refs = node.pod_claims(workloads.namespace, pod)
    node.unprepare_pod(refs)
    workloads.delete_pod(pod)
    for ref in refs:
        assert not [n for n in node.cdi_specs() if ref.uid in n], f"CDI spec of {ref} left"


def _fault(node: HostNode, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "simdra", "fault", "--plugin-dir",
                    str(node.plugins / DRIVER), *args], check=True, capture_output=True)


def test_one_gpu_per_pod_and_too_many_stays_pending(gpu_node: HostNode,
                                                   workloads: Workloads) -> None:
    template = workloads.template(unique("one-gpu"), [exactly("gpu", GPU, count=1)])
    pods = [workloads.pod(unique("gpu-pod"), {"gpu": template}, node=GPU_NODE)
            for _ in range(2)]
    devices = []
    for pod in pods:
        answer = _run(workloads, gpu_node, pod)
        (uid, entry), = answer.items()
        (device,) = entry["devices"]
        devices.append(device["device_name"])
        env = _env_of(gpu_node, uid)
        assert env_keys(env).get("NAME") == device["device_name"], env
    assert sorted(devices) == ["gpu-0", "gpu-1"]

    greedy = workloads.template(unique("three-gpus"), [exactly("gpus", GPU, count=3)])
    pending = workloads.pod(unique("greedy"), {"gpu": greedy}, node=GPU_NODE)
    reason = workloads.wait_unschedulable(pending)
    assert "Unschedulable" in reason and "cannot allocate all claims" in reason, reason
    for pod in pods:
        _finish(workloads, gpu_node, pod)


def test_two_pods_share_one_nic_and_overcommit_waits(gpu_node: HostNode,
                                                    workloads: Workloads,
                                                    control_plane: ControlPlane) -> None:
    releases.require_capacity_requests(control_plane)
    one_nic = ['device.attributes["dra.example.com"].interfaceName == "sim0"']
    template = workloads.template(unique("nic-1g"), [
        exactly("net", NIC, selectors=one_nic, capacity={"bandwidth": "1000000001"})])
    pods = [workloads.pod(unique("nic-pod"), {"net": template}, node=GPU_NODE)
            for _ in range(2)]
    shares = []
    for pod in pods:
        _run(workloads, gpu_node, pod)
        (result,) = workloads.allocated_devices(pod)["net"]
        assert result["device"] == "nic-0"
        # requestPolicy: min 1M, step 8 -> rounded up to the next step, as we publish.
        assert result["consumedCapacity"] == {"bandwidth": "1000000008"}
        shares.append(result["shareID"])
    assert len(set(shares)) == 2

    rest = workloads.template(unique("nic-9g"), [
        exactly("net", NIC, selectors=one_nic, capacity={"bandwidth": "9G"})])
    pending = workloads.pod(unique("nic-greedy"), {"net": rest}, node=GPU_NODE)
    assert "cannot allocate all claims" in workloads.wait_unschedulable(pending)
    for pod in pods:
        _finish(workloads, gpu_node, pod)
    # Capacity is free again: the waiting pod now fits.
    assert workloads.wait_scheduled(pending, timeout=90) == GPU_NODE


def test_partitions_side_by_side_and_whole_gpu_waits(mig_node: HostNode,
                                                    workloads: Workloads) -> None:
    three_g = workloads.template(unique("mig-3g"), [exactly(
        "part", GPU, selectors=['device.attributes["dra.example.com"].profile == "3g.40gb"'])])
    pods = [workloads.pod(unique("mig-pod"), {"part": three_g}, node=MIG_NODE)
            for _ in range(2)]
    taken = []
    for pod in pods:
        _run(workloads, mig_node, pod)
        (result,) = workloads.allocated_devices(pod)["part"]
        taken.append(result["device"])
    assert sorted(taken) == ["gpu-0-3g-0", "gpu-0-3g-1"]

    whole = workloads.template(unique("mig-whole"), [exactly(
        "gpu", GPU, selectors=['device.attributes["dra.example.com"].profile == "7g.80gb"'])])
    pending = workloads.pod(unique("mig-whole"), {"gpu": whole}, node=MIG_NODE)
    assert "cannot allocate all claims" in workloads.wait_unschedulable(pending)
    for pod in pods:
        _finish(workloads, mig_node, pod)
    assert workloads.wait_scheduled(pending, timeout=90) == MIG_NODE
    _run(workloads, mig_node, pending)
    _finish(workloads, mig_node, pending)


def test_admin_access_claim(gpu_node: HostNode, workloads: Workloads) -> None:
    core = workloads.core
    namespace = unique("admin")
    core.create_namespace({"metadata": {"name": namespace, "labels": {
        "resource.kubernetes.io/admin-access": "true"}}})
    wait_until(lambda: any(sa.metadata.name == "default" for sa in
                           core.list_namespaced_service_account(namespace).items),
               30, f"default ServiceAccount in {namespace}")
    user = workloads.template(unique("user-gpu"), [exactly(
        "gpu", GPU, selectors=['device.attributes["dra.example.com"].index == 0'])])
    user_pod = workloads.pod(unique("user"), {"gpu": user}, node=GPU_NODE)
    _run(workloads, gpu_node, user_pod)
    admin = Workloads(workloads.core.api_client, namespace, cp=workloads.cp)
    try:
        template = admin.template("monitor", [exactly(
            "gpu", GPU, admin_access=True,
            selectors=['device.attributes["dra.example.com"].index == 0'])])
        pod = admin.pod("monitor", {"gpu": template}, node=GPU_NODE)
        answer = _run(admin, gpu_node, pod)
        (uid, _), = answer.items()
        (result,) = admin.allocated_devices(pod)["gpu"]
        assert result["device"] == "gpu-0" and result.get("adminAccess") is True
        assert env_keys(_env_of(gpu_node, uid)).get("ADMIN_ACCESS") == "true"
        _finish(admin, gpu_node, pod)
    finally:
        admin.delete_all()
        core.delete_namespace(namespace)
    _finish(workloads, gpu_node, user_pod)


def test_unhealthy_device_is_tainted_and_not_picked(gpu_node: HostNode,
                                                    workloads: Workloads) -> None:
    def tainted(name: str) -> bool:
        for item in gpu_node.slices():
            for device in item["spec"].get("devices", []):
                if device["name"] == name and device.get("taints"):
                    return True
        return False

    _fault(gpu_node, "gpu-0", "unhealthy")
    try:
        wait_until(lambda: tainted("gpu-0"), 30, "gpu-0 tainted in its slice")
        template = workloads.template(unique("taint-gpu"), [exactly("gpu", GPU)])
        first = workloads.pod(unique("taint"), {"gpu": template}, node=GPU_NODE)
        _run(workloads, gpu_node, first)
        (result,) = workloads.allocated_devices(first)["gpu"]
        assert result["device"] == "gpu-1"
        second = workloads.pod(unique("taint"), {"gpu": template}, node=GPU_NODE)
        assert "cannot allocate all claims" in workloads.wait_unschedulable(second)
    finally:
        _fault(gpu_node, "gpu-0", "healthy")
    wait_until(lambda: not tainted("gpu-0"), 30, "gpu-0 taint removed")
    assert workloads.wait_scheduled(second, timeout=90) == GPU_NODE
    (result,) = workloads.allocated_devices(second)["gpu"]
    assert result["device"] == "gpu-0"
    _run(workloads, gpu_node, second)
    _finish(workloads, gpu_node, second)
    _finish(workloads, gpu_node, first)


@pytest.mark.parametrize("asked", [None, "1k", "1M", "1G", "2G", "1000000001", "1999999999",
                                   "1500M"])
def test_consumed_capacity_written_as_the_scheduler_does(asked: str | None,
                                                         gpu_node: HostNode,
                                                         workloads: Workloads,
                                                         control_plane: ControlPlane) -> None:
    """Our allocator writes the same consumedCapacity strings as the real scheduler of the
    release it models (1.37: a step-rounded amount in the request's format); on the other
    releases the amounts agree (1.36 wrote every stepped amount as a new BinarySI
    quantity: 2G as 1953125Ki)."""
    if asked is not None:
        releases.require_capacity_requests(control_plane)
    selectors = ['device.attributes["dra.example.com"].interfaceName == "sim1"']
    capacity = {"bandwidth": asked} if asked else None
    template = workloads.template(unique("nic-text"), [
        exactly("net", NIC, selectors=selectors, capacity=capacity)])
    pod = workloads.pod(unique("nic-text"), {"net": template}, node=GPU_NODE)
    assert workloads.wait_scheduled(pod) == GPU_NODE
    (real,) = workloads.allocated_devices(pod)["net"]
    claim = {"metadata": {"name": "c", "namespace": "default", "uid": "text"},
             "spec": {"devices": {"requests": [
                 exactly("net", NIC, selectors=selectors, capacity=capacity)]}}}
    raw = workloads.resource.read_device_class(NIC, _preload_content=False)
    ours = allocate(claim, gpu_node.slices(), {NIC: json.loads(raw.data)},
                    node_name=gpu_node.name)
    (mine,) = ours["devices"]["results"]
    if minor_of(control_plane.version()) == MODELLED_RELEASE:
        assert mine["consumedCapacity"] == real["consumedCapacity"]
    else:
        amounts = {k: parse_quantity(v) for k, v in real["consumedCapacity"].items()}
        assert {k: parse_quantity(v) for k, v in mine["consumedCapacity"].items()} == amounts
    workloads.delete_pod(pod)
