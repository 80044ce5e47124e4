"""Device exclusivity across a force deletion, on the real node.

kubeletplugin v0.38 documents the race: after `kubectl delete pod --force` (or a node
loss) the API objects go at once while the node tears the pod down later, so a
replacement pod's claim may be allocated the same device and prepared before the old
container has stopped; the driver must refuse it. The kubelet makes the window a couple
of seconds wide; here it is held open by stopping the kubelet (the old container keeps
running, its claim prepared), and the NodePrepareResources the restarting kubelet would
send for the replacement is sent to the plugin's DRA socket while it is. Then the kubelet
starts, ends the orphan, unprepares the old claim and prepares the new one itself.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import grpc

from simdra._driver.kubelet.gen import dra_v1_pb2, dra_v1_pb2_grpc
from simdra._driver.kubelet.sockets import is_instance_dra_socket

from ..realnode import (
    DATA_DIR,
    NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    container,
    exact_request,
    ledger_holders,
    unit_env,
    wait,
)

GPU = "gpu.dra.example.com"
GPU_3 = 'device.attributes["dra.example.com"].index == 3'


def _dra_socket() -> str:
    """The plugin's DRA socket on the node (rolling-update names carry the pod UID)."""
    found = [p for p in Path(DATA_DIR).iterdir()
             if is_instance_dra_socket(p.name) and stat.S_ISSOCK(p.lstat().st_mode)]
    assert found, f"no DRA socket in {DATA_DIR}"
    return str(max(found, key=lambda p: p.lstat().st_mtime))


def _prepare_as_the_kubelet(claim: dict[str, Any]) -> str:
    """NodePrepareResources v1 for one claim, as the kubelet sends it; the claim's error."""
    meta = claim["metadata"]
    request = dra_v1_pb2.NodePrepareResourcesRequest(claims=[dra_v1_pb2.Claim(
        namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])])
    with grpc.insecure_channel(f"unix:{_dra_socket()}") as channel:
        answer = dra_v1_pb2_grpc.DRAPluginStub(channel).NodePrepareResources(request, timeout=60)
    return str(answer.claims[meta["uid"]].error)


def _claim_for(kube: Kube, pod: str, claim: str) -> None:
    """A standalone claim of GPU 3 and a pod using it."""
    kube.claim(claim, [exact_request("gpu", GPU, GPU_3)])
    kube.create_pod(pod, [container("app", [{"name": "gpu"}])],
                    [{"name": "gpu", "resourceClaimName": claim}])


def test_node_replacement_claim_is_refused_while_the_old_container_runs(
    kube: Kube, plugin: PluginDeployment
) -> None:
    """The old pod's claim holds the device while its container runs: the replacement's
    claim, allocated the same device after a force deletion, is refused with a line
    naming the holder and the device; the old claim stays prepared; once the kubelet has
    ended the old container and unprepared its claim, the replacement runs on the
    device."""
    _claim_for(kube, "excl-old", "excl-a")
    kube.wait_running("excl-old")
    old = kube.read_claim("excl-a")
    [result] = allocated(old)
    device, old_uid = result["device"], old["metadata"]["uid"]
    assert ledger_holders(device) == [old_uid]
    seen: dict[str, str] = {}

    def force_delete_and_replace() -> None:
        kube.core.delete_namespaced_pod("excl-old", NAMESPACE, grace_period_seconds=0)
        wait("claim excl-a deallocated after the force deletion",
             lambda: not (kube.read_claim("excl-a").get("status") or {}).get("allocation"),
             30, kube.node.kubelet_log)
        _claim_for(kube, "excl-new", "excl-b")
        wait("claim excl-b allocated the old pod's device",
             lambda: bool((kube.read_claim("excl-b").get("status") or {}).get("allocation")),
             30, kube.node.kubelet_log)
        new = kube.read_claim("excl-b")
        assert [r["device"] for r in allocated(new)] == [device]
        seen["error"] = _prepare_as_the_kubelet(new)
        seen["holders"] = ",".join(ledger_holders(device))

    kube.node.restart_kubelet(while_stopped=force_delete_and_replace)
    assert f"already prepared exclusively for claim {old_uid}" in seen["error"] or (
        f"exclusive and already prepared for claim {old_uid}" in seen["error"]), seen
    assert device in seen["error"], seen
    assert seen["holders"] == old_uid, "the refused prepare took the device"

    kube.wait_running("excl-new", timeout=120)
    new_uid = kube.read_claim("excl-b")["metadata"]["uid"]
    assert ledger_holders(device) == [new_uid]
    [unit] = unit_env(kube.env("excl-new")).values()
    assert (unit["NAME"], unit["CLAIM_UID"]) == (device, new_uid)
