"""Reconciliation on the real node: the kubelet loses its DRA state while its pod is
deleted, so nothing will ever unprepare the pod's claim; the plugin finds the claim gone
from the API, unprepares it, and a new pod gets the very same device."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from .. import realnode
from ..realnode import (
    NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    cdi_files,
    spec_file,
    unit_env,
    wait,
)

DAEMONSET = "daemonset/simdra-kubelet-plugin"
# Checks every 2 s, a leak acted on after 10 s: short for the test, the same rules.
RECONCILE_ENV = {"RECONCILE_INTERVAL": "2", "RECONCILE_GRACE": "10"}
METRICS = (
    "import urllib.request; "
    "print(urllib.request.urlopen('http://127.0.0.1:9400/metrics', timeout=10).read().decode())"
)


@contextlib.contextmanager
def _reconciling(plugin: PluginDeployment) -> Iterator[None]:
    """The DaemonSet with RECONCILE_ENV (a rolling update), and without it after."""
    old = {p["metadata"]["uid"] for p in plugin.pods()}
    pairs = [f"{k}={v}" for k, v in RECONCILE_ENV.items()]
    plugin.cp.kubectl("set", "env", "-n", realnode.PLUGIN_NAMESPACE, DAEMONSET, *pairs)
    plugin.wait_rolled(old)
    try:
        yield
    finally:
        old = {p["metadata"]["uid"] for p in plugin.pods()}
        unset = [f"{k}-" for k in RECONCILE_ENV]
        plugin.cp.kubectl("set", "env", "-n", realnode.PLUGIN_NAMESPACE, DAEMONSET, *unset)
        plugin.wait_rolled(old)


def _index_of(plugin: PluginDeployment, pool: str, device: str) -> int:
    """The published `index` attribute of a device of the node."""
    for item in realnode.node_slices(plugin.cp, plugin.node.name):
        if item["spec"]["pool"]["name"] == pool:
            for published in item["spec"].get("devices") or []:
                if published["name"] == device:
                    return int(published["attributes"]["index"]["int"])
    raise AssertionError(f"device {pool}/{device} is not published")


def _claim_gone(kube: Kube, uid: str) -> bool:
    claims = kube.resource.list_namespaced_resource_claim(NAMESPACE).items
    return not any(c.metadata.uid == uid for c in claims)


def test_node_reconcile_frees_a_claim_the_kubelet_forgot(
        kube: Kube, plugin: PluginDeployment) -> None:
    """h. Kubelet stopped, its pod force-deleted (the claim goes with it) and its
    dra_manager_state removed: after the restart nobody unprepares the claim, yet the
    plugin's reconciliation does, and a new pod pinned to that device runs."""
    with _reconciling(plugin):
        kube.template("gpu-leak", "gpu.dra.example.com")
        kube.pod("leaky", "gpu-leak")
        claim = kube.claim_of(kube.wait_running("leaky"))
        uid = claim["metadata"]["uid"]
        [result] = allocated(claim)
        assert spec_file(claim) in cdi_files()

        def lose_state() -> None:
            kube.core.delete_namespaced_pod("leaky", NAMESPACE, grace_period_seconds=0)
            wait(f"claim {uid} deleted with its force-deleted pod",
                 lambda: _claim_gone(kube, uid), 60, kube.node.kubelet_log)
            state = kube.node.kubelet_root / "dra_manager_state"
            assert state.is_file(), f"no kubelet DRA checkpoint at {state}"
            state.unlink()

        kube.node.restart_kubelet(lose_state)
        plugin.wait_ready()  # registered again with the new kubelet, slices republished
        wait(f"CDI spec of leaked claim {uid} removed by reconciliation",
             lambda: spec_file(claim) not in cdi_files(), 120, kube.node.kubelet_log,
             lambda: plugin.logs()[-1500:])

        lines = [line for line in plugin.logs().splitlines()
                 if "reconcile: unprepared" in line and uid in line]
        assert len(lines) == 1 and f"{NAMESPACE}/{claim['metadata']['name']}" in lines[0]
        assert "claim_deleted" in lines[0], lines
        metrics = plugin.exec("python", "-c", METRICS)
        counted = re.search(r'^simdra_reconciled_claims_total\{reason="claim_deleted"\} (\S+)$',
                            metrics, re.MULTILINE)
        assert counted and float(counted.group(1)) >= 1.0, metrics[-800:]

        # CEL sees no device names: pin the new claim by the device's index attribute.
        index = _index_of(plugin, result["pool"], result["device"])
        kube.template("gpu-same", "gpu.dra.example.com",
                      selector=f'device.attributes["{realnode.DRIVER}"].index == {index}')
        kube.pod("reuser", "gpu-same")
        pod = kube.wait_running("reuser")
        [unit] = unit_env(kube.env("reuser")).values()
        assert unit["NAME"] == result["device"]
        assert unit["CLAIM_UID"] == kube.claim_of(pod)["metadata"]["uid"]
        assert [f for f in kube.failed_prepares() if f.startswith("reuser:")] == []
