"""A kubelet restart on the real node while claims are prepared: the kubelet resumes from
its checkpoint and re-registers the plugin; running pods keep their devices, nothing is
prepared again, and nothing is lost."""

from __future__ import annotations

from pathlib import Path

from .. import realnode
from ..realnode import (
    PLUGIN_NAMESPACE,
    Kube,
    PluginDeployment,
    cdi_files,
    cdi_mtimes,
    plugin_usage,
    spec_file,
    unit_env,
    wait,
)


def _registered_since(log: Path, offset: int) -> bool:
    """The kubelet started registering our plugin after `offset` in its log."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return any(
        "RegisterPlugin started" in line and "dra.example.com" in line
        for line in text.splitlines()
    )


def _serves_log(plugin: PluginDeployment) -> bool:
    """The API server reaches the kubelet for the plugin pod's log (after a restart, the
    kubelet's server comes up a moment after the Node is Ready again)."""
    pods = plugin.ready_pods()
    return len(pods) == 1 and plugin.cp.kubectl(
        "logs", "-n", PLUGIN_NAMESPACE, pods[0]["metadata"]["name"], "--tail=1", check=False
    ).returncode == 0


def _container_ids(kube: Kube, name: str) -> list[tuple[str, int]]:
    statuses = (kube.get_pod(name) or {}).get("status", {}).get("containerStatuses") or []
    return [(s.get("containerID", ""), s.get("restartCount", 0)) for s in statuses]


def test_node_kubelet_restart_keeps_prepared_claims(
    kube: Kube, plugin: PluginDeployment
) -> None:
    """Restart the kubelet with a GPU pod and a NIC-share pod running: both keep running
    (same containers) with their CDI spec files untouched, the plugin prepared each claim
    once, a new pod still starts, and deleting the old pods still unprepares them."""
    kube.template("gpu-r", "gpu.dra.example.com")
    kube.template("nic-r", "nic.dra.example.com",
                  capacity=realnode.incidental_capacity(kube.cp, "1G"))
    kube.pod("keep-gpu", "gpu-r")
    kube.pod("keep-nic", "nic-r")
    names = ("keep-gpu", "keep-nic")
    claims = [kube.claim_of(kube.wait_running(n)) for n in names]
    before = {n: unit_env(kube.env(n)) for n in names}
    files = {spec_file(c) for c in claims}
    mtimes = {f: t for f, t in cdi_mtimes().items() if f in files}
    assert set(mtimes) == files
    containers = {n: _container_ids(kube, n) for n in names}

    log = kube.node.kubelet_log
    offset = log.stat().st_size  # what follows is the restarted kubelet's
    kube.node.restart_kubelet()  # and waits for Node Ready
    wait("restarted kubelet registers the plugin again", lambda: _registered_since(log, offset),
         90, log)
    plugin.wait_ready()  # its readiness is probed afresh by the new kubelet
    wait("restarted kubelet serves the plugin pod's log", lambda: _serves_log(plugin), 60, log)

    for n in names:
        assert _container_ids(kube, n) == containers[n], f"{n}: containers changed"
        assert (kube.get_pod(n) or {})["status"]["phase"] == "Running"
    assert {f: t for f, t in cdi_mtimes().items() if f in files} == mtimes
    assert [plugin.prepares_of(c) for c in claims] == [1, 1]
    held = {h["claim"]["uid"] for d in plugin_usage()["devices"] for h in d["holders"]}
    assert {c["metadata"]["uid"] for c in claims} <= held
    assert [f for f in kube.failed_prepares() if f.split(":")[0] in names] == []

    kube.pod("after-restart", "gpu-r")
    claim = kube.claim_of(kube.wait_running("after-restart"))
    [unit] = unit_env(kube.env("after-restart")).values()
    assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
    [old] = before["keep-gpu"].values()
    assert unit["NAME"] != old["NAME"]

    for n in names:
        kube.delete_pod(n)
    wait("CDI spec files of the pods from before the restart removed",
         lambda: not (files & cdi_files()), 60, log, lambda: str(sorted(files & cdi_files())))
