"""Real node scenarios: our DaemonSet (deploy/overlays) on the real kubelet and containerd.

Pods with claims run on the node and their containers see exactly their devices' CDI
edits (each pod prints its SIMDRA_ env at start, read back with the pod log API through
the kubelet); deleting them unprepares; the plugin survives restarts and rolling
updates; what it reports (claim status, device health) shows in the API; the sysfs
backend runs on the node's real /sys. Fixtures: realnode.py. They share one node and
one DaemonSet for the session, so they live in one module (fixtures defined in a test
module are per module).
"""

from __future__ import annotations

import re
import time

import pytest

from driver.core.quantity import parse_quantity

from . import realnode
from .realnode import (
    Kube,
    PluginDeployment,
    cdi_files,
    gates_of,
    node_slices,
    plugin_usage,
    unit_env,
    wait,
)

# Fixtures (see realnode.py).
node_bin, node_images, real_node = realnode.node_bin, realnode.node_images, realnode.real_node
plugin, kube = realnode.plugin, realnode.kube
DATA_DIR = "/var/lib/kubelet/plugins/dra.example.com"  # the plugin's hostPath state


def _allocated(claim: dict) -> list[dict]:
    return claim["status"]["allocation"]["devices"]["results"]


def _spec_file(claim: dict) -> str:
    return f"k8s.dra.example.com-device_{claim['metadata']['uid']}.json"


def test_node_gpu_pod_sees_its_cdi_env(kube: Kube) -> None:
    """a. One GPU from a ResourceClaimTemplate: the container's env is that device's."""
    kube.template("one-gpu", "gpu.dra.example.com")
    kube.pod("gpu-pod", "one-gpu")
    pod = kube.wait_running("gpu-pod")
    claim = kube.claim_of(pod)
    [result] = _allocated(claim)
    units = unit_env(kube.env("gpu-pod"))
    assert len(units) == 1, f"expected the env of one device, got {sorted(units)}"
    [unit] = units.values()
    assert unit["NAME"] == result["device"]
    assert unit["TYPE"] == "gpu"
    assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
    assert unit["CLAIM"] == f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
    assert unit["CDI_DEVICE"].startswith("k8s.dra.example.com/device=")
    assert f"k8s.dra.example.com-device_{claim['metadata']['uid']}.json" in cdi_files()


def test_node_deleting_pods_unprepares(kube: Kube) -> None:
    """c. Deleting the pods: CDI spec files gone, claims deleted, NIC capacity free again."""
    kube.template("nic-2g", "nic.dra.example.com", capacity={"bandwidth": "2G"})
    kube.template("gpu-1", "gpu.dra.example.com")
    kube.pod("nic-pod", "nic-2g")
    kube.pod("gpu-pod-c", "gpu-1")
    pods = [kube.wait_running(n) for n in ("nic-pod", "gpu-pod-c")]
    claims = [kube.claim_of(p) for p in pods]
    files = {f"k8s.dra.example.com-device_{c['metadata']['uid']}.json" for c in claims}
    assert files <= cdi_files()
    nic = _allocated(claims[0])[0]
    # The real scheduler writes the rounded amount in binary-SI form ("1953125Ki" for 2G):
    # compare values, not strings.
    assert parse_quantity(nic["consumedCapacity"]["bandwidth"]) == parse_quantity("2G")
    held = next(d for d in plugin_usage()["devices"] if d["device"] == nic["device"])
    assert [h["claim"]["uid"] for h in held["holders"]] == [claims[0]["metadata"]["uid"]]

    for n in ("nic-pod", "gpu-pod-c"):
        kube.delete_pod(n)
    wait(
        "CDI spec files of the deleted pods' claims removed",
        lambda: not (files & cdi_files()),
        60,
        kube.node.kubelet_log,
        lambda: str(sorted(files & cdi_files())),
    )
    for c in claims:
        wait(
            f"claim {c['metadata']['name']} deleted with its pod",
            lambda c=c: (
                not any(
                    x.metadata.uid == c["metadata"]["uid"]
                    for x in kube.resource.list_namespaced_resource_claim(
                        c["metadata"]["namespace"]
                    ).items
                )
            ),
            60,
            kube.node.kubelet_log,
        )
    # Capacity is free again: the plugin's ledger holds nothing for that NIC, and the
    # scheduler gives one claim all of its bandwidth.
    still_held = [
        d for d in plugin_usage()["devices"] if d["device"] == nic["device"] and d["holders"]
    ]
    assert still_held == []
    device = next(
        d
        for s in node_slices(kube.cp, kube.node.name)
        for d in s["spec"].get("devices") or []
        if d["name"] == nic["device"]
    )
    interface = device["attributes"]["interfaceName"]["string"]
    kube.template(
        "nic-all",
        "nic.dra.example.com",
        capacity={"bandwidth": device["capacity"]["bandwidth"]["value"]},
        selector=f'device.attributes["dra.example.com"].interfaceName == "{interface}"',
    )
    kube.pod("nic-all", "nic-all")
    [result] = _allocated(kube.claim_of(kube.wait_running("nic-all")))
    assert result["device"] == nic["device"]


def test_node_two_pods_share_one_nic(kube: Kube) -> None:
    """b. Two pods take 1G each of the same NIC, run side by side, and each container
    sees only its own share."""
    selector = 'device.attributes["dra.example.com"].interfaceName == "sim3"'
    kube.template("nic3-1g", "nic.dra.example.com", capacity={"bandwidth": "1G"}, selector=selector)
    kube.pod("share-a", "nic3-1g")
    kube.pod("share-b", "nic3-1g")
    pods = {n: kube.wait_running(n) for n in ("share-a", "share-b")}
    seen = {}
    for name, pod in pods.items():
        claim = kube.claim_of(pod)
        [result] = _allocated(claim)
        units = unit_env(kube.env(name))
        assert len(units) == 1, f"{name}: expected one share's env, got {sorted(units)}"
        [unit] = units.values()
        assert unit["NAME"] == result["device"] == "nic-3"
        assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
        assert unit["SHARE_ID"] == result["shareID"]
        assert unit["CAPACITY_BANDWIDTH"] == "1G"
        seen[name] = unit
    assert seen["share-a"]["SHARE_ID"] != seen["share-b"]["SHARE_ID"]
    assert seen["share-a"]["CDI_DEVICE"] != seen["share-b"]["CDI_DEVICE"]


def test_node_plugin_pod_deleted_restarts(kube: Kube, plugin: PluginDeployment) -> None:
    """d. `kubectl delete pod` of the plugin: the DaemonSet starts a new one, the running
    pod keeps its device, and a new pod still starts."""
    kube.template("gpu-d", "gpu.dra.example.com")
    kube.pod("before", "gpu-d")
    before = kube.wait_running("before")
    claim = kube.claim_of(before)
    old = {p["metadata"]["uid"] for p in plugin.pods()}
    [old_name] = [p["metadata"]["name"] for p in plugin.pods()]
    plugin.cp.kubectl("delete", "pod", "-n", realnode.PLUGIN_NAMESPACE, old_name, "--wait=false")
    plugin.wait_rolled(old)

    still = kube.get_pod("before") or {}
    assert still.get("status", {}).get("phase") == "Running"
    assert _spec_file(claim) in cdi_files()
    kube.pod("after", "gpu-d")
    after = kube.wait_running("after")
    [unit] = unit_env(kube.env("after")).values()
    assert unit["CLAIM_UID"] == kube.claim_of(after)["metadata"]["uid"]
    assert unit["NAME"] != unit_env(kube.env("before")).popitem()[1]["NAME"]


def test_node_claim_status_overlay_fills_devices(kube: Kube, plugin: PluginDeployment) -> None:
    """g. With deploy/overlays/fake-claim-status the claim's status.devices is written."""
    with plugin.using("fake-claim-status"):
        kube.template("gpu-g", "gpu.dra.example.com")
        kube.pod("status-pod", "gpu-g")
        pod = kube.wait_running("status-pod")
        name = kube.claim_of(pod)["metadata"]["name"]
        found: dict = {}

        def written() -> bool:
            claim = kube.claim_of(pod)
            found.update(claim)
            return bool(claim.get("status", {}).get("devices"))

        wait(
            f"claim {name} status.devices written by the plugin", written, 60, kube.node.kubelet_log
        )
        [result] = found["status"]["allocation"]["devices"]["results"]
        [dev] = found["status"]["devices"]
        assert (dev["driver"], dev["pool"], dev["device"]) == (
            result["driver"],
            result["pool"],
            result["device"],
        )
        assert {c["type"]: c["status"] for c in dev["conditions"]}.get("Ready") == "True"
        assert dev["data"]["cdiDeviceID"].startswith("k8s.dra.example.com/device=")
        kube.delete_all()


def test_node_sysfs_overlay_publishes_without_error(plugin: PluginDeployment) -> None:
    """h. The sysfs backend on the real /sys: the pod is Ready (registered), its pool is
    published and accepted by the API server (possibly with no devices), no errors logged."""
    fake = re.compile(r"^(gpu|nic)-[0-9]+$")  # the fake profiles' device names
    with plugin.using("sysfs"):
        slices: list = []

        def republished() -> bool:
            slices[:] = node_slices(plugin.cp, plugin.node.name)
            names = [d["name"] for s in slices for d in s["spec"].get("devices") or []]
            return bool(slices) and not any(fake.match(n) for n in names)

        wait(
            "sysfs plugin replaced the fake devices in the node's slices",
            republished,
            90,
            plugin.node.kubelet_log,
            lambda: str([d["name"] for s in slices for d in s["spec"].get("devices") or []]),
        )
        for s in slices:
            assert s["spec"]["pool"]["resourceSliceCount"] == len(
                [x for x in slices if x["spec"]["pool"]["name"] == s["spec"]["pool"]["name"]]
            )
        log = plugin.logs()
        errors = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
        assert errors == [], errors[:3]


def test_node_fault_shows_in_pod_status(kube: Kube, plugin: PluginDeployment) -> None:
    """f. `simdra fault DEVICE unhealthy` in the plugin pod: the pod using the device
    shows it Unhealthy in status.containerStatuses[].allocatedResourcesStatus."""
    if not gates_of(kube.cp).get("ResourceHealthStatus"):
        pytest.skip("this Kubernetes release has no ResourceHealthStatus gate")
    kube.template("gpu-f", "gpu.dra.example.com")
    kube.pod("health-pod", "gpu-f")
    pod = kube.wait_running("health-pod")
    [result] = kube.claim_of(pod)["status"]["allocation"]["devices"]["results"]
    device = result["device"]
    plugin.exec("simdra", "fault", "--plugin-dir", DATA_DIR, device, "unhealthy")
    try:
        health: list = []

        def shown() -> bool:
            st = (kube.get_pod("health-pod") or {}).get("status", {})
            statuses = (st.get("containerStatuses") or [{}])[0].get(
                "allocatedResourcesStatus"
            ) or []
            health[:] = [r for s in statuses for r in s.get("resources") or []]
            return any(r.get("health") == "Unhealthy" for r in health)

        wait(
            f"pod health-pod shows {device} Unhealthy",
            shown,
            90,
            kube.node.kubelet_log,
            lambda: str(health),
        )
        [res] = [r for r in health if r.get("health") == "Unhealthy"]
        assert res["resourceID"].startswith("k8s.dra.example.com/device=")
        assert res["resourceID"].endswith(device)
    finally:
        plugin.exec("simdra", "fault", "--plugin-dir", DATA_DIR, "reset")


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
    try:
        _helm("install", "simdra", str(realnode.REPO / "deploy/helm/simdra"),
              "--kubeconfig", kubeconfig,
              "-f", str(realnode.REPO / "deploy/helm/values/local-image.yaml"),
              "--set", f"image.repository={name}", "--set", f"image.tag={tag}",
              "--set", "deviceClasses.enabled=false",
              "--set-json", f'nodeSelector={{"{realnode.NODE_LABEL}": "true"}}',
              "--wait", "--timeout", "3m")
        plugin.wait_ready()
        kube.template("helm-gpu", "gpu.dra.example.com")
        kube.pod("helm-gpu-pod", "helm-gpu")
        pod = kube.wait_running("helm-gpu-pod")
        [result] = _allocated(kube.claim_of(pod))
        [unit] = unit_env(kube.env("helm-gpu-pod")).values()
        assert unit["NAME"] == result["device"]
    finally:
        _helm("uninstall", "simdra", "--kubeconfig", kubeconfig, "--wait", "--timeout", "2m")
        wait("helm release's plugin pods gone", lambda: not plugin.pods(), 120,
             kube.node.kubelet_log, plugin.describe)
        wait("namespace simdra gone after helm uninstall",
             lambda: realnode.PLUGIN_NAMESPACE not in {n.metadata.name for n in
                                                       core.list_namespace().items},
             120, kube.node.kubelet_log)
        plugin.apply()  # back to the kustomize deployment the module's teardown removes
