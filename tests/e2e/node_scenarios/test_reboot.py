"""A node reboot with a claim prepared (`Node.reboot`: every container killed, mounts and
tmpfs gone, /var/lib kept), on the real node.

kubeletplugin v0.38 documents that NodePrepareResources after a reboot comes before the
kubelet restarts the application pods, "a good place to verify that everything is really
ready". The plugin answers such a prepare from its record only while every recorded device
is on the node, and puts back the CDI spec the reboot wiped; a device gone meanwhile is
an error naming it, so the pod waits instead of starting without its device.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from .. import releases
from ..realnode import (
    CDI_ROOT,
    DATA_DIR,
    NAMESPACE,
    REPO,
    Kube,
    PluginDeployment,
    allocated,
    cdi_files,
    container,
    on_real_node,
    spec_file,
    unit_env,
    wait,
)

GPU = "gpu.dra.example.com"


def _fault(*args: str) -> None:
    """`simdra fault` on the plugin's control file (a hostPath: it outlives the reboot)."""
    subprocess.run([sys.executable, "-m", "simdra", "fault", "--plugin-dir", DATA_DIR, *args],
                   check=True, capture_output=True, timeout=60, cwd=REPO)


def _always_pod(kube: Kube, name: str, template: str) -> None:
    """A pod that the kubelet restarts after a reboot (restartPolicy Always)."""
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": on_real_node({
            "containers": [container("app", [{"name": "dev"}])],
            "restartPolicy": "Always",
            "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": template}]}),
    }
    kube.core.create_namespaced_pod(NAMESPACE, body)


def _kubelet_minor(kube: Kube) -> int:
    node = kube.core.read_node(kube.node.name)
    return int(node.status.node_info.kubelet_version.lstrip("v").split(".")[1])


def _runs_on_the_node(kube: Kube, name: str) -> bool:
    """A task of pod `name`'s container runs in the node's containerd (what the kubelet
    started, whether or not it could report it)."""
    ids = kube.node.ctr(["containers", "ls", "-q",
                         f'labels."io.kubernetes.pod.name"=={name}',
                         'labels."io.kubernetes.container.name"==app']).stdout.split()
    tasks = kube.node.ctr(["tasks", "ls"]).stdout.splitlines()
    return any(line.split()[0] in ids and "RUNNING" in line for line in tasks[1:] if line)


def _container_id(kube: Kube, name: str) -> str:
    statuses = ((kube.get_pod(name) or {}).get("status") or {}).get("containerStatuses") or []
    running = [s for s in statuses if (s.get("state") or {}).get("running")]
    return str(running[0].get("containerID", "")) if running else ""


def test_node_reboot_prepares_again_only_when_the_device_is_there(
    kube: Kube, plugin: PluginDeployment
) -> None:
    """Reboot with a GPU pod running, its device removed while the node is down: after
    the reboot the kubelet's prepare is refused naming the device ("not ready") and the
    pod does not start; the record stays (the plugin's start puts back the CDI spec the
    reboot wiped, byte for byte, as for any recorded claim). The device back, the next
    prepare succeeds and the pod runs again in a new container on the same device."""
    kube.template("gpu-boot", GPU)
    _always_pod(kube, "boot", "gpu-boot")
    claim = kube.claim_of(kube.wait_running("boot"))
    [result] = allocated(claim)
    device, spec = result["device"], spec_file(claim)
    content = (CDI_ROOT / spec).read_bytes()
    before = (unit_env(kube.env("boot")), _container_id(kube, "boot"))

    def device_gone() -> None:
        assert spec not in cdi_files(), "the reboot left the CDI spec (tmpfs)"
        _fault(device, "remove")

    try:
        kube.node.reboot(while_down=device_gone)
        plugin.wait_ready()
        wait("the kubelet's prepare after the reboot refused: the device is gone",
             lambda: any(f"{device} is no longer on this node; not ready" in m
                         for m in kube.failed_prepares("boot")),
             120, kube.node.kubelet_log, lambda: "\n".join(kube.failed_prepares("boot")))
        assert not _container_id(kube, "boot"), "the pod started without its device"
    finally:
        _fault(device, "add")
    assert (CDI_ROOT / spec).read_bytes() == content
    if not releases.status_survives_a_second_prepare(_kubelet_minor(kube)):
        # Its kubelet cannot report the new container (releases.py): see it on the node.
        wait("pod boot's container running again after the reboot (containerd)",
             lambda: _runs_on_the_node(kube, "boot"), 180, kube.node.kubelet_log)
        return
    wait("pod boot running again after the reboot", lambda: bool(_container_id(kube, "boot")),
         180, kube.node.kubelet_log, lambda: kube.pod_summary("boot"))
    after = (unit_env(kube.env("boot")), _container_id(kube, "boot"))
    assert after[0] == before[0] and after[1] != before[1]
