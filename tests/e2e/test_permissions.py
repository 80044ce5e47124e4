"""The plugin with only the permissions our manifests grant: deploy/base's RBAC and
admission policy plus the claim-status component, enforced by the real API server (the
stand-in checks neither).

The plugin runs as a host process with the ServiceAccount token a DaemonSet pod on this
node would get (a TokenRequest bound to a Pod bound to the node, so the token carries the
node name the admission policy compares with)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from simdra._driver.testing.cluster import wait_until

from .conftest import REPO, logs_dir
from .controlplane import ControlPlane
from .forged import SLICES, Caller, denied, slice_body
from .hostnode import DRIVER, HostNode
from .workloads import Workloads, exactly, unique

NODE = "e2e-rbac"
NAMESPACE = "simdra"
SERVICE_ACCOUNT = "simdra-kubelet-plugin"
MANIFESTS = ("deploy/base/namespace.yaml", "deploy/base/serviceaccount.yaml",
             "deploy/base/rbac.yaml", "deploy/base/admission-policy.yaml",
             "deploy/components/claim-status/rbac.yaml")
JSON = dict[str, Any]


def _pod_token(cp: ControlPlane) -> str:
    """A token for our ServiceAccount, bound to a pod on NODE, as the kubelet would get."""
    core = client.CoreV1Api(cp.api_client())
    pod = core.create_namespaced_pod(NAMESPACE, {
        "metadata": {"name": f"simdra-kubelet-plugin-{NODE}"},
        "spec": {"nodeName": NODE, "serviceAccountName": SERVICE_ACCOUNT,
                 "automountServiceAccountToken": False,
                 "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "plugin", "image": "simdra-e2e/none:never-pulled"}]},
    })
    request = {"spec": {"expirationSeconds": 3600, "boundObjectRef": {
        "apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name,
        "uid": pod.metadata.uid}}}
    answer = core.create_namespaced_service_account_token(SERVICE_ACCOUNT, NAMESPACE, request)
    return str(answer.status.token)


@pytest.fixture(scope="module")
def restricted_node(control_plane: ControlPlane) -> Iterator[tuple[HostNode, str]]:
    """An emulated node whose plugin holds only our manifests' permissions."""
    core = client.CoreV1Api(control_plane.api_client())

    def not_terminating() -> bool:  # another scenario may just have removed it
        found = [n for n in core.list_namespace().items if n.metadata.name == NAMESPACE]
        return not found or found[0].status.phase != "Terminating"
    wait_until(not_terminating, 120, f"namespace {NAMESPACE} not terminating")
    for manifest in MANIFESTS:
        control_plane.kubectl("apply", "-f", str(REPO / manifest))
    workdir = logs_dir() / NODE
    workdir.mkdir(parents=True, exist_ok=True)
    node = HostNode(control_plane, NODE, workdir, "nic", 1,
                    extra_args=("--claim-status", "true"),
                    kubeconfig=workdir / "plugin.kubeconfig")
    node.register()
    token = _pod_token(control_plane)
    control_plane.write_kubeconfig(node.kubeconfig, token=token,
                                   user=f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}")
    try:
        node.start_plugin()
        yield node, token
    finally:
        node.stop()


def _as_plugin(cp: ControlPlane, token: str, method: str, path: str,
               body: JSON | None = None) -> tuple[int, str]:
    request = urllib.request.Request(
        f"{cp.server}{path}", method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    context = ssl.create_default_context(cafile=str(cp.certs.ca_cert))
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def test_publishes_with_least_privilege(restricted_node: tuple[HostNode, str]) -> None:
    node, _ = restricted_node
    (pool,) = node.pools_complete()
    assert pool == NODE
    errors = {k: v for k, v in node.metrics().items()
              if k.startswith("simdra_publish_errors_total") and v}
    assert errors == {}, f"writes refused with our RBAC: {errors}; log: {node.workdir}"


def test_admission_policy_confines_the_plugin_to_its_node(
        control_plane: ControlPlane, restricted_node: tuple[HostNode, str]) -> None:
    _, token = restricted_node
    foreign = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": "foreign-slice"},
               "spec": {"driver": DRIVER, "nodeName": "some-other-node",
                        "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                        "devices": []}}

    def answer() -> tuple[int, str] | None:
        # dryRun: admission runs, nothing is stored even while the policy lets it pass.
        status, text = _as_plugin(control_plane, token, "POST",
                                  "/apis/resource.k8s.io/v1/resourceslices?dryRun=All", foreign)
        return None if status == 201 else (status, text)

    # The API server enforces a new policy once its policy informer has it and the type
    # check ran, a moment after `kubectl apply`; a write may pass until then.
    status, text = wait_until(answer, 30, "the admission policy in effect")
    # A ValidatingAdmissionPolicy denial is 422 Invalid unless the policy names a reason.
    assert status == 422 and "may only write ResourceSlices of that node" in text, text
    status, text = _as_plugin(control_plane, token, "GET", "/api/v1/namespaces/default/pods")
    assert status == 403, f"the plugin can list pods: {text[:200]}"


OTHER_DRIVER = "other.example.com"


@pytest.fixture
def other_drivers_slice(control_plane: ControlPlane) -> Iterator[JSON]:
    """A slice of another driver on the plugin's own node, as that driver published it."""
    resource = client.ResourceV1Api(control_plane.api_client())
    body = slice_body("e2e-rbac-other-driver", OTHER_DRIVER, NODE)
    stored = resource.create_resource_slice(body, _preload_content=False)
    try:
        yield dict(json.loads(stored.data))
    finally:
        resource.delete_resource_slice(body["metadata"]["name"])


def test_admission_policy_confines_the_plugin_to_its_driver(
        control_plane: ControlPlane, restricted_node: tuple[HostNode, str],
        other_drivers_slice: JSON) -> None:
    """A plugin started with another driver's name (a typo, a copied values file) can
    neither create, overwrite nor delete that driver's slices on its own node."""
    plugin = Caller(control_plane, token=restricted_node[1])
    message = (f"the simdra kubelet plugin of driver '{DRIVER}' may only write "
               f"ResourceSlices of that driver, not slices of driver '{OTHER_DRIVER}'")
    path = f"{SLICES}/{other_drivers_slice['metadata']['name']}"
    create = plugin.refused("POST", SLICES, slice_body("e2e-rbac-forged", OTHER_DRIVER, NODE))
    assert denied(create, message), create
    update = plugin.refused("PUT", path, other_drivers_slice)
    assert denied(update, message), update
    delete = plugin.refused("DELETE", path)
    assert denied(delete, message), delete
    # Its own driver's slices of its node it still writes.
    status, text = plugin.send("POST", SLICES, slice_body("e2e-rbac-own", DRIVER, NODE))
    assert status == 201, text


def test_claim_status_written_and_removed(restricted_node: tuple[HostNode, str],
                                          workloads: Workloads) -> None:
    node, _ = restricted_node
    template = workloads.template(unique("status-nic"), [
        exactly("net", "nic.dra.example.com", capacity={"bandwidth": "1G"})])
    pod = workloads.pod(unique("status"), {"net": template}, node=NODE)
    assert workloads.wait_scheduled(pod) == NODE
    node.prepare_pod(workloads.namespace, pod)
    (ref,) = node.pod_claims(workloads.namespace, pod)

    def devices_status() -> list[JSON]:
        claim = workloads.claims_of(pod)["net"]
        return list(claim.get("status", {}).get("devices") or [])
    (entry,) = wait_until(devices_status, 30, "status.devices written by the plugin")
    assert (entry["driver"], entry["device"]) == (DRIVER, "nic-0")
    assert entry.get("shareID")
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in entry["conditions"])
    assert entry["networkData"]["interfaceName"] == "sim0"

    node.unprepare_pod([ref])
    wait_until(lambda: not devices_status(), 30, "status.devices removed on unprepare")
    workloads.delete_pod(pod)

