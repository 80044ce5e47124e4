"""The plugin's own life on the real node: its pod deleted, a rolling update while pods
start, and an install with helm instead of kustomize."""

from __future__ import annotations

import json
import re
import time

from .. import realnode
from ..realnode import (
    JSON,
    NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    cdi_files,
    exact_request,
    slice_device,
    spec_file,
    unit_env,
    wait,
)

GPU = "gpu.dra.example.com"


def _give_same_device(kube: Kube, name: str, held: JSON) -> JSON:
    """Claim `name`, pinned to the device of claim `held` by its published `index` (CEL
    sees no device names), given `held`'s very allocation: what a scheduler working
    from a stale view would write. The API server and the scheduler take it (neither
    checks one claim's devices against another's); only the plugin's ledger can refuse."""
    [result] = allocated(held)
    device = slice_device(kube.cp, kube.node.name, result["device"])
    assert device is not None, f"device {result['device']} is not published"
    index = int(device["attributes"]["index"]["int"])
    kube.claim(name, [exact_request(
        "dev", GPU, f'device.attributes["{realnode.DRIVER}"].index == {index}')])
    allocation = held["status"]["allocation"]
    kube.cp.kubectl("patch", "resourceclaim", name, "-n", NAMESPACE, "--subresource=status",
                    "--type=merge", "-p", json.dumps({"status": {"allocation": allocation}}))
    return kube.read_claim(name)


def test_node_plugin_pod_deleted_restarts(kube: Kube, plugin: PluginDeployment) -> None:
    """d. `kubectl delete pod` of the plugin: the DaemonSet starts a new one, the running
    pod keeps its device, the new instance still holds that device in its ledger (a
    second claim given the same exclusive GPU is refused at prepare, naming the device
    and the holder, and its pod waits), and a new pod still starts."""
    kube.template("gpu-d", GPU)
    kube.pod("before", "gpu-d")
    before = kube.wait_running("before")
    claim = kube.claim_of(before)
    [result] = allocated(claim)
    old = {p["metadata"]["uid"] for p in plugin.pods()}
    [old_name] = [p["metadata"]["name"] for p in plugin.pods()]
    plugin.cp.kubectl("delete", "pod", "-n", realnode.PLUGIN_NAMESPACE, old_name, "--wait=false")
    plugin.wait_rolled(old)

    still = kube.get_pod("before") or {}
    assert still.get("status", {}).get("phase") == "Running"
    assert spec_file(claim) in cdi_files()

    # Made after the roll: whatever prepares it is the new instance.
    same = _give_same_device(kube, "gpu-same", claim)
    kube.create_pod("intruder", [realnode.container("app", [{"name": "dev"}])],
                    [{"name": "dev", "resourceClaimName": "gpu-same"}])
    where = f"{result['pool']}/{result['device']}"
    uid = claim["metadata"]["uid"]

    # The kubelet keeps the head and a fixed-length tail of a long event message; the
    # tail names the device (not always all of its pool) and its holder.
    refusal = f"/{result['device']} is exclusive and already prepared for claim {uid}"

    def refused() -> bool:
        return any(f.startswith("intruder:") and refusal in f for f in kube.failed_prepares())

    wait(f"new plugin instance refuses gpu-same: {where} still held for claim {uid}",
         refused, 90, kube.node.kubelet_log,
         lambda: f"{kube.pod_summary('intruder')}; failed prepares {kube.failed_prepares()}")
    assert (kube.get_pod("intruder") or {}).get("status", {}).get("phase") == "Pending"
    assert spec_file(same) not in cdi_files(), "the refused claim was prepared"
    assert (kube.get_pod("before") or {}).get("status", {}).get("phase") == "Running"
    [own] = unit_env(kube.env("before")).values()
    assert (own["NAME"], own["CLAIM_UID"]) == (result["device"], uid)

    kube.pod("after", "gpu-d")
    after = kube.wait_running("after")
    [unit] = unit_env(kube.env("after")).values()
    assert unit["CLAIM_UID"] == kube.claim_of(after)["metadata"]["uid"]
    assert unit["NAME"] != result["device"]


def test_node_rolling_update_while_pods_start(kube: Kube, plugin: PluginDeployment) -> None:
    """e. A new image tag rolls the DaemonSet (maxSurge 1) while pods keep starting: no
    prepare fails, and the kubelet registered both instances in turn (pod-UID sockets)."""
    kube.node.ctr(
        ["images", "tag", "--force", realnode.SIMDRA_IMAGE, realnode.SIMDRA_IMAGE + "-next"]
    )
    kube.template("gpu-e", "gpu.dra.example.com")
    old = {p["metadata"]["uid"] for p in plugin.pods()}
    plugin.set_tag("e2e-next")
    names = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(names) < 6:
        names.append(f"roll-{len(names)}")
        kube.pod(names[-1], "gpu-e")
        time.sleep(2)
    plugin.wait_rolled(old)
    for n in names:
        kube.wait_running(n)
    assert [f for f in kube.failed_prepares() if f.split(":")[0] in names] == []
    [new] = plugin.pods()
    log = kube.node.kubelet_log.read_text(errors="replace")
    registered = set(re.findall(r"dra\.example\.com-([0-9a-f-]{36})-reg\.sock", log))
    assert {new["metadata"]["uid"], *old} <= registered


def _helm(*args: str) -> str:
    """Real helm (hack/build-helm.sh builds and caches it) against the run's cluster."""
    import os
    import subprocess

    helm = os.environ.get("SIMDRA_HELM") or subprocess.run(
        ["bash", str(realnode.REPO / "hack/build-helm.sh")], capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1]
    result = subprocess.run([helm, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"helm {args[0]}: {result.stderr.strip()[-500:]}"
    return result.stdout


def test_node_helm_install_serves_the_node(kube: Kube, plugin: PluginDeployment) -> None:
    """Installed with `helm install` (our chart) instead of kustomize: the DaemonSet pod
    registers and publishes, and a GPU pod runs with its device; uninstalled after."""
    plugin.delete()  # the kustomize objects (DeviceClasses stay: the run shares them)
    core = realnode.client.CoreV1Api(plugin.cp.api_client())
    wait("namespace simdra gone before helm install",
         lambda: realnode.PLUGIN_NAMESPACE not in {n.metadata.name for n in
                                                   core.list_namespace().items},
         120, kube.node.kubelet_log)
    name, _, tag = realnode.SIMDRA_IMAGE.rpartition(":")
    kubeconfig = str(plugin.cp.kubeconfig)
    namespace = realnode.PLUGIN_NAMESPACE
    # The chart installs into the release namespace, made first as docs/operator.md says.
    plugin.cp.kubectl("create", "namespace", namespace)
    plugin.cp.kubectl("label", "namespace", namespace,
                      "pod-security.kubernetes.io/enforce=privileged")
    try:
        _helm("install", "simdra", str(realnode.REPO / "deploy/helm/simdra"),
              "--kubeconfig", kubeconfig, "--namespace", namespace,
              "-f", str(realnode.REPO / "deploy/helm/values/local-image.yaml"),
              "--set", f"image.repository={name}", "--set", f"image.tag={tag}",
              "--set", "deviceClasses.enabled=false",
              "--set-json", f'nodeSelector={{"{realnode.NODE_LABEL}": "true"}}',
              "--wait", "--timeout", "3m")
        plugin.wait_ready()
        kube.template("helm-gpu", "gpu.dra.example.com")
        kube.pod("helm-gpu-pod", "helm-gpu")
        pod = kube.wait_running("helm-gpu-pod")
        [result] = allocated(kube.claim_of(pod))
        [unit] = unit_env(kube.env("helm-gpu-pod")).values()
        assert unit["NAME"] == result["device"]
    finally:
        _helm("uninstall", "simdra", "--kubeconfig", kubeconfig, "--namespace", namespace,
              "--wait", "--timeout", "2m")
        wait("helm release's plugin pods gone", lambda: not plugin.pods(), 120,
             kube.node.kubelet_log, plugin.describe)
        plugin.cp.kubectl("delete", "namespace", namespace, "--wait=false")
        wait("namespace simdra gone after helm uninstall",
             lambda: realnode.PLUGIN_NAMESPACE not in {n.metadata.name for n in
                                                       core.list_namespace().items},
             120, kube.node.kubelet_log)
        plugin.apply()  # back to the kustomize deployment the module's teardown removes
