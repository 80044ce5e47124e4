"""The registration socket on the real node serves Registration only: a pod that mounts
the kubelet's plugins_registry directory, as every node-driver-registrar and other DRA
drivers do, cannot unprepare a running pod's claim through it."""

from __future__ import annotations

from pathlib import Path

from .. import realnode
from ..realnode import DATA_DIR, JSON, NAMESPACE, Kube, PluginDeployment, cdi_files, spec_file, wait

GPU = "gpu.dra.example.com"
REGISTRY = "/var/lib/kubelet/plugins_registry"  # the kubelet's root dir (tests/e2e/node.py)
MOUNT = "/registration"  # where a node-driver-registrar mounts it

# Run in the plugin's image (it has python, grpcio and the generated stubs): find the
# driver's registration socket, GetInfo to show it is reachable, then
# NodeUnprepareResources in both versions.
_AGENT = """
import glob, sys, grpc
from simdra._driver.kubelet.gen import dra_v1_pb2, dra_v1_pb2_grpc
from simdra._driver.kubelet.gen import dra_v1beta1_pb2, dra_v1beta1_pb2_grpc
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2 as reg
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as reg_grpc
pattern, ns, name, uid = sys.argv[1:]
[sock] = glob.glob(pattern)  # with --pod-uid the name carries the plugin pod's UID
with grpc.insecure_channel("unix:" + sock) as ch:
    info = reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=10)
    print("GetInfo", info.name)
    for version, pb, stubs in (("v1", dra_v1_pb2, dra_v1_pb2_grpc),
                               ("v1beta1", dra_v1beta1_pb2, dra_v1beta1_pb2_grpc)):
        claim = pb.Claim(namespace=ns, name=name, uid=uid)
        request = pb.NodeUnprepareResourcesRequest(claims=[claim])
        try:
            answer = stubs.DRAPluginStub(ch).NodeUnprepareResources(request, timeout=10)
            print(version, "OK", answer.claims[uid].error or "unprepared")
        except grpc.RpcError as err:
            print(version, err.code().name)
"""


def _agent_pod(kube: Kube, name: str, claim: JSON) -> None:
    meta = claim["metadata"]
    socket = f"{MOUNT}/{realnode.DRIVER}*-reg.sock"
    agent = {
        "name": "agent",
        "image": realnode.SIMDRA_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["python", "-c", _AGENT, socket, meta["namespace"], meta["name"], meta["uid"]],
        "volumeMounts": [{"name": "registry", "mountPath": MOUNT}],
    }
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": realnode.on_real_node({
            "containers": [agent], "restartPolicy": "Never",
            "volumes": [{"name": "registry",
                         "hostPath": {"path": REGISTRY, "type": "Directory"}}],
        }),
    }
    kube.core.create_namespaced_pod(NAMESPACE, body)


def test_registration_socket_refuses_unprepare_of_a_running_pods_claim(
    kube: Kube, plugin: PluginDeployment
) -> None:
    """A pod with plugins_registry mounted calls NodeUnprepareResources (v1, v1beta1) on
    the registration socket for the claim of a running pod: UNIMPLEMENTED, and the claim
    stays prepared (pod running, checkpoint record and CDI spec still on the node)."""
    kube.template("gpu-boundary", GPU)
    kube.pod("holder", "gpu-boundary")
    claim = kube.claim_of(kube.wait_running("holder"))
    record = Path(DATA_DIR, "claims", f"{claim['metadata']['uid']}.json")
    assert record.is_file() and spec_file(claim) in cdi_files()

    _agent_pod(kube, "agent", claim)
    wait("pod agent finished", lambda: (kube.get_pod("agent") or {}).get("status", {})
         .get("phase") in ("Succeeded", "Failed"), 120, kube.node.kubelet_log,
         lambda: kube.pod_summary("agent"))
    said = kube.log("agent").split("\n")
    assert said[:3] == [f"GetInfo {realnode.DRIVER}", "v1 UNIMPLEMENTED",
                        "v1beta1 UNIMPLEMENTED"], said

    assert (kube.get_pod("holder") or {}).get("status", {}).get("phase") == "Running"
    assert record.is_file(), f"checkpoint record {record} removed"
    assert spec_file(claim) in cdi_files()
