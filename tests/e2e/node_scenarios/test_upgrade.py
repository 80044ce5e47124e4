"""An in-place control-plane upgrade while the plugin serves prepared claims.

The API server, controller-manager and scheduler of the run's release are replaced by
another release's (SIMDRA_E2E_UPGRADE_BIN) on the same etcd, port and credentials, as an
operator upgrades a cluster: the API server first, nodes later (the kubelet stays, within
the supported skew). It needs two releases built, so only `hack/e2e-upgrade.sh` runs it
(marker `upgrade`; hack/e2e.sh deselects it otherwise).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ..realnode import (
    Kube,
    PluginDeployment,
    cdi_mtimes,
    incidental_capacity,
    node_slices,
    plugin_usage,
    spec_file,
    unit_env,
    wait,
)

pytestmark = pytest.mark.upgrade

WRITES = "simdra_api_writes_total"
QUIET_S = 30  # how long the slices must stay unwritten once the plugin is synced again


def _slice_versions(kube: Kube) -> dict[str, str]:
    return {s["metadata"]["name"]: s["metadata"]["resourceVersion"]
            for s in node_slices(kube.cp, kube.node.name)}


def _held() -> set[str]:
    """Claim UIDs the plugin's ledger on the node holds devices for."""
    return {h["claim"]["uid"] for d in plugin_usage()["devices"] for h in d["holders"]}


def _writes(plugin: PluginDeployment) -> float:
    return plugin.metric(WRITES) or 0.0


def _synced(plugin: PluginDeployment) -> bool:
    try:
        return plugin.metric("simdra_publisher_synced") == 1.0
    except AssertionError:  # kubectl exec fails while the API server restarts
        return False


def test_node_control_plane_upgrade_keeps_claims_prepared(
    kube: Kube, plugin: PluginDeployment
) -> None:
    """Upgrade the control plane under a GPU pod and a NIC-share pod: the API server
    reports the new release; the plugin's slices are still there, unchanged, and are not
    written again for QUIET_S seconds once the plugin is synced (no write loop); both
    pods keep running (same containers) with their CDI specs untouched and their claims
    prepared; the new scheduler allocates a new pod's claim, which the plugin prepares;
    deleting the old pods still unprepares them."""
    target = Path(os.environ.get("SIMDRA_E2E_UPGRADE_BIN", ""))
    if not (target / "kube-apiserver").exists():
        pytest.skip("no release to upgrade to: SIMDRA_E2E_UPGRADE_BIN (hack/e2e-upgrade.sh)")
    before_version = kube.cp.version()
    kube.template("gpu-u", "gpu.dra.example.com")
    kube.template("nic-u", "nic.dra.example.com",
                  capacity=incidental_capacity(kube.cp, "1G"))
    kube.pod("up-gpu", "gpu-u")
    kube.pod("up-nic", "nic-u")
    names = ("up-gpu", "up-nic")
    claims = [kube.claim_of(kube.wait_running(n)) for n in names]
    env = {n: unit_env(kube.env(n)) for n in names}
    files = {spec_file(c) for c in claims}
    mtimes = {f: t for f, t in cdi_mtimes().items() if f in files}
    assert {c["metadata"]["uid"] for c in claims} <= _held()
    slices = _slice_versions(kube)

    kube.cp.upgrade(target)
    assert kube.cp.version() != before_version
    wait(f"plugin synced with kube-apiserver {kube.cp.version()}", lambda: _synced(plugin),
         120, kube.node.kubelet_log)
    writes = _writes(plugin)
    time.sleep(QUIET_S)
    assert _writes(plugin) == writes, "the plugin kept writing slices after the upgrade"
    assert _slice_versions(kube) == slices, "slices changed across the upgrade"

    for name, claim in zip(names, claims, strict=True):
        pod = kube.get_pod(name) or {}
        assert pod.get("status", {}).get("phase") == "Running", kube.pod_summary(name)
        assert kube.claim_of(pod)["metadata"]["uid"] == claim["metadata"]["uid"]
    assert {f: t for f, t in cdi_mtimes().items() if f in files} == mtimes
    assert {c["metadata"]["uid"] for c in claims} <= _held()

    kube.pod("up-after", "gpu-u")  # allocated by the new scheduler
    kube.wait_running("up-after")
    [unit] = unit_env(kube.env("up-after")).values()
    assert unit["NAME"].startswith("gpu-")
    assert all(env[n] == unit_env(kube.env(n)) for n in names)
    for name in names:
        kube.delete_pod(name)
    wait("the old pods' claims unprepared after the upgrade",
         lambda: not files & set(cdi_mtimes()), 60, kube.node.kubelet_log)
